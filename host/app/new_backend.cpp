// new_backend.cpp — `dlhost new-backend NAME [--dir DIR]`: writes a buildable out-of-tree backend
// plugin (CMakeLists.txt and NAME_backend.cpp on the backend kit) whose compile answers
// UNIMPLEMENTED for every op, so a vendor starts from a plugin that builds, loads, is listed by
// `dlhost plugins` and is conformed (every problem UNIMPLEMENTED) before writing a kernel.
// The files are text written here, not copied from anywhere; nothing is run.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>

#include "app/commands.h"

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

int write_backend(const std::string& name, std::string dir) {
  if (!std::regex_match(name, std::regex("[a-z][a-z0-9_]{0,63}"))) {
    std::fprintf(stderr,
                 "dlhost new-backend: '%s' is not a plugin name: [a-z][a-z0-9_]*, at most 64 "
                 "characters\n",
                 name.c_str());
    return 2;
  }
  if (dir.empty()) dir = name;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    std::fprintf(stderr, "dlhost new-backend: %s exists and is not empty: nothing written\n",
                 dir.c_str());
    return 2;
  }
  fs::create_directories(dir, ec);
  const std::pair<std::string, const char*> files[] = {{"CMakeLists.txt", kCMakeLists},
                                                       {name + "_backend.cpp", kSource}};
  for (const auto& [file, text] : files) {
    const fs::path path = fs::path(dir) / file;
    std::ofstream out(path);
    out << fill(text, name);
    if (!out.flush()) {
      std::fprintf(stderr, "dlhost new-backend: cannot write %s\n", path.c_str());
      return 2;
    }
  }
  std::printf(
      "wrote %s/CMakeLists.txt and %s/%s_backend.cpp: a backend '%s' with every op "
      "UNIMPLEMENTED\nbuild:   cmake -S %s -B %s/build -DCMAKE_PREFIX_PATH=<dlhost SDK prefix> && "
      "cmake --build %s/build\nconform: dlhost conform --backend %s/build/libdlhost_%s.so\n",
      dir.c_str(), dir.c_str(), name.c_str(), name.c_str(), dir.c_str(), dir.c_str(), dir.c_str(),
      dir.c_str(), name.c_str());
  return 0;
}

}  // namespace

Command add_new_backend_command(CLI::App& app) {
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
  c.run = [args](const PluginRegistry&, const std::vector<NetworkRef>&) {
    return write_backend(args->name, args->dir);
  };
  return c;
}

}  // namespace dlhost
