// ShmDeviceCopier (include/prefixd/shm_cuda.h): CUDA host registrations of a ShmClient's arenas
// and copies of its views to the device. Compiled only where the CUDA toolkit was found.
#include "prefixd/shm_cuda.h"

#include <cuda_runtime_api.h>

#include <string>

namespace prefixd {
namespace {

Status CudaError(cudaError_t err, const std::string& what) {
  return Status::IoError(what + ": " + cudaGetErrorString(err));
}

}  // namespace

ShmDeviceCopier::~ShmDeviceCopier() {
  for (size_t id = 0; id < registered_.size(); ++id) {
    if (registered_[id]) (void)cudaHostUnregister(const_cast<void*>(bases_[id]));
  }
}

bool ShmDeviceCopier::ReadOnlyRegistrationSupported() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  int supported = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterReadOnlySupported, device) !=
      cudaSuccess) {
    return false;
  }
  return supported != 0;
}

Status ShmDeviceCopier::RegisterArenas() {
  if (registered_.size() == client_.arena_count()) return Status::Ok();
  if (!ReadOnlyRegistrationSupported()) {
    return Status::Unavailable(
        "this CUDA device does not register read-only host memory "
        "(cudaDevAttrHostRegisterReadOnlySupported is 0, or there is no device)");
  }
  while (registered_.size() < client_.arena_count()) {
    const std::span<const uint8_t> arena = client_.arena(registered_.size());
    void* base = const_cast<uint8_t*>(arena.data());  // registered read-only: never written
    const cudaError_t err =
        cudaHostRegister(base, arena.size(), cudaHostRegisterPortable | cudaHostRegisterReadOnly);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: clear it for the caller's next call
      return CudaError(err, "cudaHostRegister of arena " + std::to_string(registered_.size()));
    }
    registered_.push_back(true);
    bases_.push_back(base);
    registered_bytes_ += arena.size();
  }
  return Status::Ok();
}

Status ShmDeviceCopier::CopyToDevice(const ShmView& view, void* device_dst, CUstream_st* stream,
                                     bool* pinned) {
  if (pinned != nullptr) *pinned = false;
  if (view.size == 0) return Status::Ok();
  if (view.data == nullptr) return Status::InvalidArgument("an empty view has nothing to copy");
  cudaError_t err;
  if (view.zeros) {
    err = cudaMemsetAsync(device_dst, 0, view.size, stream);
  } else {
    err = cudaMemcpyAsync(device_dst, view.data, view.size, cudaMemcpyHostToDevice, stream);
    if (pinned != nullptr) *pinned = view.lease != 0 && registered(view.arena);
  }
  if (err != cudaSuccess) return CudaError(err, "copying a view to the device");
  return Status::Ok();
}

}  // namespace prefixd
