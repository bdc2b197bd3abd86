// comm_bench_data.h — the data `dlhost comm-bench` sends and the results it expects back, chosen
// so every expected value is exact: rank r's element i is a small integer v(r, i) in [-8, 8], so
// sums over any realistic world are exact in every dtype (floats hold integers up to 2^24
// exactly) and AVG is one correctly rounded division of an exact sum. Also dtypes, reduction ops
// and size parsing. What each collective expects back is its descriptor's (collectives.h). Pure
// functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlhost/dlhost.h"

namespace dlhost::comm_bench {

size_t dtype_size(int32_t dtype);              // 0 for an unknown dtype
const char* dtype_name(int32_t dtype);         // "f32", ...
int32_t parse_dtype(const std::string& name);  // 0 when unknown
const char* redop_name(int32_t op);            // "sum", ...
int32_t parse_redop(const std::string& name);  // 0 when unknown

// "8", "64K", "1M", "2G" (binary multiples, optional trailing B); throws std::invalid_argument.
uint64_t parse_size(const std::string& text);
// min, min*f, min*f^2, ... up to max.
std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor);

// The value rank `rank` contributes at element `i`.
int input_value(int rank, uint64_t i);

// Fills `count` elements of rank `rank`'s input.
void fill_input(void* buffer, uint64_t count, int32_t dtype, int rank);
// Elements of `got` that differ from `expected` (n elements of dtype).
uint64_t count_wrong(const void* got, const void* expected, uint64_t n, int32_t dtype);

// Calls fn(T*) with `buffer` cast to the dtype's element type (f32, f64, i32, i64); throws
// std::invalid_argument for any other dtype.
template <class Fn>
void dispatch_dtype(int32_t dtype, void* buffer, Fn&& fn) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
      return fn(static_cast<float*>(buffer));
    case DLHOST_DTYPE_F64:
      return fn(static_cast<double*>(buffer));
    case DLHOST_DTYPE_I32:
      return fn(static_cast<int32_t*>(buffer));
    case DLHOST_DTYPE_I64:
      return fn(static_cast<int64_t*>(buffer));
    default:
      throw std::invalid_argument("comm-bench: unsupported dtype " + std::to_string(dtype));
  }
}

}  // namespace dlhost::comm_bench
