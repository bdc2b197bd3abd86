// memory_need.h — a case's `memory_limit_mb` against the least its network needs: the largest
// tensor of its graph at the case's mini-batch, which any backend must hold whole at some point.
// A case that fails or crashes under the limit while that tensor alone is over it ran out of
// memory, whatever its backend's allocator said (a framework's own error text) or did (TensorFlow
// writing through the null pointer of a refused allocation): the runner (in the case's process)
// and the parent (for a process that died) record it OOM with the limit and what was asked.
// Thread-safe: plain functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "dlhost/dlhost.h"

namespace dlhost {

struct TensorNeed {
  uint64_t bytes = 0;  // 0: unknown
  std::string tensor;  // its name in the graph
  std::string shape;   // "60000x20x24x24"
};

// The graph's largest tensor, at `element_bytes` an element when that is given (2: a bf16 or
// fp16 case, whose backend may hold activations in 16 bits), else at each tensor's own dtype.
TensorNeed largest_tensor(const dlhost_graph& graph, size_t element_bytes);
// The bytes per activation element a case's precision lets a backend use at least: 2 for bf16
// and fp16, else 0 (each tensor's own dtype).
size_t least_element_bytes(const std::string& precision);

// The data limit in force in this process (RLIMIT_DATA, what `memory_limit_mb` sets on the
// case's process); 0 when there is none.
uint64_t data_limit_bytes();

// "its largest tensor, 'conv1' (60000x20x24x24), needs 2637 MiB alone, over memory_limit_mb
// 1000": what a reason adds; "" when the need is unknown or within the limit.
std::string over_limit_text(const TensorNeed& need, uint64_t limit_bytes);
// "under memory_limit_mb 1000": the limit beside an out-of-memory reason.
std::string under_limit_text(uint64_t limit_bytes);

// The need as a marker carries it to the parent, and back.
nlohmann::ordered_json need_json(const TensorNeed& need);
TensorNeed need_from_json(const nlohmann::ordered_json& j);

}  // namespace dlhost
