// kits_without_builder.cpp — built with the tests, never run: a backend or comm plugin that
// includes its kit gets common.hpp and not the network Builder (builder.hpp), so that a backend
// includes only what it uses and a change of the builder rebuilds no backend (issue 44, item 8d).
// The build fails here if a kit brings builder.hpp (or dlhost.hpp, which includes it).
#include "dlhost/backend_kit.hpp"
#include "dlhost/comm_kit.hpp"
#include "dlhost/cpu_kit.hpp"
#include "dlhost/framework_kit.hpp"
#include "dlhost/graph_access.hpp"

#ifdef DLHOST_BUILDER_HPP
#error "a backend or comm kit includes dlhost/builder.hpp: include dlhost/common.hpp instead"
#endif
