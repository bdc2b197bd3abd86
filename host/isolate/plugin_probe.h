// plugin_probe.h — loads each plugin file first in a child process, so that a plugin that
// crashes, calls exit() or abort() while it loads (in a library constructor, its entry, its
// query) is refused with what it did instead of taking the whole dlhost command down with it.
//
// The child is `dlhost plugin-probe FILE...`: it loads the files one by one with the ordinary
// checks and reports each on stdout. When it dies, the file it was loading is refused with the
// signal or exit code, and a new child goes on from the next one: one extra process for a clean
// folder. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/plugin_registry.h"

namespace dlhost {

// The files that cannot be loaded into this process safely, with why.
std::vector<RefusedPlugin> probe_plugins(const std::vector<std::string>& files);

// The child side: loads each file in turn, reporting it on stdout. Returns the exit code.
int plugin_probe_main(const std::vector<std::string>& files);

}  // namespace dlhost
