// test_namespace_allocator.cpp — cpu_libtorch2's namespace allocator
// (plugins/cpu_libtorch/namespace_allocator.h): the contiguous heap hands out adjacent writable
// pieces upward and falls back past its end; and tcmalloc, opened in a new namespace the way the
// loader opens it, serves a large block from the freed pages of two earlier ones instead of
// growing its heap with fresh pages (issue 40: the LSTM's logits took fresh pages every step).
// No timing: the check counts minor page faults, which only fresh pages cause.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "namespace_allocator.h"

namespace {

using dlhost::torch_namespace::ContiguousHeap;
using dlhost::torch_namespace::SysAllocator;

// As dlhost's case worker does (host/app/main.cpp): pthread keys 0-15 of this namespace's libc
// set aside before any initializer. The namespace's tcmalloc takes key 0 of its own libc, and the
// two copies of libc keep their keys' values in the same slots of the thread descriptor.
void set_keys_aside(int, char**, char**) {
  pthread_key_t key = 0;
  do {
    if (pthread_key_create(&key, nullptr) != 0) return;
  } while (key + 1 < 16);
}
__attribute__((section(".preinit_array"), used)) void (*const keys_aside)(int, char**,
                                                                          char**) = set_keys_aside;

// A fallback that counts its calls and has no memory.
struct CountingFallback final : SysAllocator {
  int calls = 0;
  void* Alloc(size_t, size_t*, size_t) override {
    ++calls;
    return nullptr;
  }
};

long minor_faults() {
  rusage use{};
  getrusage(RUSAGE_SELF, &use);
  return use.ru_minflt;
}

TEST(NamespaceAllocator, ContiguousHeapHandsOutAdjacentWritablePiecesUpward) {
  CountingFallback fallback;
  constexpr size_t kMiB = size_t(1) << 20;
  ContiguousHeap heap(64 * kMiB, &fallback);
  ASSERT_TRUE(heap.reserved());
  size_t got = 0;
  auto* a = static_cast<char*>(heap.Alloc(kMiB, &got, 8192));
  ASSERT_EQ(a, heap.begin());
  EXPECT_EQ(got, kMiB);
  auto* b = static_cast<char*>(heap.Alloc(3 * kMiB - 100, &got, 8192));
  EXPECT_EQ(b, a + kMiB) << "the second growth adjoins the first";
  EXPECT_EQ(got, 3 * kMiB) << "whole units of the alignment";
  std::memset(a, 1, 4 * kMiB);  // both pieces writable
  // A larger alignment: the next multiple of it, the size rounded up to it.
  auto* c = static_cast<char*>(heap.Alloc(5000, &got, 2 * kMiB));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(uintptr_t(c) % (2 * kMiB), 0u);
  EXPECT_GE(c, b + 3 * kMiB);
  EXPECT_EQ(got, 2 * kMiB);
  c[got - 1] = 1;
  EXPECT_EQ(fallback.calls, 0);
  // Past the end of the range: the fallback serves (here: nothing).
  EXPECT_EQ(heap.Alloc(64 * kMiB, &got, 8192), nullptr);
  EXPECT_EQ(fallback.calls, 1);
}

TEST(NamespaceAllocator, ContiguousHeapThatCouldNotReserveFallsBack) {
  CountingFallback fallback;
  ContiguousHeap heap(0, &fallback);
  EXPECT_FALSE(heap.reserved());
  size_t got = 0;
  EXPECT_EQ(heap.Alloc(8192, &got, 8192), nullptr);
  EXPECT_EQ(fallback.calls, 1);
}

// Two large blocks, grown one after the other with a mapping of someone else's made between
// the two growths (in dlhost's process: the host's side, thread stacks, libraries), then freed;
// a block 1.5 times as large fits in them only where the two adjoin. On tcmalloc's mmap heap it
// got fresh pages (one minor fault per 4 KiB page written); on the contiguous heap it reuses
// the freed ones.
TEST(NamespaceAllocator, TcmallocInTheNamespaceReusesFreedPagesForALargerBlock) {
  std::string why, warning;
  void* first = dlhost::torch_namespace::open_namespace("libtcmalloc_minimal.so.4", &why, &warning);
  if (first == nullptr && why.find("No such file") != std::string::npos)
    GTEST_SKIP() << "tcmalloc not installed here (Debian's libtcmalloc-minimal4): " << why;
  ASSERT_NE(first, nullptr) << why;
  EXPECT_EQ(warning, "");
  using Malloc = void* (*)(size_t);
  using Free = void (*)(void*);
  auto malloc_there = reinterpret_cast<Malloc>(dlsym(first, "malloc"));
  auto free_there = reinterpret_cast<Free>(dlsym(first, "free"));
  ASSERT_NE(malloc_there, nullptr);
  ASSERT_NE(free_there, nullptr);
  // tcmalloc's first free to its page heap hands one free span back to the kernel at once (its
  // scavenger starts due); let that be a small one, as in a real process.
  free_there(malloc_there(size_t(2) << 20));

  constexpr size_t kBlock = size_t(96) << 20;
  auto* a = static_cast<char*>(malloc_there(kBlock));
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, kBlock);
  const size_t other_size = size_t(64) << 10;
  void* other = mmap(a - other_size, other_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  auto* b = static_cast<char*>(malloc_there(kBlock));
  ASSERT_NE(b, nullptr);
  std::memset(b, 1, kBlock);
  free_there(a);
  free_there(b);

  const size_t larger = kBlock / 2 * 3;
  const long before = minor_faults();
  auto* c = static_cast<char*>(malloc_there(larger));
  ASSERT_NE(c, nullptr);
  std::memset(c, 2, larger);
  const long faults = minor_faults() - before;
  const auto range = dlhost::torch_namespace::contiguous_heap_range(first);
  EXPECT_TRUE(c >= range.begin && c + larger <= range.end)
      << "the block is not on the contiguous heap";
  free_there(c);
  if (other != MAP_FAILED) munmap(other, other_size);
  const long fresh_pages = long(larger / size_t(sysconf(_SC_PAGESIZE)));
  EXPECT_LT(faults, fresh_pages / 10) << faults << " minor page faults writing a " << (larger >> 20)
                                      << " MiB block that fits in two freed ones (" << fresh_pages
                                      << " if all its pages are fresh)";
}

}  // namespace
