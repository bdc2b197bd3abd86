// collectives.cpp — the descriptors of the collectives comm-bench measures (collectives.h).
#include "commbench/collectives.h"

#include <algorithm>

#include "commbench/comm_bench_data.h"
#include "dlhost/dlhost.h"

namespace dlhost::comm_bench {
namespace {

template <class T>
void reduce_typed(T* x, uint64_t count, int32_t redop, int world) {
  for (uint64_t i = 0; i < count; ++i) {
    T acc = static_cast<T>(input_value(0, i));
    for (int r = 1; r < world; ++r) {
      T v = static_cast<T>(input_value(r, i));
      if (redop == DLHOST_REDUCE_MAX)
        acc = std::max(acc, v);
      else if (redop == DLHOST_REDUCE_MIN)
        acc = std::min(acc, v);
      else
        acc += v;  // exact: small integers
    }
    // The same single division the plugin does (integer types truncate toward zero).
    if (redop == DLHOST_REDUCE_AVG) acc /= static_cast<T>(world);
    x[i] = acc;
  }
}

// --- all_reduce -----------------------------------------------------------------------------
RowShape all_reduce_shape(uint64_t size, size_t esize, int) {
  const uint64_t count = size / esize;
  return {count, count, count * esize};
}
double all_reduce_busbw(int world) { return 2.0 * (world - 1) / world; }
void all_reduce_expected(void* buffer, uint64_t count, int32_t dtype, int32_t redop, int world,
                         int) {
  dispatch_dtype(dtype, buffer, [&](auto* x) { reduce_typed(x, count, redop, world); });
}
dlhost_status* all_reduce_issue(const dlhost_comm_api* api, dlhost_comm* comm, const IssueArgs& a,
                                dlhost_request** request) {
  return api->all_reduce(comm, a.in_place ? a.recv : a.send, a.recv, a.count, a.dtype, a.redop,
                         a.memory_space, request);
}

// --- broadcast ------------------------------------------------------------------------------
RowShape broadcast_shape(uint64_t size, size_t esize, int) {
  const uint64_t count = size / esize;
  return {count, count, count * esize};
}
double broadcast_busbw(int) { return 1.0; }
void broadcast_expected(void* buffer, uint64_t count, int32_t dtype, int32_t, int, int root) {
  fill_input(buffer, count, dtype, root);
}
dlhost_status* broadcast_issue(const dlhost_comm_api* api, dlhost_comm* comm, const IssueArgs& a,
                               dlhost_request** request) {
  return api->broadcast(comm, a.recv, a.count, a.dtype, a.root, a.memory_space, request);
}

// --- all_gather -----------------------------------------------------------------------------
// nccl-tests' convention: the size is the gathered (total) buffer, each rank's block 1/world of it.
RowShape all_gather_shape(uint64_t size, size_t esize, int world) {
  const uint64_t count = size / (esize * static_cast<uint64_t>(world));
  return {count, count * world, count * esize * world};
}
double all_gather_busbw(int world) { return static_cast<double>(world - 1) / world; }
void all_gather_expected(void* buffer, uint64_t count, int32_t dtype, int32_t, int world, int) {
  const uint64_t block = count * dtype_size(dtype);
  for (int r = 0; r < world; ++r)
    fill_input(static_cast<char*>(buffer) + static_cast<uint64_t>(r) * block, count, dtype, r);
}
dlhost_status* all_gather_issue(const dlhost_comm_api* api, dlhost_comm* comm, const IssueArgs& a,
                                dlhost_request** request) {
  return api->all_gather(comm, a.send, a.recv, a.count, a.dtype, a.memory_space, request);
}

}  // namespace

const Collective kAllReduce{"all_reduce",
                            true,
                            false,
                            true,
                            false,
                            all_reduce_shape,
                            all_reduce_busbw,
                            all_reduce_expected,
                            all_reduce_issue};
const Collective kBroadcast{
    "broadcast",        false,          true, false, true, broadcast_shape, broadcast_busbw,
    broadcast_expected, broadcast_issue};
const Collective kAllGather{
    "all_gather",        false,           false, false, false, all_gather_shape, all_gather_busbw,
    all_gather_expected, all_gather_issue};

const std::vector<const Collective*>& collectives() {
  static const std::vector<const Collective*> all{&kAllReduce, &kBroadcast, &kAllGather};
  return all;
}

const Collective* find_collective(const std::string& name) {
  for (const Collective* c : collectives())
    if (name == c->name) return c;
  return nullptr;
}

}  // namespace dlhost::comm_bench
