// plugin_extensions.cpp — resolving a plugin's ABI 1.2 extension chain and checking a case's
// options against the options a plugin declares.
#include "core/plugin_extensions.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace dlhost {

namespace {

// A chain longer than this is a broken plugin (a cycle, or garbage), not a rich one.
constexpr int kMaxChain = 64;

template <class T>
const T* as(const dlhost_extension* e, size_t size_1_2) {
  return e->struct_size >= size_1_2 ? reinterpret_cast<const T*>(e) : nullptr;
}

std::vector<std::string> split_choices(const char* choices) {
  std::vector<std::string> out;
  if (choices == nullptr) return out;
  std::stringstream in(choices);
  for (std::string c; std::getline(in, c, '|');)
    if (!c.empty()) out.push_back(c);
  return out;
}

bool parses_as(int32_t type, const std::string& v, const std::vector<std::string>& choices) {
  char* end = nullptr;
  errno = 0;
  // strtoll and strtod skip leading blanks: " 8" would be 8 to the plugin and "-8" in the id.
  if ((type == DLHOST_OPTION_INT || type == DLHOST_OPTION_FLOAT) && !v.empty() &&
      std::isspace(static_cast<unsigned char>(v.front())))
    return false;
  switch (type) {
    case DLHOST_OPTION_BOOL:
      return v == "true" || v == "false" || v == "1" || v == "0";
    case DLHOST_OPTION_INT:
      std::strtoll(v.c_str(), &end, 10);
      return !v.empty() && errno == 0 && *end == '\0';
    case DLHOST_OPTION_FLOAT:
      std::strtod(v.c_str(), &end);
      return !v.empty() && errno == 0 && *end == '\0';
    case DLHOST_OPTION_ENUM:
      for (const auto& c : choices)
        if (c == v) return true;
      return false;
    default:
      return true;
  }
}

// An INT option's declared range, "MIN..MAX" in its choices (dlhost_device.h); nullopt when it
// declares none (or not in that form: a plugin's text is not trusted to be well made).
std::optional<std::pair<int64_t, int64_t>> int_range(const OptionDecl& d) {
  if (d.type != DLHOST_OPTION_INT || d.choices.size() != 1) return std::nullopt;
  const std::string& r = d.choices.front();
  const size_t dots = r.find("..");
  if (dots == std::string::npos) return std::nullopt;
  const std::string lo = r.substr(0, dots), hi = r.substr(dots + 2);
  std::vector<std::string> none;
  if (!parses_as(DLHOST_OPTION_INT, lo, none) || !parses_as(DLHOST_OPTION_INT, hi, none))
    return std::nullopt;
  return std::make_pair(static_cast<int64_t>(std::strtoll(lo.c_str(), nullptr, 10)),
                        static_cast<int64_t>(std::strtoll(hi.c_str(), nullptr, 10)));
}

}  // namespace

