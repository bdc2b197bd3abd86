// plugin_trust.h — whether a plugin file may be loaded, judged by who could have written it,
// before it is opened: dlopen runs the library's constructors, so a plugin is code run with the
// user's rights (root's, often) by every command that loads plugins.
//
// git's safe.directory rule, for the file and its own folder (not every parent): each must be
// owned by root or by the user (the effective uid) and writable by its owner only (neither
// group- nor world-writable). A link is judged as the file it leads to, and both the folder it
// was found in and the real file's folder are checked. The override is the environment
// variable DLHOST_ALLOW_UNSAFE_PLUGIN_PATHS=1 (`--allow-unsafe-plugin-paths` sets it, so that
// case workers and probes inherit it). Thread-safe.
#pragma once

#include <string>

namespace dlhost {

// The environment variable that lets plugins load whoever could have written them.
inline constexpr const char* kAllowUnsafePluginPathsEnv = "DLHOST_ALLOW_UNSAFE_PLUGIN_PATHS";

// Why the plugin file `path` must not be loaded, naming what is writable by whom and how to
// fix it; "" when it may (or when the override is set, or the file cannot be read: loading it
// then fails with its own reason).
std::string plugin_trust_refusal(const std::string& path);

}  // namespace dlhost
