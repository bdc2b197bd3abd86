// nccl_support.h — what the `nccl` comm plugin needs around NCCL and the CUDA runtime: whether this
// machine has a CUDA device at all (and why not), the library's version, dlhost dtypes and reduce
// ops mapped onto NCCL's, NCCL and CUDA error codes turned into sdk::Error with NCCL's own last
// error text, a guard that keeps the calling thread's current device, and a poll loop with a
// deadline and an abort flag (NCCL's nonblocking calls are finished by polling).
//
// Thread-safety: every function here is thread-safe; DeviceGuard acts on the calling thread only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "dlhost/common.hpp"

namespace dlhost::comm_nccl {

constexpr const char* kName = "nccl";

// "" when the CUDA runtime sees at least one device; else why not ("cudaGetDeviceCount:
// CUDA driver version is insufficient ... (cudaErrorInsufficientDriver)", "0 CUDA devices").
std::string no_device_reason();
// Devices the runtime sees; 0 when it cannot tell (no driver).
int device_count();

// "NCCL 2.28.9" for the NCCL library loaded at run time (it may differ from the header's).
std::string library_version();

// Bit (1 << dlhost_dtype) per element type this NCCL carries: f32, f64, i32, i64, f16, and bf16
// from NCCL 2.10 on.
uint32_t supported_dtypes();

// Each throws INVALID_ARGUMENT ("nccl: <call>: ...") for a value NCCL has no counterpart of, and
// UNIMPLEMENTED for a dtype this NCCL lacks.
ncclDataType_t nccl_dtype(int32_t dtype, const char* call);
size_t dtype_bytes(int32_t dtype);
ncclRedOp_t nccl_op(int32_t op, const char* call);

// The dlhost status code for an NCCL result: a remote failure is ABORTED, misuse
// INVALID_ARGUMENT, the rest INTERNAL.
dlhost_code code_of(ncclResult_t result);

// Throws sdk::Error(code_of(result), "nccl: <what>: <ncclGetErrorString> (<ncclGetLastError>)")
// unless `result` is ncclSuccess. `comm` may be NULL.
void check_nccl(ncclResult_t result, const std::string& what, ncclComm_t comm = nullptr);
[[noreturn]] void fail_nccl(ncclResult_t result, const std::string& what, ncclComm_t comm);
// Throws sdk::Error(INTERNAL, "nccl: <what>: <cudaGetErrorString> (<name>)") unless cudaSuccess.
void check_cuda(cudaError_t error, const std::string& what);

// Makes `device` current for the calling thread and restores the previous one on exit, so the
// comm never moves the backend's thread to another device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

using Clock = std::chrono::steady_clock;

// Calls `ready` until it returns true, backing off from spinning to 1 ms sleeps. Throws
// sdk::Error(ABORTED, "nccl: <what>: <abort reason>") once `aborted` is set, and
// sdk::Error(DEADLINE_EXCEEDED, "nccl: <what> did not finish within <s> s<hint>") after
// `timeout`; `ready` may throw its own error.
template <class Ready, class Reason>
void poll_until(Ready&& ready, const std::string& what, std::chrono::duration<double> timeout,
                const std::atomic<bool>& aborted, Reason&& abort_reason, const char* hint);

// The deadline message shared by every poll ("nccl: <what> did not finish within 30 s<hint>").
[[noreturn]] void fail_deadline(const std::string& what, std::chrono::duration<double> timeout,
                                const char* hint);
void back_off(int spins);

template <class Ready, class Reason>
void poll_until(Ready&& ready, const std::string& what, std::chrono::duration<double> timeout,
                const std::atomic<bool>& aborted, Reason&& abort_reason, const char* hint) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  for (int spins = 0;; ++spins) {
    if (aborted.load()) sdk::fail(DLHOST_CODE_ABORTED, "nccl: " + what + ": " + abort_reason());
    if (ready()) return;
    if (Clock::now() > deadline) fail_deadline(what, timeout, hint);
    back_off(spins);
  }
}

}  // namespace dlhost::comm_nccl