PluginExtensions resolve_extensions(const dlhost_plugin& plugin) {
  PluginExtensions x;
  if (plugin.abi_minor < 2 || !DLHOST_HAS_FIELD(&plugin, dlhost_plugin, extensions)) return x;
  int n = 0;
  for (const dlhost_extension* e = plugin.extensions; e != nullptr; e = e->next) {
    if (++n > kMaxChain)
      throw std::runtime_error("its extension chain has more than " + std::to_string(kMaxChain) +
                               " entries (a cycle?)");
    switch (e->type) {
      case DLHOST_EXT_BACKEND_CAPS:
        x.caps = as<dlhost_backend_caps_ext>(e, DLHOST_BACKEND_CAPS_EXT_STRUCT_SIZE);
        break;
      case DLHOST_EXT_STREAM:
        x.stream = as<dlhost_stream_ext>(e, DLHOST_STREAM_EXT_STRUCT_SIZE);
        break;
      case DLHOST_EXT_EVENTS:
        x.events = as<dlhost_events_ext>(e, DLHOST_EVENTS_EXT_STRUCT_SIZE);
        break;
      case DLHOST_EXT_DEVICE_MEMORY:
        x.memory = as<dlhost_device_memory_ext>(e, DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE);
        break;
      case DLHOST_EXT_OPTION_SCHEMA:
        x.option_schema = as<dlhost_option_schema_ext>(e, DLHOST_OPTION_SCHEMA_EXT_STRUCT_SIZE);
        break;
      case DLHOST_EXT_COMM_GROUP:
        x.group = as<dlhost_comm_group_ext>(e, DLHOST_COMM_GROUP_EXT_STRUCT_SIZE);
        break;
      case DLHOST_EXT_COMM_ABORT:
        x.abort = as<dlhost_comm_abort_ext>(e, DLHOST_COMM_ABORT_EXT_STRUCT_SIZE);
        break;
      case DLHOST_EXT_TENSOR_READ:
        x.tensor_read = as<dlhost_tensor_read_ext>(e, DLHOST_TENSOR_READ_EXT_STRUCT_SIZE);
        break;
      default:
        break;  // a newer extension this host does not know: skipped, as the ABI says
    }
  }
  return x;
}

const char* option_type_name(int32_t type) {
  switch (type) {
    case DLHOST_OPTION_BOOL:
      return "bool";
    case DLHOST_OPTION_INT:
      return "int";
    case DLHOST_OPTION_FLOAT:
      return "float";
    case DLHOST_OPTION_ENUM:
      return "enum";
    default:
      return "string";
  }
}

std::vector<OptionDecl> declared_options(const PluginExtensions& ext) {
  std::vector<OptionDecl> out;
  const dlhost_option_schema_ext* s = ext.option_schema;
  if (s == nullptr || s->options == nullptr) return out;
  for (int32_t i = 0; i < s->count; ++i) {
    const dlhost_option_decl* d = s->options[i];
    if (d == nullptr || d->struct_size < DLHOST_OPTION_DECL_STRUCT_SIZE || d->name == nullptr)
      continue;
    OptionDecl o;
    o.name = d->name;
    o.type = d->type;
    if (d->default_value != nullptr) o.default_value = d->default_value;
    o.help = d->help != nullptr ? d->help : "";
    o.choices = split_choices(d->choices);
    out.push_back(std::move(o));
  }
  return out;
}

std::optional<std::string> check_options(const std::string& plugin,
                                         const std::vector<OptionDecl>& declared,
                                         const std::map<std::string, std::string>& given) {
  for (const auto& [key, value] : given) {
    const OptionDecl* decl = nullptr;
    for (const auto& d : declared)
      if (d.name == key) decl = &d;
    if (decl == nullptr) {
      std::string known;
      for (const auto& d : declared) known += (known.empty() ? "" : ", ") + d.name;
      return "plugin '" + plugin + "' has no option '" + key +
             "' (its options: " + (known.empty() ? "none" : known) + ")";
    }
    if (!parses_as(decl->type, value, decl->choices)) {
      std::string want = option_type_name(decl->type);
      if (decl->type == DLHOST_OPTION_ENUM) {
        want = "one of";
        for (const auto& c : decl->choices) want += " " + c;
      }
      return "plugin '" + plugin + "' option '" + key + "': '" + value + "' is not " +
             (decl->type == DLHOST_OPTION_ENUM ? want : "a " + want);
    }
    // The plugin refuses a value outside the range it declares when the case starts: refused
    // here instead, so that `dlhost validate` says it too.
    if (auto range = int_range(*decl)) {
      const long long v = std::strtoll(value.c_str(), nullptr, 10);
      if (v < range->first || v > range->second)
        return "plugin '" + plugin + "' option '" + key + "': " + value + " is out of range [" +
               std::to_string(range->first) + ", " + std::to_string(range->second) + "]";
    }
  }
  return std::nullopt;
}

}  // namespace dlhost
