// control_plane.h — the small collectives the host itself needs across the ranks of a case or a
// comm-bench run (timings, losses, "is any rank late", who runs where), apart from the data the
// comm under test moves: a comm that works on device memory only (NCCL, device_store) cannot
// serve host arrays, so the host runs these over a host-memory comm when the case has one, else
// over the rendezvous store (the one every rank of a case shares).
//
// Every rank must make the same calls in the same order. Blocking. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dlhost {

class CommSession;

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  // In place, on host memory; dtype f32, f64, i32 or i64; redop sum, avg, max or min.
  virtual void all_reduce(void* data, uint64_t count, int32_t dtype, int32_t redop) = 0;
  // Rank r's `count` elements land at block r of `recv` (world * count elements).
  virtual void all_gather(const void* send, void* recv, uint64_t count, int32_t dtype) = 0;
  virtual void barrier() = 0;
  virtual std::string kind() const = 0;  // "comm <name>" or "store"
};

// Over a comm that accepts host memory; `comm` outlives the result.
std::unique_ptr<ControlPlane> comm_control_plane(const CommSession& comm);

// Over the rendezvous store: keys `prefix` + a call sequence number + the rank, so that two
// planes of one process (or one case) never collide when their prefixes differ. Results are
// combined in rank order, so every rank ends with the same bits.
std::unique_ptr<ControlPlane> store_control_plane(int rank, int world, std::string prefix);

}  // namespace dlhost
