// nccl_support.cpp — see nccl_support.h.
#include "nccl_support.h"

#include <cstdio>
#include <thread>

namespace dlhost::comm_nccl {

int device_count() {
  // Without a driver cudaGetDeviceCount returns an error and leaves the count unwritten.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::string no_device_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    std::string why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(error) + " (" +
                      cudaGetErrorName(error) + ")";
    cudaGetLastError();  // a failed probe must not poison the next runtime call of the process
    return why;
  }
  if (count <= 0) return "the CUDA runtime sees 0 devices";
  return "";
}

std::string library_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL_VERSION's encoding: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 on.
  const bool old = code < 20900;
  const int major = old ? code / 1000 : code / 10000;
  const int minor = old ? code % 1000 / 100 : code % 10000 / 100;
  return "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(code % 100);
}

uint32_t supported_dtypes() {
  uint32_t bits = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_F64) | (1u << DLHOST_DTYPE_I32) |
                  (1u << DLHOST_DTYPE_I64) | (1u << DLHOST_DTYPE_F16);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
  bits |= 1u << DLHOST_DTYPE_BF16;
#endif
  return bits;
}

ncclDataType_t nccl_dtype(int32_t dtype, const char* call) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
      return ncclFloat32;
    case DLHOST_DTYPE_F64:
      return ncclFloat64;
    case DLHOST_DTYPE_I32:
      return ncclInt32;
    case DLHOST_DTYPE_I64:
      return ncclInt64;
    case DLHOST_DTYPE_F16:
      return ncclFloat16;
    case DLHOST_DTYPE_BF16:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      return ncclBfloat16;
#else
      sdk::unimplemented(std::string("nccl: ") + call + ": bf16 needs NCCL 2.10 or later");
#endif
    default:
      sdk::invalid(std::string("nccl: ") + call + ": unknown dtype " + std::to_string(dtype));
  }
}

size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case DLHOST_DTYPE_F16:
    case DLHOST_DTYPE_BF16:
      return 2;
    case DLHOST_DTYPE_F64:
    case DLHOST_DTYPE_I64:
      return 8;
    default:
      return 4;
  }
}

ncclRedOp_t nccl_op(int32_t op, const char* call) {
  switch (op) {
    case DLHOST_REDUCE_SUM:
      return ncclSum;
    case DLHOST_REDUCE_AVG:
      return ncclAvg;  // NCCL 2.10+; sum then divide by the world size on the device
    case DLHOST_REDUCE_MAX:
      return ncclMax;
    case DLHOST_REDUCE_MIN:
      return ncclMin;
    default:
      sdk::invalid(std::string("nccl: ") + call + ": unknown reduce op " + std::to_string(op));
  }
}

dlhost_code code_of(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return DLHOST_CODE_OK;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return DLHOST_CODE_INVALID_ARGUMENT;
    case ncclRemoteError:
      return DLHOST_CODE_ABORTED;
    case ncclSystemError:
      return DLHOST_CODE_UNAVAILABLE;
    default:
      return DLHOST_CODE_INTERNAL;
  }
}

void fail_nccl(ncclResult_t result, const std::string& what, ncclComm_t comm) {
  std::string message = std::string("nccl: ") + what + ": " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  sdk::fail(code_of(result), message);
}

void check_nccl(ncclResult_t result, const std::string& what, ncclComm_t comm) {
  if (result != ncclSuccess) fail_nccl(result, what, comm);
}

void check_cuda(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky-free error so the next call reports its own
  sdk::fail(DLHOST_CODE_INTERNAL, "nccl: " + what + ": " + cudaGetErrorString(error) + " (" +
                                      cudaGetErrorName(error) + ")");
}

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

void fail_deadline(const std::string& what, std::chrono::duration<double> timeout,
                   const char* hint) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeout.count());
  sdk::fail(DLHOST_CODE_DEADLINE_EXCEEDED,
            "nccl: " + what + " did not finish within " + seconds + " s" + hint);
}

void back_off(int spins) {
  // Spin briefly (a collective usually settles in microseconds), then yield, then sleep so that a
  // long wait does not burn a core the backend's thread may need.
  if (spins < 64) return;
  if (spins < 1024) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(spins < 4096 ? 50 : 1000));
}

}  // namespace dlhost::comm_nccl
