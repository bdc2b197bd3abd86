// comm_bench_data.cpp — exact inputs of comm-bench, wrong elements counted, dtypes, reduction
// ops and size parsing (see comm_bench_data.h).
#include "commbench/comm_bench_data.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <stdexcept>
#include <type_traits>

#include "dlhost/dlhost.h"

namespace dlhost::comm_bench {
namespace {

template <class T>
void fill_input_typed(T* x, uint64_t count, int rank) {
  for (uint64_t i = 0; i < count; ++i) x[i] = static_cast<T>(input_value(rank, i));
}

template <class T>
uint64_t count_wrong_typed(const T* got, const T* expected, uint64_t n) {
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < n; ++i) wrong += got[i] == expected[i] ? 0 : 1;  // NaN counts wrong
  return wrong;
}

}  // namespace

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
    case DLHOST_DTYPE_I32:
      return 4;
    case DLHOST_DTYPE_F64:
    case DLHOST_DTYPE_I64:
      return 8;
    case DLHOST_DTYPE_F16:
    case DLHOST_DTYPE_BF16:
      return 2;
    default:
      return 0;
  }
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
      return "f32";
    case DLHOST_DTYPE_F64:
      return "f64";
    case DLHOST_DTYPE_I32:
      return "i32";
    case DLHOST_DTYPE_I64:
      return "i64";
    case DLHOST_DTYPE_F16:
      return "f16";
    case DLHOST_DTYPE_BF16:
      return "bf16";
    default:
      return "?";
  }
}

int32_t parse_dtype(const std::string& name) {
  for (int32_t d : {DLHOST_DTYPE_F32, DLHOST_DTYPE_F64, DLHOST_DTYPE_I32, DLHOST_DTYPE_I64})
    if (name == dtype_name(d)) return d;
  return 0;
}

const char* redop_name(int32_t op) {
  switch (op) {
    case DLHOST_REDUCE_SUM:
      return "sum";
    case DLHOST_REDUCE_AVG:
      return "avg";
    case DLHOST_REDUCE_MAX:
      return "max";
    case DLHOST_REDUCE_MIN:
      return "min";
    default:
      return "none";
  }
}

int32_t parse_redop(const std::string& name) {
  for (int32_t op : {DLHOST_REDUCE_SUM, DLHOST_REDUCE_AVG, DLHOST_REDUCE_MAX, DLHOST_REDUCE_MIN})
    if (name == redop_name(op)) return op;
  return 0;
}

uint64_t parse_size(const std::string& text) {
  auto bad = [&] {
    return std::invalid_argument("'" + text + "' is not a size (e.g. 8, 64K, 1M, 2G)");
  };
  std::string s = text;
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  uint64_t multiplier = 1;
  if (!s.empty() && std::isalpha(static_cast<unsigned char>(s.back()))) {
    switch (std::toupper(static_cast<unsigned char>(s.back()))) {
      case 'K':
        multiplier = 1ull << 10;
        break;
      case 'M':
        multiplier = 1ull << 20;
        break;
      case 'G':
        multiplier = 1ull << 30;
        break;
      default:
        throw bad();
    }
    s.pop_back();
  }
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char ch) { return std::isdigit(ch); }))
    throw bad();
  // Past 1 TiB (or 2^64, where stoull gave only "stoull"): no buffer of this host holds it.
  errno = 0;
  const uint64_t value = std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE || value > (1ull << 40) / multiplier)
    throw std::invalid_argument("'" + text +
                                "' is larger than 1T, the largest size comm-bench takes");
  return value * multiplier;
}

std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor) {
  if (min_bytes == 0 || max_bytes < min_bytes || factor < 2)
    throw std::invalid_argument("sizes need 0 < -b <= -e and -f >= 2");
  std::vector<uint64_t> sizes;
  for (uint64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;  // the next step would overflow or pass max
  }
  return sizes;
}

int input_value(int rank, uint64_t i) {
  // Varies with the rank at every element, so MAX/MIN pick different ranks along the buffer and a
  // block gathered to the wrong slot is caught.
  return static_cast<int>((i + 7 * static_cast<uint64_t>(rank)) % 17) - 8;
}

void fill_input(void* buffer, uint64_t count, int32_t dtype, int rank) {
  dispatch_dtype(dtype, buffer, [&](auto* x) { fill_input_typed(x, count, rank); });
}

uint64_t count_wrong(const void* got, const void* expected, uint64_t n, int32_t dtype) {
  uint64_t wrong = 0;
  dispatch_dtype(dtype, const_cast<void*>(got), [&](auto* x) {
    using T = std::remove_pointer_t<decltype(x)>;
    wrong = count_wrong_typed<T>(x, static_cast<const T*>(expected), n);
  });
  return wrong;
}

}  // namespace dlhost::comm_bench
