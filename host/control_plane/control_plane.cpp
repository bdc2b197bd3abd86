// control_plane.cpp — see control_plane.h.
#include "control_plane/control_plane.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/handles.h"
#include "core/host_api.h"

namespace dlhost {
namespace {

// A rank that never arrives is the watchdog's to report (case timeout), not this wait's.
constexpr int64_t kStoreWaitMs = 24 * 3600 * 1000LL;

class CommPlane : public ControlPlane {
 public:
  explicit CommPlane(const CommSession& comm) : comm_(comm) {}
  void all_reduce(void* data, uint64_t count, int32_t dtype, int32_t redop) override {
    comm_.all_reduce(data, count, dtype, redop);
  }
  void all_gather(const void* send, void* recv, uint64_t count, int32_t dtype) override {
    comm_.all_gather(send, recv, count, dtype);
  }
  void barrier() override { comm_.barrier(); }
  std::string kind() const override { return "comm " + comm_.name(); }

 private:
  const CommSession& comm_;
};

template <class T>
void combine(T* acc, const T* x, uint64_t n, int32_t redop) {
  for (uint64_t i = 0; i < n; ++i) {
    if (redop == DLHOST_REDUCE_MAX)
      acc[i] = std::max(acc[i], x[i]);
    else if (redop == DLHOST_REDUCE_MIN)
      acc[i] = std::min(acc[i], x[i]);
    else
      acc[i] += x[i];
  }
}

template <class T>
void divide(T* acc, uint64_t n, int world) {
  for (uint64_t i = 0; i < n; ++i) acc[i] /= static_cast<T>(world);
}

template <class Fn>
void typed(int32_t dtype, Fn&& fn) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
      return fn(float{});
    case DLHOST_DTYPE_F64:
      return fn(double{});
    case DLHOST_DTYPE_I32:
      return fn(int32_t{});
    case DLHOST_DTYPE_I64:
      return fn(int64_t{});
    default:
      throw Error(DLHOST_CODE_UNIMPLEMENTED,
                  "control plane: dtype " + std::to_string(dtype) + " (f32, f64, i32, i64 only)");
  }
}

class StorePlane : public ControlPlane {
 public:
  StorePlane(int rank, int world, std::string prefix)
      : rank_(rank), world_(world), prefix_(std::move(prefix)) {}

  void all_reduce(void* data, uint64_t count, int32_t dtype, int32_t redop) override {
    const size_t bytes = count * sdk::dtype_size(dtype);
    std::vector<unsigned char> all(bytes * static_cast<size_t>(world_));
    exchange(data, all.data(), bytes);
    typed(dtype, [&](auto zero) {
      using T = decltype(zero);
      auto* acc = reinterpret_cast<T*>(all.data());
      for (int r = 1; r < world_; ++r)
        combine(acc, acc + count * static_cast<uint64_t>(r), count, redop);
      if (redop == DLHOST_REDUCE_AVG) divide(acc, count, world_);
    });
    std::memcpy(data, all.data(), bytes);
  }
  void all_gather(const void* send, void* recv, uint64_t count, int32_t dtype) override {
    exchange(send, recv, count * sdk::dtype_size(dtype));
  }
  void barrier() override {
    char one = 1;
    std::vector<char> all(static_cast<size_t>(world_));
    exchange(&one, all.data(), 1);
  }
  std::string kind() const override { return "store"; }

 private:
  // Every rank's `bytes` from `mine` into `all` (rank order).
  void exchange(const void* mine, void* all, size_t bytes) {
    const std::string key = prefix_ + std::to_string(sequence_++) + "/";
    const dlhost_host_api* host = host_api();
    check_status(host->store_set((key + std::to_string(rank_)).c_str(), mine, bytes),
                 "control plane: store_set");
    for (int r = 0; r < world_; ++r) {
      auto* dst = static_cast<unsigned char*>(all) + bytes * static_cast<size_t>(r);
      if (r == rank_) {
        std::memmove(dst, mine, bytes);
        continue;
      }
      size_t got = 0;
      const std::string theirs = key + std::to_string(r);
      check_status(host->store_get(theirs.c_str(), kStoreWaitMs, dst, bytes, &got),
                   "control plane: store_get " + theirs);
      if (got != bytes)
        throw Error(DLHOST_CODE_INTERNAL, "control plane: key " + theirs + " holds " +
                                              std::to_string(got) + " bytes, expected " +
                                              std::to_string(bytes));
    }
  }

  int rank_, world_;
  std::string prefix_;
  uint64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<ControlPlane> comm_control_plane(const CommSession& comm) {
  return std::make_unique<CommPlane>(comm);
}

std::unique_ptr<ControlPlane> store_control_plane(int rank, int world, std::string prefix) {
  return std::make_unique<StorePlane>(rank, world, std::move(prefix));
}

}  // namespace dlhost
