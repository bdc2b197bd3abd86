// plugin_registry.cpp — discovery and loading of plugins with Boost.DLL, and the checks that
// decide whether a file is refused (each refusal keeps the path and a reason a user can act on).
#define BOOST_DLL_USE_STD_FS
#include "core/plugin_registry.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/host_api.h"
#include "core/plugin_tables.h"
#include "core/plugin_trust.h"

namespace dlhost {

namespace fs = std::filesystem;

struct PluginRegistry::Impl {
  // Never unloaded before the process ends (see the header).
  std::vector<boost::dll::shared_library> libraries;
};

PluginRegistry::PluginRegistry() : impl_(std::make_unique<Impl>()) {}
PluginRegistry::PluginRegistry(uint32_t host_abi_minor)
    : impl_(std::make_unique<Impl>()),
      host_abi_minor_(std::min<uint32_t>(host_abi_minor, DLHOST_ABI_MINOR)) {}
PluginRegistry::~PluginRegistry() {
  // Deliberately leak the libraries: plugin threads and TLS destructors may still refer to code
  // in them at exit, and unloading them first is how such processes crash on the way out.
  new std::vector<boost::dll::shared_library>(std::move(impl_->libraries));
}

const char* kind_name(int32_t kind) {
  switch (kind) {
    case DLHOST_PLUGIN_BACKEND:
      return "backend";
    case DLHOST_PLUGIN_COMM:
      return "comm";
    case DLHOST_PLUGIN_NETWORK:
      return "network";
    default:
      return "unknown";
  }
}

std::vector<std::string> PluginRegistry::default_search_path() {
  std::vector<std::string> folders;
  auto add = [&](const std::string& f) {
    if (f.empty()) return;
    std::error_code ec;
    if (!fs::is_directory(f, ec)) return;
    auto canonical = fs::weakly_canonical(f, ec).string();
    if (std::find(folders.begin(), folders.end(), canonical) == folders.end())
      folders.push_back(canonical);
  };
  // Where this executable lives decides: in the build tree, the build's plugin folder; installed,
  // its own prefix's (an install must not depend on the build tree still existing).
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const std::string tree = fs::weakly_canonical(DLHOST_BUILD_TREE, ec).string() + "/";
  const bool in_build_tree = ec || exe.empty() || exe.string().rfind(tree, 0) == 0;
  if (in_build_tree)
    add(DLHOST_BUILD_PLUGIN_DIR);
  else
    add((exe.parent_path() / DLHOST_BINDIR_TO_PLUGIN_DIR).lexically_normal().string());
  if (const char* env = std::getenv("DLHOST_PLUGIN_PATH")) {
    std::stringstream list(env);
    std::string item;
    while (std::getline(list, item, ':')) add(item);
  }
  add(DLHOST_INSTALL_PLUGIN_DIR);
  return folders;
}

namespace {

// Reads the build's note on a plugin it left out (`NAME.left-out`, one line of text). The text is
// only ever printed: control characters are dropped and it is cut to 400 bytes, so a planted
// file cannot forge lines of output. The first note of a name wins, as the first plugin does.
void read_left_out(const fs::path& path, std::vector<LeftOutPlugin>& notes) {
  const std::string name = path.stem().string();
  static const std::regex pattern("[a-z0-9_]{1,64}");
  if (!std::regex_match(name, pattern)) return;
  if (std::any_of(notes.begin(), notes.end(), [&](auto& n) { return n.name == name; })) return;
  // At most what is shown is read: a huge (or sparse) note costs no more than a short one.
  char head[400];
  std::ifstream in(path, std::ios::binary);
  in.read(head, sizeof(head));
  std::string line(head, static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  line = line.substr(0, line.find('\n'));
  std::string reason;
  for (char c : line)
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) reason += c;
  if (reason.empty()) reason = "left out by the build (no reason given)";
  notes.push_back({name, path.string(), reason});
}

}  // namespace

void PluginRegistry::discover(const std::vector<std::string>& folders, const Vetter& vet) {
  std::vector<std::string> files;
  std::vector<fs::path> scanned;
  for (const auto& folder : folders) {
    std::vector<std::string> in_folder;
    std::error_code ec;
    // A folder named twice (--plugin-path on the build's own plugins, which an installed or
    // in-tree dlhost searches anyway; another spelling of one path) is read once: its plugins
    // are not duplicates of themselves.
    const fs::path canonical = fs::weakly_canonical(folder, ec);
    if (!ec && std::find(scanned.begin(), scanned.end(), canonical) != scanned.end()) continue;
    if (!ec) scanned.push_back(canonical);
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      if (entry.path().extension() == ".so" && entry.is_regular_file(ec))
        in_folder.push_back(entry.path().string());
      else if (entry.path().extension() == ".left-out" && entry.is_regular_file(ec))
        read_left_out(entry.path(), left_out_);
    }
    std::sort(in_folder.begin(), in_folder.end());
    files.insert(files.end(), in_folder.begin(), in_folder.end());
  }
  // Judged before anything opens them: a vetting probe loads them too, constructors and all.
  std::vector<std::string> trusted;
  for (const auto& f : files) {
    if (std::string why = plugin_trust_refusal(f); !why.empty()) {
      spdlog::warn("plugin {} refused: {}", f, why);
      refused_.push_back({f, why});
    } else {
      trusted.push_back(f);
    }
  }
  files = std::move(trusted);
  std::vector<RefusedPlugin> unsafe = vet ? vet(files) : std::vector<RefusedPlugin>{};
  for (const auto& f : files) {
    auto bad = std::find_if(unsafe.begin(), unsafe.end(), [&](auto& r) { return r.path == f; });
    if (bad == unsafe.end()) {
      load_file(f);
      continue;
    }
    spdlog::warn("plugin {} refused: {}", f, bad->reason);
    refused_.push_back(*bad);
  }
}

