# left_out_check.cmake — cmake -P script: the configure step's oneDNN 3 wheel check
# (dlhost_onednn3_wheel in cmake/DlhostPyPI.cmake) leaves cpu_onednn3 out with a reason that says
# what is missing: (1) an empty DLHOST_PYPI_DIR, (2) one where install-deps wrote pip's failure,
# (3) a wheel whose dist-info is there but the library is not. The note file is what the host reads;
# and (5) that the Python part under dist-packages (Debian's python3) is found.
# Usage: cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -P left_out_check.cmake
include("${SOURCE_DIR}/cmake/DlhostPyPI.cmake")
file(REMOVE_RECURSE "${WORK_DIR}")
set(DLHOST_BUILD_PLUGIN_DIR "${WORK_DIR}/plugins")
file(MAKE_DIRECTORY "${DLHOST_BUILD_PLUGIN_DIR}")

function(expect_left_out case expected_reason_part)
  dlhost_onednn3_wheel(found reason prefix)
  if(found)
    message(FATAL_ERROR "${case}: the wheel was found in ${DLHOST_PYPI_DIR}")
  endif()
  string(FIND "${reason}" "${expected_reason_part}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${case}: reason '${reason}' lacks '${expected_reason_part}'")
  endif()
  dlhost_plugin_left_out(cpu_onednn3 "${reason}")
  file(STRINGS "${DLHOST_BUILD_PLUGIN_DIR}/cpu_onednn3.left-out" note)
  if(NOT note STREQUAL reason)
    message(FATAL_ERROR "${case}: note '${note}' is not the reason '${reason}'")
  endif()
  message(STATUS "${case}: left out: ${reason}")
endfunction()

set(DLHOST_PYPI_DIR "${WORK_DIR}/empty")
file(MAKE_DIRECTORY "${DLHOST_PYPI_DIR}")
expect_left_out("empty folder" "onednn-cpu-gomp==2023.2.0 is not installed in ${DLHOST_PYPI_DIR}/onednn-3.2")

set(DLHOST_PYPI_DIR "${WORK_DIR}/failed")
file(WRITE "${DLHOST_PYPI_DIR}/onednn-cpu-gomp.failed" "pip could not install onednn-cpu-gomp==2023.2.0: Network is unreachable\n")
expect_left_out("pip failed" "Network is unreachable")

set(DLHOST_PYPI_DIR "${WORK_DIR}/partial")
file(MAKE_DIRECTORY "${DLHOST_PYPI_DIR}/onednn-3.2/lib/python3.11/site-packages/onednn_cpu_gomp-2023.2.0.dist-info")
expect_left_out("no library" "onednn-3.2/lib/libdnnl.so.3 is missing from the wheel onednn-cpu-gomp==2023.2.0")

set(DLHOST_PYPI_DIR "")
expect_left_out("DLHOST_PYPI_DIR empty" "DLHOST_PYPI_DIR is empty")

# (5) Debian's own python3 installs the wheels' Python part under dist-packages, not
# site-packages (install-deps moves its P/local/ tree up to P/): found all the same.
set(DLHOST_PYPI_DIR "${WORK_DIR}/debian")
set(_p "${DLHOST_PYPI_DIR}/onednn-3.2")
file(MAKE_DIRECTORY "${_p}/lib/python3.11/dist-packages/onednn_cpu_gomp-2023.2.0.dist-info"
     "${_p}/lib/python3.11/dist-packages/onednn_devel_cpu_gomp-2023.2.0.dist-info"
     "${_p}/include/oneapi/dnnl")
file(WRITE "${_p}/lib/libdnnl.so.3" "")
file(WRITE "${_p}/include/oneapi/dnnl/dnnl.hpp" "")
dlhost_onednn3_wheel(found reason prefix)
if(NOT found)
  message(FATAL_ERROR "Debian layout (dist-packages): not found: ${reason}")
endif()
message(STATUS "Debian layout (dist-packages): found in ${prefix}")
