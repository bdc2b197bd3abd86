// namespace_allocator.h — the case's allocator inside cpu_libtorch2's link-map namespace: the
// namespace opened with it, and the contiguous heap its tcmalloc needs there.
//
// The allocator heads the namespace: a namespace's first object heads its scope, so every object
// loaded into it afterwards, its libc included, resolves malloc/free/posix_memalign there first,
// in the allocator (LD_PRELOAD reaches only the default namespace, and dlmopen refuses
// RTLD_GLOBAL, so loading it later would leave libc's malloc first). Checked with LD_DEBUG=
// bindings: libc10's posix_memalign, libtorch_cpu's and libgomp's malloc/free bind to it.
//
// The contiguous heap: tcmalloc grows its heap with sbrk first (gperftools' SbrkSysAllocator), with
// mmap only where sbrk fails. In a namespace made by dlmopen, libc is a second copy, and glibc's
// sbrk refuses to move the program break from any copy but the first (ENOMEM, no system call),
// so the namespace's tcmalloc grew its heap in separate mmap regions, placed by the kernel among
// the case worker's other mappings (the host's side, two copies of the common libraries). Its
// page heap joins free spans only across adjacent pages: a large tensor that fit no free region
// grew the heap with fresh pages, and the page heap handed whole freed regions back to the kernel
// (madvise DONTNEED of 74-155 MB per step). On the LSTM language model (the [4096, 10000] logits,
// their log-softmax and its gradient, 164 MB each) that was 20,000-30,000 minor page faults per
// step where PyTorch in Python, under the same tcmalloc on sbrk, takes ~0; on this heap, ~70.
// ContiguousHeap gives it what sbrk gives it in the default namespace: one range of addresses
// handed out upward, so every growth adjoins the last.
// Thread-safety: tcmalloc calls Alloc under its own lock; open_namespace runs once per process,
// before anything else allocates in the namespace.
#pragma once

#include <cstddef>
#include <string>

namespace dlhost::torch_namespace {

// gperftools' SysAllocator (gperftools/malloc_extension.h) as tcmalloc calls it: the Itanium C++
// ABI lays out a class with a virtual destructor and one more virtual function the same way in
// both namespaces, so an object of this class serves as one of gperftools'.
class SysAllocator {
 public:
  virtual ~SysAllocator() = default;
  // `size` bytes aligned to `alignment` (a power of two); *actual_size: the bytes obtained.
  virtual void* Alloc(size_t size, size_t* actual_size, size_t alignment) = 0;
};

// A range of `reserve` bytes of address space (PROT_NONE: nothing committed, nothing counted by
// RLIMIT_DATA until handed out), handed out upward, each piece made readable and writable as it
// goes; past its end, or where the reservation failed, `fallback` (tcmalloc's own: mmap) serves.
class ContiguousHeap final : public SysAllocator {
 public:
  ContiguousHeap(size_t reserve, SysAllocator* fallback);
  ContiguousHeap(const ContiguousHeap&) = delete;
  ContiguousHeap& operator=(const ContiguousHeap&) = delete;
  ~ContiguousHeap() override;
  void* Alloc(size_t size, size_t* actual_size, size_t alignment) override;

  bool reserved() const { return base_ != nullptr; }
  const char* begin() const { return base_; }
  const char* end() const { return base_ + reserve_; }

 private:
  char* base_ = nullptr;
  size_t reserve_ = 0;
  size_t used_ = 0;  // bytes from base_ handed out, alignment padding included
  SysAllocator* fallback_;
};

// A new namespace whose first object is `allocator` (a library path), or libc where it is null;
// nullptr and *why where dlmopen fails. Where the allocator is gperftools' tcmalloc, its system
// allocator becomes a ContiguousHeap over the machine's physical memory (kept for the life of the
// process); *heap_warning says why not where that failed (the namespace then runs on tcmalloc's
// mmap heap, as before).
void* open_namespace(const char* allocator, std::string* why, std::string* heap_warning);

// The range of the contiguous heap serving the namespace whose first object is `first` (a handle
// from open_namespace), or {nullptr, nullptr} where none does. For checks.
struct HeapRange {
  const char* begin = nullptr;
  const char* end = nullptr;
};
HeapRange contiguous_heap_range(void* first);

}  // namespace dlhost::torch_namespace