std::vector<LeftOutPlugin> PluginRegistry::left_out() const {
  std::vector<LeftOutPlugin> out;
  for (const auto& l : left_out_)
    if (std::none_of(plugins_.begin(), plugins_.end(), [&](auto& p) { return p.name == l.name; }))
      out.push_back(l);
  return out;
}

std::string PluginRegistry::left_out_reason(const std::string& name) const {
  for (const auto& l : left_out())
    if (l.name == name) return l.reason;
  return "";
}

namespace {

bool valid_name(const char* name) {
  static const std::regex pattern("[a-z0-9_]{1,64}");
  return name != nullptr && std::regex_match(name, pattern);
}

// Minimum size of each kind's table: ABI 1.0's, frozen (never the current size, which grows with
// every minor and would refuse every older plugin). A plugin reporting less is refused rather
// than read past its end.
size_t min_table_size(int32_t kind) {
  switch (kind) {
    case DLHOST_PLUGIN_BACKEND:
      return DLHOST_BACKEND_API_STRUCT_SIZE_1_0;
    case DLHOST_PLUGIN_COMM:
      return DLHOST_COMM_API_STRUCT_SIZE_1_0;
    case DLHOST_PLUGIN_NETWORK:
      return DLHOST_NETWORK_API_STRUCT_SIZE_1_0;
    default:
      return 0;
  }
}

size_t table_size(const dlhost_plugin* p) {
  switch (p->kind) {
    case DLHOST_PLUGIN_BACKEND:
      return p->backend ? p->backend->struct_size : 0;
    case DLHOST_PLUGIN_COMM:
      return p->comm ? p->comm->struct_size : 0;
    case DLHOST_PLUGIN_NETWORK:
      return p->network ? p->network->struct_size : 0;
    default:
      return 0;
  }
}

// Boost.DLL wraps dlerror()'s text in its own words and an unrelated errno string; the user
// needs only dlerror's part ("libcudnn.so.9: cannot open shared object file").
std::string dlerror_text(const std::string& boost_message) {
  const std::string marker = "dlerror system message: ";
  auto begin = boost_message.find(marker);
  if (begin == std::string::npos) return boost_message;
  begin += marker.size();
  auto end = boost_message.rfind("):");
  if (end == std::string::npos || end < begin) end = boost_message.size();
  return boost_message.substr(begin, end - begin);
}

}  // namespace

