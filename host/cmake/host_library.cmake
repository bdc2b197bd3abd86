# host_library.cmake — dlhost_host_library(NAME SOURCE...): one static library of the host,
# dlhost_NAME, from an explicit source list; its headers are included from the host/ root
# ("core/graph.h"). Shared by the main build (host/CMakeLists.txt) and the fuzz build.
function(dlhost_host_library name)
  add_library(dlhost_${name} STATIC ${ARGN})
  target_include_directories(dlhost_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/..)
  dlhost_warnings(dlhost_${name})
endfunction()
