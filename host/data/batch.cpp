// batch.cpp — see batch.h.
#include "data/batch.h"

#include <new>

namespace dlhost::data {

HostAllocator HostAllocator::aligned() {
  constexpr std::align_val_t kAlign{64};  // a cache line; also AVX-512 friendly for copies
  return {[](size_t bytes) { return ::operator new(bytes, kAlign); },
          [](void* p, size_t) { ::operator delete(p, kAlign); }};
}

Batch::Batch(const BatchLayout& layout, int64_t batch, const HostAllocator& alloc)
    : features(static_cast<size_t>(layout.features_per_sample * batch), alloc),
      ids(static_cast<size_t>(layout.ids_per_sample * batch), alloc),
      targets(static_cast<size_t>(layout.targets_per_sample * batch), alloc),
      samples(static_cast<size_t>(batch), -1) {}

}  // namespace dlhost::data
