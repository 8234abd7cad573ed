// ThreadPool: a fixed set of worker threads that runs one parallel loop at a time for the CPU
// backend. Owned by one model; For() may be called from one thread at a time (the owner's).
//
// Work is handed out index by index from an atomic counter, so which thread runs an index varies
// from run to run, but every index runs exactly once and alone: kernels that give each index its
// own outputs (a head, a column slice, a query block) are deterministic whatever the schedule.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace prefixd::hybrid {

class ThreadPool {
 public:
  // `threads` counts the caller, which works too: 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, n) and returns when all have finished.
  void For(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void WorkerLoop();
  void Drain();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t)>* fn_ = nullptr;  // guarded by mu_
  int64_t n_ = 0;                                     // guarded by mu_
  uint64_t generation_ = 0;                           // guarded by mu_
  int busy_ = 0;                                      // workers inside the current loop
  bool stop_ = false;
  std::atomic<int64_t> next_{0};
};

}  // namespace prefixd::hybrid
