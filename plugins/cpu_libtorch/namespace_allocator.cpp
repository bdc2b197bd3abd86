// namespace_allocator.cpp — cpu_libtorch2's namespace opened with the case's allocator, and the
// contiguous heap put under its tcmalloc (namespace_allocator.h says why).
#include "namespace_allocator.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <new>

namespace dlhost::torch_namespace {

namespace {

size_t page_size() { return size_t(sysconf(_SC_PAGESIZE)); }

uintptr_t round_up(uintptr_t n, uintptr_t to) { return (n + to - 1) / to * to; }

// The one heap of the process (one namespace per process): static storage, never destroyed,
// since tcmalloc allocates until the very end of the process.
alignas(ContiguousHeap) unsigned char heap_storage[sizeof(ContiguousHeap)];
ContiguousHeap* installed = nullptr;

// gperftools' `SysAllocator* tcmalloc_sys_alloc`, which TCMalloc_SystemAlloc calls for every
// growth of the heap, in the tcmalloc `first` is; nullptr where it is not gperftools' tcmalloc.
SysAllocator** system_allocator_of(void* first) {
  return first != nullptr ? static_cast<SysAllocator**>(dlsym(first, "tcmalloc_sys_alloc"))
                          : nullptr;
}

// "" when the contiguous heap serves the tcmalloc `first` is (or `first` is another allocator),
// else why not.
std::string install_contiguous_heap(void* first) {
  SysAllocator** slot = system_allocator_of(first);
  if (slot == nullptr) return "";  // jemalloc: grows with mmap by design, nothing to do
  if (installed != nullptr) return "a contiguous heap already serves another namespace";
  // One allocation first: tcmalloc sets its system allocators up on its first growth
  // (InitSystemAllocators), which would replace the one put here.
  using Malloc = void* (*)(size_t);
  using Free = void (*)(void*);
  auto malloc_there = reinterpret_cast<Malloc>(dlsym(first, "malloc"));
  auto free_there = reinterpret_cast<Free>(dlsym(first, "free"));
  if (malloc_there == nullptr || free_there == nullptr) return "the allocator has no malloc/free";
  free_there(malloc_there(1));
  if (*slot == nullptr) return "tcmalloc's system allocator is not set up";
  size_t reserve = size_t(sysconf(_SC_PHYS_PAGES)) * page_size();
  // A reservation counts against an address-space limit (ulimit -v; dlhost's own memory_limit_mb
  // is RLIMIT_DATA, which it does not): take at most half of one.
  if (rlimit as{}; getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    reserve = std::min(reserve, size_t(as.rlim_cur / 2));
  auto* heap = new (heap_storage) ContiguousHeap(reserve, *slot);
  if (!heap->reserved()) {
    heap->~ContiguousHeap();
    return "cannot reserve " + std::to_string(reserve >> 20) + " MiB of address space";
  }
  // Nothing else allocates in the namespace yet (libtorch is not loaded), so no lock is needed.
  installed = heap;
  *slot = heap;
  return "";
}

}  // namespace

ContiguousHeap::ContiguousHeap(size_t reserve, SysAllocator* fallback) : fallback_(fallback) {
  reserve = round_up(reserve, page_size());
  if (reserve == 0) return;
  void* range =
      mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) return;
  base_ = static_cast<char*>(range);
  reserve_ = reserve;
}

ContiguousHeap::~ContiguousHeap() {
  if (base_ != nullptr) munmap(base_, reserve_);
}

void* ContiguousHeap::Alloc(size_t size, size_t* actual_size, size_t alignment) {
  if (alignment < page_size()) alignment = page_size();
  // As gperftools' own allocators do: whole units of the alignment.
  const uintptr_t bytes = round_up(size, alignment);
  const uintptr_t at = round_up(uintptr_t(base_) + used_, alignment);
  const uintptr_t end = uintptr_t(base_) + reserve_;
  if (base_ != nullptr && size > 0 && bytes >= size && at >= uintptr_t(base_) && at <= end &&
      bytes <= end - at &&
      mprotect(reinterpret_cast<void*>(at), bytes, PROT_READ | PROT_WRITE) == 0) {
    used_ = at + bytes - uintptr_t(base_);
    if (actual_size != nullptr) *actual_size = bytes;
    return reinterpret_cast<void*>(at);
  }
  return fallback_ != nullptr ? fallback_->Alloc(size, actual_size, alignment) : nullptr;
}

void* open_namespace(const char* allocator, std::string* why, std::string* heap_warning) {
  void* first =
      dlmopen(LM_ID_NEWLM, allocator != nullptr ? allocator : "libc.so.6", RTLD_NOW | RTLD_LOCAL);
  if (first == nullptr) {
    *why = std::string("dlmopen of a new namespace: ") + dlerror();
    return nullptr;
  }
  if (allocator != nullptr) {
    std::string not_installed = install_contiguous_heap(first);
    if (!not_installed.empty())
      *heap_warning =
          "the namespace's tcmalloc grows its heap in separate mmap regions (fresh "
          "pages for large tensors): " +
          not_installed;
  }
  return first;
}

HeapRange contiguous_heap_range(void* first) {
  SysAllocator** slot = system_allocator_of(first);
  if (slot == nullptr || installed == nullptr || *slot != installed) return {};
  return {installed->begin(), installed->end()};
}

}  // namespace dlhost::torch_namespace
