// launcher.cpp — see launcher.h.
#include "launch/launcher.h"

#include <stdexcept>

#include "core/host_api.h"

namespace dlhost {

std::vector<std::string> launcher_command(const LaunchSpec& spec,
                                          const std::vector<std::string>& rank_command,
                                          int host_cores) {
  try {
    return launcher_named(spec.launcher).command(spec, rank_command, host_cores);
  } catch (const std::invalid_argument& e) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, e.what());
  }
}

}  // namespace dlhost
