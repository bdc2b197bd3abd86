# DlhostPyPI.cmake — where the framework backends' libraries are found: the PyPI wheels that
# scripts/install-deps.sh installs into the project's own folder deps/pypi (`pip install --target
# --no-deps`, never the system Python). A plugin whose wheel is absent is left out with one
# configure line, and the reason is written beside the built plugins as <plugin>.left-out, which
# the host reads to say why that backend's cases are SKIPPED.

set(DLHOST_PYPI_DIR "${CMAKE_SOURCE_DIR}/deps/pypi" CACHE PATH
    "Folder of the framework wheels (scripts/install-deps.sh); empty: build no wheel-based plugin")

# dlhost_pypi_package(<OUT_FOUND> <OUT_REASON> <pip package> <version> <file inside the folder>
#                     [PREFIX <sub-folder>])
# Sets OUT_FOUND to TRUE when <pip package>==<version> is installed in DLHOST_PYPI_DIR and the
# file exists; else FALSE, with OUT_REASON saying why (install-deps' own reason when pip failed).
# PREFIX: a wheel installed with `pip install --prefix DLHOST_PYPI_DIR/<sub-folder>` (oneDNN's,
# whose library is wheel data): its dist-info is under lib/python3*/site-packages, and <file> is
# relative to the sub-folder.
function(dlhost_pypi_package out_found out_reason package version file)
  cmake_parse_arguments(PARSE_ARGV 5 _arg "" "PREFIX" "")
  string(REPLACE "-" "_" _dist "${package}")
  set(_dir "${DLHOST_PYPI_DIR}")
  set(_site "${DLHOST_PYPI_DIR}")
  if(_arg_PREFIX AND DLHOST_PYPI_DIR)
    set(_dir "${DLHOST_PYPI_DIR}/${_arg_PREFIX}")
    set(file "${_arg_PREFIX}/${file}")
    # site-packages from a python3 of its own (pyenv, venv), dist-packages from Debian's.
    file(GLOB _site LIST_DIRECTORIES true "${_dir}/lib/python3*/site-packages"
         "${_dir}/lib/python3*/dist-packages")
    list(LENGTH _site _n)
    if(NOT _n EQUAL 1)
      set(_site "${_dir}/lib/python3/site-packages")
    endif()
  endif()
  set(_dist "${_site}/${_dist}-${version}.dist-info")
  if(NOT DLHOST_PYPI_DIR)
    set(_why "DLHOST_PYPI_DIR is empty (configured without the framework wheels)")
  elseif(EXISTS "${DLHOST_PYPI_DIR}/${package}.failed")
    file(STRINGS "${DLHOST_PYPI_DIR}/${package}.failed" _why LIMIT_COUNT 1)
  elseif(NOT EXISTS "${_dist}")
    string(CONCAT _why "the PyPI wheel ${package}==${version} is not installed in "
                        "${_dir} (scripts/install-deps.sh installs it)")
  elseif(NOT EXISTS "${DLHOST_PYPI_DIR}/${file}")
    set(_why "${DLHOST_PYPI_DIR}/${file} is missing from the wheel ${package}==${version}")
  else()
    set(${out_found} TRUE PARENT_SCOPE)
    set(${out_reason} "" PARENT_SCOPE)
    return()
  endif()
  set(${out_found} FALSE PARENT_SCOPE)
  set(${out_reason} "${_why}" PARENT_SCOPE)
endfunction()

# dlhost_onednn3_wheel(<OUT_FOUND> <OUT_REASON> <OUT_PREFIX>): oneDNN 3.2 from its two PyPI wheels
# (library; headers and CMake package), which install-deps puts in DLHOST_PYPI_DIR/onednn-3.2 with
# `pip install --prefix`. OUT_PREFIX: that folder, when found.
function(dlhost_onednn3_wheel out_found out_reason out_prefix)
  dlhost_pypi_package(_found _why onednn-cpu-gomp 2023.2.0 lib/libdnnl.so.3 PREFIX onednn-3.2)
  if(_found)
    dlhost_pypi_package(_found _why onednn-devel-cpu-gomp 2023.2.0 include/oneapi/dnnl/dnnl.hpp
                        PREFIX onednn-3.2)
  endif()
  set(${out_found} ${_found} PARENT_SCOPE)
  set(${out_reason} "${_why}" PARENT_SCOPE)
  set(${out_prefix} "${DLHOST_PYPI_DIR}/onednn-3.2" PARENT_SCOPE)
endfunction()

# dlhost_plugin_left_out(<plugin> <reason>): one configure line, and <plugin>.left-out beside the
# built plugins for the host's SKIPPED reason.
function(dlhost_plugin_left_out plugin reason)
  message(STATUS "dlhost: ${plugin} left out: ${reason}")
  file(WRITE "${DLHOST_BUILD_PLUGIN_DIR}/${plugin}.left-out" "${reason}\n")
endfunction()

# dlhost_plugin_built(<plugin>): removes a left-out note of an earlier configure.
function(dlhost_plugin_built plugin)
  file(REMOVE "${DLHOST_BUILD_PLUGIN_DIR}/${plugin}.left-out")
endfunction()
