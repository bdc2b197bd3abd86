// cuda_emulation.h — runs gpu_cudnn's CUDA kernel source on the CPU, for the tests of a machine
// without a GPU. Each block's threads are fibers (ucontext) on the calling thread: they run in
// turn, each up to its next __syncthreads, so every barrier is passed by all of the block's
// threads before any goes on, as on the device; __shared__ arrays are shared by the block. Enough
// of CUDA's execution model for kernels that use blocks, threads, barriers and shared memory (no
// warp intrinsics, no atomics): the kernels of kernels_transformer.cu. One OS thread, so it is
// deterministic and light on a shared machine. emulate_launches.py rewrites `kernel<<<grid,
// block, 0, stream>>>(args)` into `cuda_emulation::launch(grid, block, kernel, args)`; the source
// is otherwise compiled as it is. Include this before any CUDA header.
#pragma once

#define __host__
#define __device__
#define __global__
#define __shared__ static

#include <cuda_runtime_api.h>  // cudaStream_t, dim3, uint3 (host definitions only)
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

namespace cuda_emulation {

inline uint3 thread_index{}, block_index{};
inline dim3 grid_dim, block_dim;
inline ucontext_t scheduler;           // where a fiber returns at a barrier or at its end
inline ucontext_t* running = nullptr;  // the fiber now running
inline std::function<void()> body;     // the launch: the kernel and its arguments

constexpr size_t kStackBytes = size_t{64} << 10;
struct Fiber {
  ucontext_t context{};
  std::unique_ptr<char[]> stack{new char[kStackBytes]};  // left uninitialized: it is a stack
  bool done = false;
};
inline Fiber* starting = nullptr;

inline void fiber_main() {
  Fiber* self = starting;
  body();
  self->done = true;  // uc_link returns to the scheduler
}

// One launch, all done on return: blocks one after another; in a block, round after round, every
// unfinished thread runs up to its next barrier (or its end). The fibers' stacks serve every block.
template <class Kernel, class... Args>
void launch(dim3 grid, dim3 block, Kernel kernel, Args... args) {
  grid_dim = grid;
  block_dim = block;
  body = [=] { kernel(args...); };
  std::vector<Fiber> fibers(block.x);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        block_index = uint3{x, y, z};
        for (Fiber& f : fibers) {
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack.get();
          f.context.uc_stack.ss_size = kStackBytes;
          f.context.uc_link = &scheduler;
          f.done = false;
        }
        for (bool started = false, left = true; left; started = true) {
          left = false;
          for (unsigned t = 0; t < block.x; ++t) {
            Fiber& f = fibers[t];
            if (f.done) continue;
            thread_index = uint3{t, 0, 0};
            running = &f.context;
            if (!started) {
              starting = &f;
              makecontext(&f.context, fiber_main, 0);
            }
            swapcontext(&scheduler, &f.context);
            left = left || !f.done;
          }
        }
      }
}

}  // namespace cuda_emulation

#define threadIdx (::cuda_emulation::thread_index)
#define blockIdx (::cuda_emulation::block_index)
#define gridDim (::cuda_emulation::grid_dim)
#define blockDim (::cuda_emulation::block_dim)
// Back to the scheduler, which runs the block's other threads to this barrier first.
inline void __syncthreads() { swapcontext(cuda_emulation::running, &cuda_emulation::scheduler); }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
using std::isfinite;  // CUDA has it unqualified for device code
