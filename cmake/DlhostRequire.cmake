# DlhostRequire.cmake — find_package for dlhost's required dependencies, failing with one line that
# names the Debian package to install instead of CMake's trace. scripts/install-deps.sh installs
# them all; this is what a user sees who built without it (or on a machine that lost a package).

# dlhost_require(<Package> <debian packages...> [OPTIONAL <what is left out>]
#                [ARGS <find_package arguments...>])
# A macro, not a function: the variables find_package sets (BLAS_LIBRARIES, ...) must reach the caller.
# With OPTIONAL, a missing package is one status line saying what the build leaves out and how to
# get it, and the caller tests <Package>_FOUND.
macro(dlhost_require package)
  cmake_parse_arguments(_dlhost_req "" "OPTIONAL" "ARGS" ${ARGN})
  find_package(${package} ${_dlhost_req_ARGS} QUIET)
  if(NOT ${package}_FOUND)
    string(REPLACE ";" " " _dlhost_req_debs "${_dlhost_req_UNPARSED_ARGUMENTS}")
    if(_dlhost_req_OPTIONAL)
      message(STATUS "dlhost: ${package} not found, ${_dlhost_req_OPTIONAL} is not built; install "
                     "it with: apt-get install ${_dlhost_req_debs} (or run scripts/install-deps.sh)")
    else()
      message(FATAL_ERROR "dlhost: ${package} not found; install it with: apt-get install "
                          "${_dlhost_req_debs} (or run scripts/install-deps.sh)")
    endif()
  endif()
endmacro()

# Debian's libdnnl-dev is built with the OpenCL GPU runtime: its CMake config calls
# find_package(OpenCL REQUIRED) but the package does not depend on OpenCL's files. Look for them
# first so that their absence is one clear line, not a failure inside dnnl-config.cmake.
macro(dlhost_require_dnnl)
  find_file(DLHOST_DNNL_CONFIG dnnl-config.cmake PATH_SUFFIXES lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/dnnl)
  if(DLHOST_DNNL_CONFIG)
    file(READ "${DLHOST_DNNL_CONFIG}" _dlhost_dnnl_config)
    if(_dlhost_dnnl_config MATCHES "find_package\\(OpenCL REQUIRED\\)")
      find_package(OpenCL QUIET)
      if(NOT OpenCL_FOUND)
        message(FATAL_ERROR "dlhost: oneDNN's CMake config (${DLHOST_DNNL_CONFIG}) needs OpenCL's "
                            "development files; install them with: apt-get install "
                            "ocl-icd-opencl-dev opencl-headers (or run scripts/install-deps.sh)")
      endif()
    endif()
  endif()
  dlhost_require(dnnl libdnnl-dev)
endmacro()
