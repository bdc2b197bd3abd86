// new_backend.cpp — `dlhost new-backend NAME [--dir DIR]`: writes a buildable out-of-tree backend
// plugin (CMakeLists.txt and NAME_backend.cpp on the backend kit) whose compile answers
// UNIMPLEMENTED for every op, so a vendor starts from a plugin that builds, loads, is listed by
// `dlhost plugins` and is conformed (every problem UNIMPLEMENTED) before writing a kernel.
// The files are text written here, not copied from anywhere; nothing is run and no plugin is
// loaded (a name already taken is found from the plugin folders' file names).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/plugin_registry.h"
#include "output/output_file.h"
#include "run/resume.h"

namespace dlhost {

namespace {

namespace fs = std::filesystem;

// Every "@NAME@" in `text` replaced by `name`.
std::string fill(std::string text, const std::string& name) {
  for (size_t at; (at = text.find("@NAME@")) != std::string::npos;) text.replace(at, 6, name);
  return text;
}

constexpr const char* kCMakeLists =
    R"TPL(# The @NAME@ dlhost backend, built out of tree against the installed SDK:
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<dlhost SDK prefix>    (Release unless told otherwise)
#   cmake --build build
#   dlhost plugins --plugin-path build
#   dlhost conform --backend build/libdlhost_@NAME@.so --strict
cmake_minimum_required(VERSION 3.16)
project(dlhost_@NAME@ LANGUAGES CXX)
find_package(dlhost 1 REQUIRED CONFIG)
dlhost_add_plugin(@NAME@ SOURCES @NAME@_backend.cpp)
)TPL";

constexpr const char* kSource =
    R"TPL(// @NAME@_backend.cpp — the @NAME@ dlhost backend, from `dlhost new-backend`. It builds and
// loads; compile answers UNIMPLEMENTED for every op, so `dlhost conform` reports every problem
// UNIMPLEMENTED. Implement an op in @NAME@Model, accept it in implemented(), declare it in
// capabilities(), and conform it (docs/plugin-sdk.md; examples/backend_naive is a complete one).
#include <memory>
#include <string>

#include "dlhost/backend_kit.hpp"
#include "dlhost/cpu_kit.hpp"
#include "dlhost/graph_access.hpp"

namespace @NAME@ {

namespace sdk = dlhost::sdk;

struct Context {};  // a device opened for one case

// The ops this backend implements; none yet (dlhost_graph.h lists them with their formulas).
bool implemented(int32_t op) { return op == DLHOST_OP_INPUT; }

class @NAME@Model final : public sdk::Model {
 public:
  @NAME@Model(const dlhost_graph&, const dlhost_optimizer_desc& opt) : opt_(opt) {}
  void set_input(int32_t, const void*, size_t) override { todo("set_input"); }
  void forward() override { todo("forward"); }
  void backward(const dlhost_grad_ready*) override { todo("backward"); }
  // sdk::sum_of_squares, clip_scale and sgd_step do the update in the documented order.
  void update() override { todo("update"); }
  float loss() const override { todo("loss"); }
  void param_buffers(int32_t, dlhost_buffer*, dlhost_buffer*) override { todo("param_buffers"); }
  void read_param(int32_t, int32_t, void*, size_t) override { todo("read_param"); }
  void write_param(int32_t, int32_t, const void*, size_t) override { todo("write_param"); }
  sdk::ModelInfo info() const override { return {}; }

 private:
  [[noreturn]] static void todo(const char* call) {
    sdk::unimplemented(std::string("@NAME@: ") + call + " is not written yet");
  }
  [[maybe_unused]] dlhost_optimizer_desc opt_;  // for update()
};

class @NAME@Backend final : public sdk::Backend<Context> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "@NAME@ 0.1.0"; }
  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return sdk::no_options();
  }
  // Declare exactly what you implement: `dlhost conform --strict` fails unless each passes.
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps;
    caps.ops = {DLHOST_OP_INPUT};
    return caps;
  }
  std::unique_ptr<Context> open(int32_t, const sdk::Options&) override {
    return std::make_unique<Context>();
  }
  std::unique_ptr<sdk::Model> compile(Context&, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc& optimizer,
                                      const sdk::Options&) override {
    for (int32_t i = 0; i < graph.num_nodes; ++i)
      if (!implemented(graph.nodes[i]->op))
        sdk::unimplemented("@NAME@: " + sdk::op_name(graph.nodes[i]->op) + " (" +
                           sdk::node_label(*graph.nodes[i]) + ") is not implemented");
    return std::make_unique<@NAME@Model>(graph, optimizer);
  }
};

}  // namespace @NAME@

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<@NAME@::@NAME@Backend>(
      host, {"@NAME@", "0.1.0", "@NAME@: a dlhost backend (from dlhost new-backend)"
});
}
)TPL";

// The plugins of this tree (plugins/, each build of it): a backend of one of these names would
// shadow it, or be shadowed, depending on the search order. Kept in step with the build by
// new_backend_e2e.sh, which checks every plugin and left-out note the build wrote.
constexpr const char* kBuiltInPlugins[] = {
    "comm_gloo",     "comm_mpi",       "comm_mpi_raw", "comm_nccl",      "cpu_bigdl",
    "cpu_libtorch",  "cpu_libtorch2",  "cpu_mxnet",    "cpu_onednn",     "cpu_onednn3",
    "cpu_reference", "cpu_tensorflow", "gpu_cudnn",    "networks_paper", "networks_transformer"};

