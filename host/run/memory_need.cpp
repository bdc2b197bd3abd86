// memory_need.cpp — see memory_need.h.
#include "run/memory_need.h"

#include <sys/resource.h>

#include "dlhost/dlhost.hpp"

namespace dlhost {

TensorNeed largest_tensor(const dlhost_graph& graph, size_t element_bytes) {
  TensorNeed need;
  for (int32_t i = 0; i < graph.num_tensors; ++i) {
    const dlhost_tensor_desc* t = graph.tensors[i];
    if (t == nullptr) continue;
    uint64_t count = 1;
    std::string shape;
    for (int32_t d = 0; d < t->rank && d < DLHOST_MAX_RANK; ++d) {
      count *= static_cast<uint64_t>(t->dims[d] > 0 ? t->dims[d] : 0);
      shape += (d > 0 ? "x" : "") + std::to_string(t->dims[d]);
    }
    const size_t own = sdk::dtype_size(t->dtype);
    const uint64_t bytes = count * (element_bytes > 0 && own > element_bytes ? element_bytes : own);
    if (bytes > need.bytes) need = {bytes, t->name != nullptr ? t->name : "", shape};
  }
  return need;
}

size_t least_element_bytes(const std::string& precision) {
  return precision == "bf16" || precision == "fp16" ? 2 : 0;
}

uint64_t data_limit_bytes() {
  rlimit lim{};
  if (getrlimit(RLIMIT_DATA, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<uint64_t>(lim.rlim_cur);
}

std::string under_limit_text(uint64_t limit_bytes) {
  return "under memory_limit_mb " + std::to_string(limit_bytes >> 20);
}

std::string over_limit_text(const TensorNeed& need, uint64_t limit_bytes) {
  if (need.bytes == 0 || limit_bytes == 0 || need.bytes <= limit_bytes) return "";
  return "its largest tensor, '" + need.tensor + "' (" + need.shape + "), needs " +
         std::to_string((need.bytes + (1 << 20) - 1) >> 20) + " MiB alone, over memory_limit_mb " +
         std::to_string(limit_bytes >> 20);
}

nlohmann::ordered_json need_json(const TensorNeed& need) {
  return {{"bytes", need.bytes}, {"tensor", need.tensor}, {"shape", need.shape}};
}

TensorNeed need_from_json(const nlohmann::ordered_json& j) {
  TensorNeed need;
  if (!j.is_object()) return need;
  if (auto b = j.find("bytes"); b != j.end() && b->is_number_unsigned())
    need.bytes = b->get<uint64_t>();
  if (auto t = j.find("tensor"); t != j.end() && t->is_string())
    need.tensor = t->get<std::string>();
  if (auto s = j.find("shape"); s != j.end() && s->is_string()) need.shape = s->get<std::string>();
  return need;
}

}  // namespace dlhost
