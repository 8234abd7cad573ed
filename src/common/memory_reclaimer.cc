#include "common/memory_reclaimer.h"

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/bytes.h"

namespace prefixd::memory {
namespace {

std::atomic<size_t> freed_since_trim{0};

[[noreturn]] void ReclaimLoop() {
  while (true) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (PooledFreeBytes() > 0) ReleaseIdlePooled(kPoolIdleMs);
    if (freed_since_trim.load(std::memory_order_relaxed) >= kTrimAfterBytes) {
      freed_since_trim.store(0, std::memory_order_relaxed);
      ::malloc_trim(0);
    }
  }
}

}  // namespace

void EnsureReclaimer() {
  static std::once_flag started;
  // Detached and never stopped: it holds no resource a clean exit must release.
  std::call_once(started, [] { std::thread(ReclaimLoop).detach(); });
}

void NoteFreed(size_t bytes) {
  if (bytes == 0) return;
  freed_since_trim.fetch_add(bytes, std::memory_order_relaxed);
  EnsureReclaimer();
}

}  // namespace prefixd::memory
