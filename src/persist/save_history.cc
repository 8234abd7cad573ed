#include "persist/save_history.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/clock.h"
#include "persist/recovery.h"

namespace prefixd::persist {

void SaveHistory::Started() { last_save_time_ = NowMs() / 1000; }

void SaveHistory::Loaded(const Recovery& recovery) {
  snapshot_bytes_ = recovery.snapshot_bytes();
  recovered_records_ = recovery.records();
  recovered_bytes_ = recovery.bytes();
  recovery_seconds_ = recovery.seconds();
}

void SaveHistory::Saved(uint64_t bytes, uint64_t changes_in_it) {
  snapshot_bytes_ = bytes;
  // Writes counted after the cut are not in the snapshot: they stay counted.
  changes_ -= std::min(changes_in_it, changes_.load());
  last_save_time_ = CoarseNowMs() / 1000;
  saves_ += 1;
}

void SaveHistory::Finished(const Status& saved) {
  std::lock_guard lock(error_mu_);
  last_error_ = saved.message();
}

Status SaveHistory::StartBackground(std::function<Status()> save) {
  if (background_running_.exchange(true)) return Status::Aborted(kSaveInProgress);
  if (background_.joinable()) background_.join();
  background_ = std::thread([this, save = std::move(save)] {
    const auto start = std::chrono::steady_clock::now();
    const Status saved = save();
    last_background_ok_ = saved.ok();
    last_background_seconds_ = static_cast<int64_t>(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!saved.ok()) spdlog::error("Background save failed: {}", saved.message());
    background_running_ = false;
  });
  return {};
}

void SaveHistory::JoinBackground() {
  if (background_.joinable()) background_.join();
}

void SaveHistory::Report(PersistStats& stats) const {
  stats.bgsave_in_progress = background_running_.load();
  stats.last_save_time = last_save_time_.load();
  stats.last_bgsave_ok = last_background_ok_.load();
  stats.last_bgsave_seconds = last_background_seconds_.load();
  stats.changes_since_last_save = changes_.load();
  stats.snapshot_bytes = snapshot_bytes_.load();
  stats.rewrites = saves_.load();
  stats.recovered_records = recovered_records_;
  stats.recovered_bytes = recovered_bytes_;
  stats.recovery_seconds = recovery_seconds_;
  std::lock_guard lock(error_mu_);
  stats.last_save_error = last_error_;
}

}  // namespace prefixd::persist