// Words the generated source cannot use as a namespace and class-name stem: C++'s keywords and
// alternative tokens, macros every compiler here predefines or the C library defines, the
// namespaces the source itself uses, and the names CMake keeps for its own targets.
const std::set<std::string>& unusable_words() {
  static const std::set<std::string> words{
      // keywords (C++20) and alternative tokens
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
      // predefined or library macros
      "linux", "unix", "i386", "errno", "stdin", "stdout", "stderr", "assert", "offsetof",
      // namespaces the generated source uses or the standard reserves
      "std", "posix", "dlhost", "sdk",
      // CMake's own targets
      "all", "clean", "depend", "edit_cache", "help", "install", "install_local", "install_strip",
      "list_install_components", "package", "package_source", "rebuild_cache", "test"};
  return words;
}

// The names of plugins in the folders dlhost searches (`libdlhost_NAME.so`, `NAME.left-out`),
// read from the file names: nothing is loaded.
std::set<std::string> plugins_in_folders(const std::vector<std::string>& folders) {
  std::set<std::string> names;
  for (const auto& folder : folders) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("libdlhost_", 0) == 0 && entry.path().extension() == ".so")
        names.insert(file.substr(10, file.size() - 10 - 3));
      else if (entry.path().extension() == ".left-out")
        names.insert(entry.path().stem().string());
    }
  }
  return names;
}

// Why `name` cannot name a new backend, or "".
std::string name_refusal(const std::string& name, const std::vector<std::string>& folders) {
  if (!std::regex_match(name, std::regex("[a-z][a-z0-9_]{0,63}")))
    return "'" + name + "' is not a plugin name: [a-z][a-z0-9_]*, at most 64 characters";
  if (unusable_words().count(name) != 0)
    return "'" + name +
           "' cannot name a backend: it is a C++ keyword or a name the generated source or its "
           "CMake project cannot use (the source names a namespace and classes after it)";
  if (name.find("__") != std::string::npos)
    return "'" + name + "' cannot name a backend: C++ reserves names with a double underscore";
  for (const char* built_in : kBuiltInPlugins)
    if (name == built_in)
      return "'" + name +
             "' is the name of a plugin that comes with dlhost: a backend of that name would "
             "shadow it or be shadowed by it; choose another";
  if (plugins_in_folders(folders).count(name) != 0)
    return "'" + name +
           "' is the name of a plugin already in dlhost's plugin folders: a backend of that "
           "name would shadow it or be shadowed by it; choose another";
  return "";
}

int write_backend(const std::string& name, std::string dir,
                  const std::vector<std::string>& folders) {
  if (std::string why = name_refusal(name, folders); !why.empty()) {
    std::fprintf(stderr, "dlhost new-backend: %s\n", why.c_str());
    return 2;
  }
  if (dir.empty()) dir = name;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    std::fprintf(stderr, "dlhost new-backend: %s is not a folder: nothing written\n", dir.c_str());
    return 2;
  }
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    std::fprintf(stderr, "dlhost new-backend: %s exists and is not empty: nothing written\n",
                 dir.c_str());
    return 2;
  }
  const std::pair<std::string, const char*> files[] = {{"CMakeLists.txt", kCMakeLists},
                                                       {name + "_backend.cpp", kSource}};
  try {
    output::prepare_folder(dir);
    for (const auto& [file, text] : files)
      output::write_whole_file((fs::path(dir) / file).string(), fill(text, name));
  } catch (const output::OutputError& e) {
    std::fprintf(stderr, "dlhost new-backend: cannot write %s\n", e.what());
    return 2;
  }
  const std::string shown = dir, sh = shell_quote(dir);
  const std::string build_dir = shell_quote(dir + "/build");
  std::printf(
      "wrote %s/CMakeLists.txt and %s/%s_backend.cpp: a backend '%s' with every op "
      "UNIMPLEMENTED\nbuild:   cmake -S %s -B %s -DCMAKE_PREFIX_PATH=<dlhost SDK prefix> && "
      "cmake --build %s\nconform: dlhost conform --backend %s\n",
      shown.c_str(), shown.c_str(), name.c_str(), name.c_str(), sh.c_str(), build_dir.c_str(),
      build_dir.c_str(), shell_quote(dir + "/build/libdlhost_" + name + ".so").c_str());
  return 0;
}

}  // namespace

Command add_new_backend_command(CLI::App& app, const std::vector<std::string>& plugin_dirs) {
  struct Args {
    std::string name, dir;
  };
  auto args = std::make_shared<Args>();
  Command c;
  c.sub = app.add_subcommand("new-backend",
                             "Write a buildable out-of-tree backend plugin (CMakeLists.txt and "
                             "one source on the backend kit) with every op UNIMPLEMENTED");
  c.sub->add_option("name", args->name, "The backend's name, [a-z][a-z0-9_]*")->required();
  c.sub->add_option("--dir", args->dir, "Folder to write (default: NAME); must be empty");
  // Loads no plugin (loading runs a library's code): the names in the plugin folders are read
  // from their files' names.
  c.run_without_plugins = [args, &plugin_dirs] {
    std::vector<std::string> folders = plugin_dirs;
    for (const auto& f : PluginRegistry::default_search_path()) folders.push_back(f);
    return write_backend(args->name, args->dir, folders);
  };
  return c;
}

}  // namespace dlhost
