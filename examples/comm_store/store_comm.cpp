// store_comm.cpp — `example_store`, a complete dlhost comm plugin in one file, written with the
// SDK's comm kit: collectives carried by the host's rendezvous key-value store
// (dlhost_host_api.store_set/store_get), so it needs no communication library at all. Each rank
// publishes its block under a key made of the collective's sequence number and its rank, then
// reads the others'; every rank reduces the blocks in rank order, so all ranks get bit-identical
// results. Slow (every byte goes through the store) but real: a data-parallel case trains on it.
//
// Collectives block and return completed requests (sdk::completed()). Keys are never deleted
// (the store has no delete), so the store grows with the bytes moved: fine for an example and a
// short case, not for a long run.
// Thread-safety: one comm is used from one host thread at a time (dlhost_comm.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/comm_kit.hpp"

namespace store_comm {

namespace sdk = dlhost::sdk;

constexpr int64_t kWaitMs = 120000;  // a rank may be compiling a model while the others wait

// The element size of the four types this plugin reduces (no 16-bit arithmetic here).
size_t element_size(int32_t dtype) {
  if (dtype == DLHOST_DTYPE_F16 || dtype == DLHOST_DTYPE_BF16 || sdk::dtype_size(dtype) == 0)
    sdk::unimplemented("example_store: dtype " + std::to_string(dtype) +
                       " is not supported (F32, F64, I32, I64)");
  return sdk::dtype_size(dtype);
}

// acc[i] = op(acc[i], x[i]) over `count` elements of type T; AVG sums (divided at the end).
template <class T>
void reduce(T* acc, const T* x, uint64_t count, int32_t op) {
  for (uint64_t i = 0; i < count; ++i)
    acc[i] = op == DLHOST_REDUCE_MAX   ? std::max(acc[i], x[i])
             : op == DLHOST_REDUCE_MIN ? std::min(acc[i], x[i])
                                       : acc[i] + x[i];
}

template <class T>
void reduce_blocks(const std::vector<std::vector<char>>& blocks, void* recv, uint64_t count,
                   int32_t op) {
  T* acc = static_cast<T*>(recv);
  std::memcpy(acc, blocks[0].data(), count * sizeof(T));
  for (size_t r = 1; r < blocks.size(); ++r)
    reduce(acc, reinterpret_cast<const T*>(blocks[r].data()), count, op);
  if (op == DLHOST_REDUCE_AVG)
    for (uint64_t i = 0; i < count; ++i) acc[i] = static_cast<T>(acc[i] / T(blocks.size()));
}

class StoreComm final : public sdk::Comm {
 public:
  StoreComm(int32_t rank, int32_t world) : rank_(rank), world_(world) {}

  std::unique_ptr<sdk::Request> all_reduce(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t op,
                                           int32_t memory_space) override {
    check_host(memory_space);
    if (op < DLHOST_REDUCE_SUM || op > DLHOST_REDUCE_MIN)
      sdk::invalid("example_store: unknown reduce op " + std::to_string(op));
    const auto blocks = exchange(send, count * element_size(dtype), -1);
    switch (dtype) {
      case DLHOST_DTYPE_F32:
        reduce_blocks<float>(blocks, recv, count, op);
        break;
      case DLHOST_DTYPE_F64:
        reduce_blocks<double>(blocks, recv, count, op);
        break;
      case DLHOST_DTYPE_I32:
        reduce_blocks<int32_t>(blocks, recv, count, op);
        break;
      default:
        reduce_blocks<int64_t>(blocks, recv, count, op);
    }
    return sdk::completed();
  }

  std::unique_ptr<sdk::Request> broadcast(void* buffer, uint64_t count, int32_t dtype, int32_t root,
                                          int32_t memory_space) override {
    check_host(memory_space);
    if (root < 0 || root >= world_)
      sdk::invalid("example_store: root " + std::to_string(root) + " is not a rank of " +
                   std::to_string(world_));
    const size_t bytes = count * element_size(dtype);
    const auto blocks = exchange(buffer, bytes, root);
    if (rank_ != root) std::memcpy(buffer, blocks[size_t(root)].data(), bytes);
    return sdk::completed();
  }

  std::unique_ptr<sdk::Request> all_gather(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t memory_space) override {
    check_host(memory_space);
    const size_t bytes = count * element_size(dtype);
    const auto blocks = exchange(send, bytes, -1);
    for (size_t r = 0; r < blocks.size(); ++r)
      std::memmove(static_cast<char*>(recv) + r * bytes, blocks[r].data(), bytes);
    return sdk::completed();
  }

  std::unique_ptr<sdk::Request> barrier() override {
    const char token = 1;
    exchange(&token, 1, -1);
    return sdk::completed();
  }

 private:
  static void check_host(int32_t memory_space) {
    if (memory_space != DLHOST_MEMORY_HOST)
      sdk::invalid("example_store: host memory only, got memory space " +
                   std::to_string(memory_space));
  }

  // Publishes `bytes` of `data` (when `only` is -1 or this rank) and returns every rank's block
  // (only `only`'s when it is a rank). One sequence number per collective keeps keys unique.
  std::vector<std::vector<char>> exchange(const void* data, size_t bytes, int32_t only) {
    const std::string prefix = "example_store/" + std::to_string(sequence_++) + "/";
    if (only < 0 || only == rank_)
      sdk::check(sdk::host()->store_set((prefix + std::to_string(rank_)).c_str(), data, bytes));
    std::vector<std::vector<char>> blocks(static_cast<size_t>(world_));
    for (int32_t r = 0; r < world_; ++r) {
      if (only >= 0 && r != only) continue;
      std::vector<char>& block = blocks[size_t(r)];
      if (r == rank_) {
        block.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
        continue;
      }
      block.resize(bytes);
      size_t got = 0;
      sdk::check(sdk::host()->store_get((prefix + std::to_string(r)).c_str(), kWaitMs, block.data(),
                                        bytes, &got));
      if (got != bytes)
        sdk::fail(DLHOST_CODE_DATA_LOSS, "example_store: rank " + std::to_string(r) + " sent " +
                                             std::to_string(got) + " bytes, expected " +
                                             std::to_string(bytes));
    }
    return blocks;
  }

  int32_t rank_, world_;
  uint64_t sequence_ = 0;  // collectives issued on this comm: the same on every rank
};

class StorePlugin final : public sdk::CommPlugin {
 public:
  sdk::CommCaps capabilities() const override {
    sdk::CommCaps caps;
    caps.dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_F64) | (1u << DLHOST_DTYPE_I32) |
                  (1u << DLHOST_DTYPE_I64);
    return caps;
  }
  std::string library() const override { return "dlhost rendezvous store (example_store 1.0.0)"; }
  int32_t query() const override { return -100; }  // never the host's own choice

  std::unique_ptr<sdk::Comm> init(const dlhost_comm_init_args& args) override {
    if (args.world_size < 1 || args.rank < 0 || args.rank >= args.world_size)
      sdk::invalid("example_store: rank " + std::to_string(args.rank) + " of a world of " +
                   std::to_string(args.world_size));
    return std::make_unique<StoreComm>(args.rank, args.world_size);
  }
};

}  // namespace store_comm

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::comm_plugin<store_comm::StorePlugin>(
      host, {"example_store", "1.0.0",
             "example out-of-tree comm: collectives over the host's "
             "rendezvous store"});
}
