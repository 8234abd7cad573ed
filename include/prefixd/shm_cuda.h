// prefixd::ShmDeviceCopier: copies views of a ShmClient (include/prefixd/shm.h) to GPU memory,
// from arenas it registers with CUDA once each, read-only (cudaHostRegisterReadOnly), so a copy
// is a DMA straight out of the server's pages: no staging buffer, no copy by the CPU. It belongs
// to the ShmClient's thread, and to one CUDA device (the current one when it registers).
//
// Built only where the CUDA toolkit is found at configure time (target prefixd_client_cuda);
// this header names no CUDA type, so including it needs no CUDA headers.
//
// Registering an arena pins all of it: every page of its mapping, holes included, and a shmem
// hole that is read gets a page of its own (docs/shm-transport.md, "Where the bytes live"). So
// registering a 1 GiB arena that holds 100 MB commits the whole GiB in the server's memory while
// the registration lasts. That is the price of registering once; views of an arena that is not
// registered are copied from pageable memory (CUDA stages them through its own pinned buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "prefixd/shm.h"
#include "prefixd/status.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace prefixd {

class ShmDeviceCopier {
 public:
  explicit ShmDeviceCopier(ShmClient& client) : client_(client) {}
  ~ShmDeviceCopier();  // unregisters what it registered
  ShmDeviceCopier(const ShmDeviceCopier&) = delete;
  ShmDeviceCopier& operator=(const ShmDeviceCopier&) = delete;

  // Whether the current device accepts read-only registrations (the arenas are mapped
  // PROT_READ: a writable registration of them fails). False without a device.
  static bool ReadOnlyRegistrationSupported();

  // Registers every arena the client has mapped and this copier has not registered yet
  // (cudaHostRegister with cudaHostRegisterReadOnly). Call it after a fetch whose views name a
  // new arena, or once after Connect: arenas already registered are not touched again. An error
  // (no device, no read-only support, out of pinnable memory) leaves earlier registrations.
  Status RegisterArenas();

  // Queues a copy of `view` to `device_dst` (view.size bytes) on `stream` (null: the default
  // stream). A view in a registered arena is copied by DMA from the mapping; a run of zeros is
  // a cudaMemsetAsync; anything else (a copy the server answered inline, an arena not
  // registered) is copied from pageable memory, which CUDA does synchronously with the host.
  // `pinned`, when given, says whether the copy came from a registered arena. The view must stay
  // leased until the stream has run the copy.
  Status CopyToDevice(const ShmView& view, void* device_dst, CUstream_st* stream = nullptr,
                      bool* pinned = nullptr);

  bool registered(uint32_t arena) const { return arena < registered_.size() && registered_[arena]; }
  uint64_t registered_bytes() const { return registered_bytes_; }

 private:
  ShmClient& client_;
  std::vector<bool> registered_;  // by arena id
  std::vector<const void*> bases_;
  uint64_t registered_bytes_ = 0;
};

}  // namespace prefixd