namespace {

// Redirects stdout and stderr into a temporary file while a library loads, then logs what was
// written at debug level (`-v` shows it). Loading happens on one thread before any case runs.
class LoadOutputCapture {
 public:
  explicit LoadOutputCapture(std::string path) : path_(std::move(path)) {
    std::fflush(stdout);
    std::fflush(stderr);
    file_ = std::tmpfile();
    if (file_ == nullptr) return;
    saved_out_ = ::dup(1);
    saved_err_ = ::dup(2);
    if (saved_out_ < 0 || saved_err_ < 0) return;
    ::dup2(::fileno(file_), 1);
    ::dup2(::fileno(file_), 2);
  }
  ~LoadOutputCapture() {
    if (file_ == nullptr) return;
    std::fflush(stdout);
    std::fflush(stderr);
    if (saved_out_ >= 0) ::dup2(saved_out_, 1), ::close(saved_out_);
    if (saved_err_ >= 0) ::dup2(saved_err_, 2), ::close(saved_err_);
    std::rewind(file_);
    char line[512];
    int lines = 0;
    while (std::fgets(line, sizeof(line), file_) != nullptr && ++lines <= 50) {
      std::string text(line);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      spdlog::debug("plugin {} printed while loading: {}", path_, text);
    }
    std::fclose(file_);
  }
  LoadOutputCapture(const LoadOutputCapture&) = delete;
  LoadOutputCapture& operator=(const LoadOutputCapture&) = delete;

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int saved_out_ = -1, saved_err_ = -1;
};

// The library's plugin table, from its entry given `api`; nullptr with the reason in *why when
// the entry is missing, throws or returns none.
const dlhost_plugin* call_entry(const boost::dll::shared_library& lib, const dlhost_host_api* api,
                                std::string* why) {
  if (!lib.has(DLHOST_PLUGIN_ENTRY_SYMBOL)) {
    *why = "no entry symbol '" DLHOST_PLUGIN_ENTRY_SYMBOL "': not a dlhost plugin";
    return nullptr;
  }
  auto entry = lib.get<const dlhost_plugin*(const dlhost_host_api*)>(DLHOST_PLUGIN_ENTRY_SYMBOL);
  const dlhost_plugin* p = nullptr;
  try {
    p = entry(api);
  } catch (const std::exception& e) {
    // The entry is C; an exception out of it breaks the ABI, but is the vendor's first bug.
    *why = std::string("an exception escaped the plugin's entry (") + e.what() +
           "): catch everything in dlhost_plugin_entry (the kits do)";
    return nullptr;
  } catch (...) {
    *why =
        "an exception escaped the plugin's entry: catch everything in dlhost_plugin_entry "
        "(the kits do)";
    return nullptr;
  }
  if (p == nullptr) *why = "entry returned NULL: the plugin could not initialize (see its log)";
  return p;
}

// Why the plugin table `p` (from `path`) cannot be used by a host that speaks ABI minor
// `host_minor`, or "" when it can.
std::string table_refusal(const dlhost_plugin* p, uint32_t host_minor, const std::string& path) {
  // The first three fields never move in any major version, so they can be read before
  // anything else is trusted.
  if (p->struct_size < offsetof(dlhost_plugin, kind) + sizeof(p->kind))
    return "plugin table too small (struct_size " + std::to_string(p->struct_size) + ")";
  if (p->abi_major != DLHOST_ABI_MAJOR)
    return "built against dlhost ABI " + std::to_string(p->abi_major) + "." +
           std::to_string(p->abi_minor) + "; this host speaks ABI " +
           std::to_string(DLHOST_ABI_MAJOR) + "." + std::to_string(DLHOST_ABI_MINOR) +
           " (the major version must match): rebuild the plugin against this SDK";
  if (p->abi_minor > host_minor)
    // Loads (a newer minor only appends), but its newer features are not used: say so, since a
    // header edited by hand to an unknown minor would otherwise pass silently.
    spdlog::warn(
        "plugin {} was built against dlhost ABI {}.{}, newer than this host's {}.{}: it "
        "is used as {}.{} (rebuild against this SDK, or update dlhost)",
        path, p->abi_major, p->abi_minor, DLHOST_ABI_MAJOR, host_minor, DLHOST_ABI_MAJOR,
        host_minor);
  if (p->struct_size < DLHOST_PLUGIN_STRUCT_SIZE_1_0)
    return "plugin table smaller than ABI 1.0's (struct_size " + std::to_string(p->struct_size) +
           " < " + std::to_string(DLHOST_PLUGIN_STRUCT_SIZE_1_0) + ")";
  if (p->kind < DLHOST_PLUGIN_BACKEND || p->kind > DLHOST_PLUGIN_NETWORK)
    return "unknown plugin kind " + std::to_string(p->kind);
  if (!valid_name(p->name)) return "invalid plugin name (must match [a-z0-9_]{1,64})";
  if (table_size(p) < min_table_size(p->kind))
    return std::string("the ") + kind_name(p->kind) +
           " table is missing or smaller than ABI 1.0's (struct_size " +
           std::to_string(table_size(p)) + " < " + std::to_string(min_table_size(p->kind)) + ")";
  if (std::string fn = null_required_function(*p); !fn.empty())
    return std::string("the ") + kind_name(p->kind) + " function '" + fn + "' is NULL";
  return "";
}

// The library's build text (DLHOST_PLUGIN_BUILD_SYMBOL), if it has one: plugin-written, so at
// most 200 printable bytes are kept.
std::string build_text(const boost::dll::shared_library& lib) {
  std::string kept;
  if (!lib.has(DLHOST_PLUGIN_BUILD_SYMBOL)) return kept;
  const char* text = &lib.get<const char>(DLHOST_PLUGIN_BUILD_SYMBOL);
  for (size_t i = 0; i < 200 && text[i] != '\0'; ++i)
    if (text[i] >= ' ' && text[i] <= '~') kept.push_back(text[i]);
  return kept;
}

}  // namespace

