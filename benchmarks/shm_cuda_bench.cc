// prefixd-shm-cuda-bench: host-to-device copies of a value read through the same-host path
// (docs/shm-transport.md), from its arena registered with CUDA (ShmDeviceCopier, read-only),
// against the usual ways: cudaMemcpy from a pinned buffer of the process's own (cudaMallocHost,
// after a CPU copy out of the arena) and from the arena unregistered (pageable). Needs a CUDA
// device and a prefixd-server with `--shm-arenas yes` listening on a unix socket.
//
//   prefixd-shm-cuda-bench --socket /tmp/prefixd.sock --mb 256 --rounds 10
//
// Prints, per way, the median GB/s over --rounds copies, and the one-off costs (registering the
// arenas, allocating the pinned buffer, the CPU copy into it). Single-threaded.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "prefixd/shm.h"
#include "prefixd/shm_cuda.h"

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "prefixd-shm-cuda-bench: %s\n", what.c_str());
  std::exit(2);
}

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) Die(std::string(what) + ": " + cudaGetErrorString(err));
}

void Check(const prefixd::Status& st, const char* what) {
  if (!st.ok()) Die(std::string(what) + ": " + st.ToString());
}

// Median GB/s of `rounds` runs of `copy` (which queues one copy of `bytes` on the default
// stream), each timed to its end.
template <typename F>
double MedianGbps(int rounds, size_t bytes, F&& copy) {
  std::vector<double> gbps;
  for (int i = 0; i < rounds; ++i) {
    const auto start = Clock::now();
    copy();
    Check(cudaDeviceSynchronize(), "synchronizing");
    gbps.push_back(static_cast<double>(bytes) / (MsSince(start) * 1e6));
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket = "/tmp/prefixd.sock";
  size_t mb = 256;
  int rounds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--socket") {
      socket = argv[i + 1];
    } else if (flag == "--mb") {
      mb = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--rounds") {
      rounds = std::max(1, std::atoi(argv[i + 1]));
    } else {
      Die("unknown flag " + flag + " (--socket PATH --mb N --rounds N)");
    }
  }
  const size_t bytes = mb << 20;
  int device = 0;
  Check(cudaGetDevice(&device), "no CUDA device");
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, device), "device properties");
  std::printf(
      "device: %s; read-only registration %s\n", prop.name,
      prefixd::ShmDeviceCopier::ReadOnlyRegistrationSupported() ? "supported" : "NOT supported");

  prefixd::ShmClient client;
  Check(client.Connect(socket), "connecting (SHM.HELLO)");
  std::string value(bytes, '\0');
  for (size_t i = 0; i < bytes; i += 8) value[i] = static_cast<char>(i >> 12);
  auto set = client.Command({"SET", "shm-cuda-bench", value});
  if (!set.ok()) Die("SET: " + set.status().ToString());
  value = std::string();
  prefixd::ShmView view;
  Check(client.Get("shm-cuda-bench", view), "SHM.GET");
  if (view.lease == 0)
    Die("the value is not in an arena (is the server started --shm-arenas yes?)");

  void* device_buffer = nullptr;
  Check(cudaMalloc(&device_buffer, bytes), "cudaMalloc");

  // Pageable: the arena as it is mapped, not registered.
  const double pageable = MedianGbps(rounds, bytes, [&] {
    Check(cudaMemcpyAsync(device_buffer, view.data, bytes, cudaMemcpyHostToDevice, nullptr),
          "pageable copy");
  });

  // Pinned buffer of our own: one CPU copy out of the arena, then DMA.
  void* pinned = nullptr;
  auto t = Clock::now();
  Check(cudaMallocHost(&pinned, bytes), "cudaMallocHost");
  const double alloc_ms = MsSince(t);
  t = Clock::now();
  std::memcpy(pinned, view.data, bytes);
  const double cpu_copy_ms = MsSince(t);
  const double from_pinned = MedianGbps(rounds, bytes, [&] {
    Check(cudaMemcpyAsync(device_buffer, pinned, bytes, cudaMemcpyHostToDevice, nullptr),
          "pinned copy");
  });

  // The arena registered once, read-only: DMA straight from the server's pages.
  prefixd::ShmDeviceCopier copier(client);
  t = Clock::now();
  const prefixd::Status registered = copier.RegisterArenas();
  const double register_ms = MsSince(t);
  double from_arena = 0;
  bool was_pinned = false;
  if (registered.ok()) {
    from_arena = MedianGbps(rounds, bytes, [&] {
      Check(copier.CopyToDevice(view, device_buffer, nullptr, &was_pinned), "arena copy");
    });
  } else {
    std::printf("registering the arenas failed: %s\n", registered.ToString().c_str());
  }

  // What arrived is the value: compare the device's bytes with the arena's.
  std::vector<uint8_t> back(bytes);
  Check(cudaMemcpy(back.data(), device_buffer, bytes, cudaMemcpyDeviceToHost), "copying back");
  const bool same = std::memcmp(back.data(), view.data, bytes) == 0;

  std::printf("value: %zu MiB in arena %u; %d rounds, median GB/s\n", mb, view.arena, rounds);
  std::printf("| way | GB/s | one-off cost |\n|---|---:|---|\n");
  std::printf("| arena, pageable (cudaMemcpyAsync from the mapping) | %.2f | none |\n", pageable);
  std::printf(
      "| own pinned buffer (cudaMallocHost + memcpy, then DMA) | %.2f | alloc %.1f ms, "
      "CPU copy %.1f ms (%.2f GB/s) per value |\n",
      from_pinned, alloc_ms, cpu_copy_ms, bytes / (cpu_copy_ms * 1e6));
  std::printf(
      "| arena registered read-only (ShmDeviceCopier) | %.2f | register %.1f ms for "
      "%.0f MiB of arenas, once%s |\n",
      from_arena, register_ms, copier.registered_bytes() / 1048576.0,
      was_pinned ? "" : " (copy was NOT from a registered arena)");
  std::printf("device bytes equal the value: %s\n", same ? "yes" : "NO");

  Check(client.Release(view), "SHM.RELEASE");
  cudaFreeHost(pinned);
  cudaFree(device_buffer);
  return same && (registered.ok() ? was_pinned : true) ? 0 : 1;
}
