// plugin_tables.h — checks of a plugin's function table that the size check cannot make: every
// function of ABI 1.0 must be there, since the host calls them without asking (a NULL one would
// be a crash in `dlhost plugins` or mid-case, far from the plugin's fault). Thread-safe.
#pragma once

#include <string>

#include "dlhost/dlhost.h"

namespace dlhost {

// The first required function of the kind's table that is NULL, as "forward"; "" when none.
// The table must already be known to be at least ABI 1.0's size.
std::string null_required_function(const dlhost_plugin& plugin);

}  // namespace dlhost