bool PluginRegistry::load_file(const std::string& path) {
  auto refuse = [&](const std::string& reason) {
    spdlog::warn("plugin {} refused: {}", path, reason);
    refused_.push_back({path, reason});
    return false;
  };

  if (std::string why = plugin_trust_refusal(path); !why.empty()) return refuse(why);
  boost::dll::shared_library lib;
  try {
    // What the library's static initializers print (TensorFlow announces its oneDNN use on
    // stderr at load, whatever TF_CPP_MIN_LOG_LEVEL says) would land in the middle of every
    // command's output and of its machine-read files: it goes to the debug log instead.
    LoadOutputCapture capture(path);
    // The throwing constructor: its message carries dlerror()'s text.
    lib = boost::dll::shared_library(
        path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    return refuse("cannot load: " + dlerror_text(e.what()));
  }
  std::string why;
  const dlhost_plugin* p = call_entry(lib, host_api(host_abi_minor_), &why);
  if (p == nullptr) return refuse(why);
  if (std::string reason = table_refusal(p, host_abi_minor_, path); !reason.empty())
    return refuse(reason);
  if (const LoadedPlugin* other = lookup(static_cast<dlhost_plugin_kind>(p->kind), p->name))
    return refuse(std::string("duplicate ") + kind_name(p->kind) + " plugin '" + p->name +
                  "', already loaded from " + other->path);

  LoadedPlugin loaded;
  loaded.path = path;
  loaded.table = p;
  loaded.name = p->name;
  loaded.version = p->version != nullptr ? p->version : "";
  loaded.description = p->description != nullptr ? p->description : "";
  loaded.kind = static_cast<dlhost_plugin_kind>(p->kind);
  loaded.abi_major = p->abi_major;
  loaded.abi_minor = p->abi_minor;
  loaded.speaks_minor = std::min(p->abi_minor, host_abi_minor_);
  if (loaded.speaks_minor >= 2) {
    try {
      loaded.extensions = resolve_extensions(*p);
    } catch (const std::exception& e) {
      return refuse(std::string("broken extension chain: ") + e.what());
    }
    loaded.options = declared_options(loaded.extensions);
  }
  loaded.build = build_text(lib);
  spdlog::debug("loaded {} plugin '{}' {} (ABI {}.{}) from {}", kind_name(p->kind), loaded.name,
                loaded.version, loaded.abi_major, loaded.abi_minor, path);
  impl_->libraries.push_back(std::move(lib));
  plugins_.push_back(std::move(loaded));
  return true;
}

void PluginRegistry::probe(const LoadedPlugin& p) const {
  if (p.queried) return;
  p.queried = true;
  if (p.table->query == nullptr) return;
  int32_t priority = 0;
  StatusPtr why(p.table->query(&priority));
  if (why) {
    p.usable = false;
    p.unusable_reason = why->message;
  } else {
    p.priority = priority;
  }
  spdlog::debug("queried {} plugin '{}': {}", kind_name(p.kind), p.name,
                p.usable ? "usable, priority " + std::to_string(p.priority) : p.unusable_reason);
}

void PluginRegistry::probe_all() const {
  for (const auto& p : plugins_) probe(p);
}

void PluginRegistry::probe_kind(dlhost_plugin_kind kind) const {
  for (const auto& p : plugins_)
    if (p.kind == kind) probe(p);
}

const LoadedPlugin* PluginRegistry::lookup(dlhost_plugin_kind kind, const std::string& name) const {
  for (const auto& p : plugins_)
    if (p.kind == kind && p.name == name) return &p;
  return nullptr;
}

const LoadedPlugin* PluginRegistry::find(dlhost_plugin_kind kind, const std::string& name) const {
  const LoadedPlugin* p = lookup(kind, name);
  if (p != nullptr) probe(*p);
  return p;
}

std::vector<std::string> PluginRegistry::names(dlhost_plugin_kind kind) const {
  std::vector<std::string> out;
  for (const auto& p : plugins_)
    if (p.kind == kind) out.push_back(p.name);
  return out;
}

const LoadedPlugin* PluginRegistry::highest_priority(dlhost_plugin_kind kind) const {
  probe_kind(kind);
  const LoadedPlugin* best = nullptr;
  for (const auto& p : plugins_)
    if (p.kind == kind && p.usable && (best == nullptr || p.priority > best->priority)) best = &p;
  return best;
}

}  // namespace dlhost
