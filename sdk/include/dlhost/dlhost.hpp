// dlhost.hpp — the whole header-only C++ comfort layer for plugin authors, dnnl.hpp-style:
// common.hpp (the host's services, errors and statuses, per-case options, the ABI structs' and
// the graph's helpers) and builder.hpp (the graph Builder of a network plugin). A plugin that
// included dlhost.hpp before the two were split keeps compiling; a new one includes what it
// needs: a kit (backend_kit.hpp, comm_kit.hpp, network_kit.hpp), or common.hpp alone.
//
// It is compiled into the plugin and never crosses the boundary. Thread-safety: as common.hpp.
#ifndef DLHOST_HPP
#define DLHOST_HPP

#include "dlhost/builder.hpp"  // IWYU pragma: export
#include "dlhost/common.hpp"   // IWYU pragma: export

#endif  // DLHOST_HPP
