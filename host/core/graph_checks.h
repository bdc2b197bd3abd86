// graph_checks.h — small helpers shared by the graph builder's files (graph.cpp, the paper's ops;
// graph_transformer.cpp, ABI 1.4's): shape text, error raising, and the guards of the C table.
// Internal to host/core. Not thread-safe beyond what each function says (all are pure).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "core/graph.h"
#include "core/host_api.h"

namespace dlhost::graph_detail {

inline std::string shape_string(const dlhost_tensor_desc& t) {
  std::ostringstream os;
  for (int32_t i = 0; i < t.rank; ++i) os << (i ? "x" : "") << t.dims[i];
  if (t.rank == 0) os << "scalar";
  return os.str();
}

inline int64_t elements(const dlhost_tensor_desc& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

[[noreturn]] inline void bad(const std::string& layer, const std::string& what) {
  throw Error(DLHOST_CODE_INVALID_ARGUMENT, "layer '" + layer + "': " + what);
}

inline GraphBuilder& unwrap(dlhost_graph_builder* b) {
  if (b == nullptr) throw Error(DLHOST_CODE_INVALID_ARGUMENT, "NULL graph builder");
  return *reinterpret_cast<GraphBuilder*>(b);
}

// An attrs struct shorter than the first release's (ABI `since`) is refused rather than read past
// its end.
template <class Attrs>
Attrs checked_attrs(const Attrs* a, size_t min_size, const char* what, const char* since = "1.0") {
  if (a == nullptr || a->struct_size < min_size)
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                std::string(what) + " attrs missing or smaller than ABI " + since + "'s");
  return *a;
}

template <class Fn>
dlhost_status* call(int32_t* out, Fn&& fn) {
  return guard_status([&] {
    if (out == nullptr) throw Error(DLHOST_CODE_INVALID_ARGUMENT, "NULL out pointer");
    int32_t id = fn();
    *out = id;
  });
}

inline std::string str(const char* s) { return s != nullptr ? s : ""; }

}  // namespace dlhost::graph_detail
