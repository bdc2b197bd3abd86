// library_dispatch.h — the record warning `library_dispatch`: a library in the case's process
// runs kernels for a narrower vector ISA than the CPU has. OpenBLAS 0.3.21 falls back to its SSE3
// "Prescott" kernels on CPU models it does not know (some AVX-512 Xeons), so cpu_libtorch 1.13's
// and cpu_reference's GEMMs run at a fraction of the CPU's speed; MXNet 1.9.1's wheel builds its
// own operators for SSE3 only. The warning names the library, what it dispatched, the CPU's ISA
// and the setting that fixes it where one exists.
//
// Reads only the record: environment.library_dispatch (what the worker asked the libraries
// loaded in its process: core/environment.h's library_dispatch()), environment.libraries and
// environment.isa, params.backend, params.openblas_coretype. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "console/warnings.h"

namespace dlhost {

inline constexpr const char* kWarnLibraryDispatch = "library_dispatch";

// The rank of a vector ISA as the record names it ("AVX-512", "AVX2", "AVX", "SSE", or a
// oneDNN-style "avx512_core_amx"/"avx2"): 4, 3, 2, 1; 0 when unknown.
int vector_isa_rank(const std::string& isa);

std::vector<Warning> library_dispatch_warnings(const nlohmann::ordered_json& record);

}  // namespace dlhost
