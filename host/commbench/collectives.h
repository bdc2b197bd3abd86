// collectives.h — one descriptor per collective `dlhost comm-bench` measures, in the manner of
// nccl-tests' `struct testColl`: what a row of the sweep moves (elements per rank, the receive
// buffer, the bytes reported), the exact result a correct collective leaves, the bus bandwidth
// factor, and the call that issues it through a comm plugin's table. A new collective is one
// descriptor here and one line in `collectives()`; comm_bench.cpp holds no per-collective switch.
// The descriptors are constants: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dlhost/dlhost_comm.h"

namespace dlhost::comm_bench {

// What one row of the sweep moves, from the size the command line asks for.
struct RowShape {
  uint64_t count;       // elements each rank contributes (all_gather: each rank's block)
  uint64_t recv_count;  // elements in the receive buffer after the collective
  uint64_t bytes;  // the size the row reports (nccl-tests: all_gather's is the gathered buffer)
};

// One call's arguments: buffers, element count and type, and the op's own parameters (a
// collective that takes no reduction or root is handed 0 and -1, and ignores them).
struct IssueArgs {
  const void* send;
  void* recv;
  uint64_t count;
  int32_t dtype;
  int32_t redop;
  int root;
  int32_t memory_space;
  bool in_place;  // all_reduce with `recv` as input and output, as data parallelism issues it
};

struct Collective {
  const char* name;  // as --ops and the JSON spell it: "all_reduce"
  bool reduces;      // takes --redop
  bool rooted;       // takes --root
  bool in_place;     // --in-place applies to it
  // Works on `recv` alone, the root's copy being its input (broadcast): the root's receive buffer
  // is loaded with its input rather than poisoned before each checked iteration.
  bool root_input_in_recv;
  // The row for `size_bytes` of elements of `esize` bytes on `world` ranks; count 0: the size is
  // too small for one element per rank, and the row is left out.
  RowShape (*shape)(uint64_t size_bytes, size_t esize, int world);
  // nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md): it makes busbw comparable with the
  // link's bandwidth whatever the number of ranks.
  double (*busbw_factor)(int world);
  // What a correct collective leaves in the receive buffer (`shape().recv_count` elements), from
  // every rank's input_value() (comm_bench_data.h); exact in every dtype.
  void (*fill_expected)(void* buffer, uint64_t count, int32_t dtype, int32_t redop, int world,
                        int root);
  // Issues it through the plugin's table; the request comes back through `request`.
  dlhost_status* (*issue)(const dlhost_comm_api* api, dlhost_comm* comm, const IssueArgs& a,
                          dlhost_request** request);
};

extern const Collective kAllReduce;  // every rank's input reduced with --redop, on every rank
extern const Collective kBroadcast;  // the root's input on every rank
extern const Collective kAllGather;  // rank r's input at block r, on every rank

// Every collective, in the order `--ops all` runs them.
const std::vector<const Collective*>& collectives();
// The collective named `name`, or nullptr.
const Collective* find_collective(const std::string& name);

}  // namespace dlhost::comm_bench
