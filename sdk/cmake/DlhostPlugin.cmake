# dlhost_add_plugin(<target> SOURCES ... [LIBRARIES ...])
# Builds a dlhost plugin as a MODULE library: C++17, hidden visibility, the entry symbol as the
# only export (linker version script), -z defs so a missing library fails at link time rather
# than at dlopen time. Usable in-tree and from an installed SDK.
function(dlhost_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(_map "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/plugin.map")
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE dlhost::sdk ${ARG_LIBRARIES})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${_map}")
  set_target_properties(${target} PROPERTIES
    PREFIX "libdlhost_"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE
    "-Wl,--version-script=${_map}" "-Wl,-z,defs")
  if(DEFINED DLHOST_BUILD_PLUGIN_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${DLHOST_BUILD_PLUGIN_DIR}")
  endif()
  if(DEFINED DLHOST_INSTALL_PLUGIN_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION "${DLHOST_INSTALL_PLUGIN_DIR}")
  endif()
endfunction()
