# dlhostConfig.cmake — the installed dlhost SDK: the target dlhost::sdk (headers) and the
# function dlhost_add_plugin() (see DlhostPlugin.cmake).
#
# A plugin is a benchmark's subject: with no build type given (a single-config generator), the
# package makes the build Release, as dlhost's own build does. An unoptimised plugin is 10x slower
# and dlhost warns in every record of a case run on one (its dlhost_plugin_build export).
# find_package runs in the caller's scope, before any target of the project is generated.
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type (dlhost plugins default to Release)" FORCE)
  message(STATUS "dlhost: no CMAKE_BUILD_TYPE given; building the plugin as Release")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/dlhostTargets.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/DlhostPlugin.cmake")
