# dlhostConfig.cmake — the installed dlhost SDK: the target dlhost::sdk (headers) and the
# function dlhost_add_plugin() (see DlhostPlugin.cmake).
include("${CMAKE_CURRENT_LIST_DIR}/dlhostTargets.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/DlhostPlugin.cmake")
