#include "persist/log_writer.h"

#include <fcntl.h>
#include <limits.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/clock.h"

namespace prefixd::persist {
const char* PolicyName(FsyncPolicy p) {
  switch (p) {
    case FsyncPolicy::kAlways:
      return "always";
    case FsyncPolicy::kEverySec:
      return "everysec";
    case FsyncPolicy::kNo:
      return "no";
  }
  return "?";
}

LogWriter::LogWriter(std::string dir, FsyncPolicy policy, uint64_t segment_bytes, uint64_t next_lsn,
                     uint64_t next_sequence, std::vector<SegmentInfo> existing, Env* env)
    : env_(env),
      dir_(std::move(dir)),
      policy_(policy),
      segment_bytes_(segment_bytes),
      next_lsn_(next_lsn),
      next_sequence_(next_sequence),
      segments_(std::move(existing)) {
  written_lsn_ = next_lsn - 1;
  synced_lsn_ = next_lsn - 1;
}

LogWriter::~LogWriter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  syncer_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (syncer_.joinable()) syncer_.join();
  std::lock_guard lock(file_mu_);
  CloseSegment();
}

namespace {

// A file of the data directory as the disk tier reads it. A large value read whole is read with
// O_DIRECT into a page-aligned buffer covering it (the value is a slice of it): the disk writes
// straight into the buffer, with no copy out of the page cache and no page cache filled with
// what was just evicted from memory. Small values, and any read O_DIRECT refuses, use the Env's
// pread. A value streamed into a reply (ReadInto, or sendfile from `descriptor`) goes through the
// page cache instead, so the kernel reads ahead of the socket (its own sequential read-ahead,
// which reads large folios: docs/cache-design.md). It is not dropped
// from there after it was sent: POSIX_FADV_DONTNEED on pages still queued on a socket fails and
// then drains every CPU's LRU lists, a cost per window on a busy many-core host; the kernel
// reclaims these clean pages first when memory is short.
class EnvColdFile : public store::ColdFile {
 public:
  static constexpr uint64_t kDirectFrom = uint64_t{256} << 10;
  static constexpr uint64_t kAlign = 4096;

  EnvColdFile(std::unique_ptr<File> file, std::string path, int direct_fd, int send_fd)
      : file_(std::move(file)), path_(std::move(path)), direct_fd_(direct_fd), send_fd_(send_fd) {}
  ~EnvColdFile() override {
    if (direct_fd_ >= 0) ::close(direct_fd_);
    if (send_fd_ >= 0) ::close(send_fd_);
  }

  bool Read(uint64_t offset, uint64_t length, Bytes& out, std::string& error) const override {
    if (length >= kDirectFrom && direct_fd_ >= 0 && ReadDirect(offset, length, out)) return true;
    out = Bytes::Allocate(length);
    return ReadInto(offset, std::span<uint8_t>(out.mutable_data(), length), error);
  }

  bool ReadInto(uint64_t offset, std::span<uint8_t> out, std::string& error) const override {
    const Status status =
        out.empty() ? Status::Ok() : file_->ReadAt(offset, out.data(), out.size());
    if (status.ok()) return true;
    error = Where(offset) + status.message();
    return false;
  }

  bool Holds(uint64_t offset, uint64_t length, std::string& error) const override {
    auto size = file_->Size();
    if (!size.ok()) {
      error = Where(offset) + size.status().message();
      return false;
    }
    if (*size >= offset && *size - offset >= length) return true;
    error = Where(offset) + "the file ends at " + std::to_string(*size) + ", before the value's " +
            std::to_string(length) + " bytes";
    return false;
  }

  int descriptor() const override { return send_fd_; }

 private:
  std::string Where(uint64_t offset) const {
    return path_ + " at offset " + std::to_string(offset) + ": ";
  }

  bool ReadDirect(uint64_t offset, uint64_t length, Bytes& out) const {
    const uint64_t first = offset / kAlign * kAlign;
    const uint64_t span = (offset + length - first + kAlign - 1) / kAlign * kAlign;
    Bytes buffer = Bytes::Allocate(span);
    if (reinterpret_cast<uintptr_t>(buffer.data()) % kAlign != 0) return false;
    uint64_t done = 0;
    while (done < offset + length - first) {
      const ssize_t n = ::pread(direct_fd_, buffer.mutable_data() + done, span - done,
                                static_cast<off_t>(first + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;  // EINVAL (alignment), EIO, or the end: the plain read decides
      done += static_cast<uint64_t>(n);
      if (done % kAlign != 0) break;  // the end of the file
    }
    if (done < offset + length - first) return false;
    out = buffer.Slice(offset - first, length);
    return true;
  }

  std::unique_ptr<File> file_;  // ReadAt is pread: safe from any thread at once
  std::string path_;
  int direct_fd_;  // -1: none (another Env, or a file system without O_DIRECT)
  int send_fd_;    // a plain descriptor for sendfile; -1: none (another Env)
};

}  // namespace

Result<std::shared_ptr<store::ColdFile>> OpenColdFile(Env* env, const std::string& path) {
  auto file = env->Open(path, OpenMode::kRead);
  if (!file.ok()) return Status::IoError("can't open " + path + ": " + file.status().message());
  // O_DIRECT and sendfile bypass the Env, so only for the real file system (tests
  // inject faults through it).
  const bool posix = env == Env::Posix();
  const int direct_fd = posix ? ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
  const int send_fd = posix ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  return std::shared_ptr<store::ColdFile>(
      std::make_shared<EnvColdFile>(std::move(file).value(), path, direct_fd, send_fd));
}

Status LogWriter::Start() {
  {
    std::lock_guard lock(file_mu_);
    PREFIXD_RETURN_IF_ERROR(OpenSegment(next_lsn_));
  }
  writer_ = std::thread([this] { WriterLoop(); });
  syncer_ = std::thread([this] { SyncerLoop(); });
  return {};
}

Status LogWriter::OpenSegment(uint64_t first_lsn) {
  char name[64];
  std::snprintf(name, sizeof name, "log-%020llu.seg",
                static_cast<unsigned long long>(next_sequence_));
  std::string path = dir_ + "/" + name;
  auto file = env_->Open(path, OpenMode::kCreateTruncate);
  if (!file.ok()) return Status::IoError("can't create " + path + ": " + file.status().message());
  const FileHeader h = NewFileHeader(kLogFileMagic, next_sequence_, first_lsn);
  uint8_t header[kFileHeaderSize];
  EncodeFileHeader(h, header);
  Status status = WriteAllAt(**file, 0, header, kFileHeaderSize);
  if (status.ok() && policy_.load() != FsyncPolicy::kNo) status = (*file)->Sync();
  if (status.ok()) status = env_->SyncDir(dir_);
  if (!status.ok()) {
    file->reset();
    (void)env_->Remove(path);  // best effort: recovery removes a segment cut short anyway
    return Status::IoError("can't start segment " + path + ": " + status.message());
  }
  file_ = std::move(file).value();
  Result<std::shared_ptr<store::ColdFile>> reader = OpenColdFile(env_, path);
  reader_ = reader.ok() ? std::move(reader).value() : nullptr;
  if (!reader.ok()) {
    spdlog::warn("Values in {} cannot go to the disk tier: {}", path, reader.status().message());
  }
  seed_ = FileSeed(h);
  current_offset_ = kFileHeaderSize;
  segments_.push_back(SegmentInfo{next_sequence_, path, first_lsn, 0, kFileHeaderSize});
  ++next_sequence_;
  return {};
}

void LogWriter::CloseSegment() {
  if (file_ == nullptr) return;
  // A segment is synced before it is left behind, whatever the policy: the next fsync would
  // only cover the new one.
  if (Status synced = file_->Sync(); !synced.ok()) {
    RecordError(synced.message());
  } else if (reader_ != nullptr) {
    reader_->MarkDurable(current_offset_);
  }
  file_.reset();
  reader_.reset();
}

uint64_t LogWriter::Append(EncodedRecord&& record, uint16_t db, Placed&& placed) {
  uint64_t lsn = 0;
  bool wake = false;
  const uint64_t bytes = record.payload_length();
  {
    std::lock_guard lock(mu_);
    lsn = next_lsn_++;
    queued_bytes_ += bytes;
    const bool asleep = std::exchange(writer_asleep_, false);
    if (policy_.load() == FsyncPolicy::kAlways) {
      // Only the first record of a batch wakes the writer: it takes the whole queue at once, and
      // checks the queue under the lock before it sleeps, so no wake-up is lost.
      wake = queue_.empty();
    } else {
      // The caller that waits for this record writes it (WhenDurable); the log thread is only
      // woken from its sleep, to take what no caller waits for once kCallerGrace has passed.
      wake = asleep || queue_.size() + 1 == kWakeAtRecords;
      if (queued_bytes_ > kCallerWriteMaxBytes && !wake_now_) wake = wake_now_ = true;
    }
    // Filled in place: no temporary to move from and destroy.
    Pending& pending = queue_.emplace_back();
    pending.lsn = lsn;
    pending.record = std::move(record);
    pending.payload_length = bytes;
    pending.db = db;
    if (placed) pending.placed = std::move(placed);  // most records have none
    CountAppendedLocked(1);
  }
  // Notifying after the lock is released spares the woken writer a wait on it.
  if (wake) cv_.notify_one();
  return lsn;
}

uint64_t LogWriter::AppendGroup(std::vector<GroupMember> members) {
  ExecGroup group{members.size(), 0};
  for (const GroupMember& m : members) group.bytes += kRecordHeaderSize + m.record.payload_length();
  EncodedRecord begin = StageExecGroup(group);
  const uint64_t begin_bytes = begin.payload_length();
  uint64_t last = 0;
  bool wake = false;
  {
    // One hold of the queue's lock: no other record, and no rotation marker, lands inside.
    std::lock_guard lock(mu_);
    Pending head{next_lsn_++, std::move(begin), begin_bytes, 0, false, 0, {}};
    head.group_bytes = kRecordHeaderSize + begin_bytes + group.bytes;
    wake = queue_.empty() || writer_asleep_;
    writer_asleep_ = false;
    queue_.push_back(std::move(head));
    queued_bytes_ += begin_bytes + group.bytes - kRecordHeaderSize * members.size();
    for (GroupMember& m : members) {
      const uint64_t bytes = m.record.payload_length();
      Pending p{next_lsn_++, std::move(m.record), bytes, m.db, false, 0, std::move(m.placed)};
      p.in_group = true;
      last = p.lsn;
      queue_.push_back(std::move(p));
    }
    if (policy_.load() != FsyncPolicy::kAlways) {
      wake = wake || queue_.size() >= kWakeAtRecords;
      if (queued_bytes_ > kCallerWriteMaxBytes && !wake_now_) wake = wake_now_ = true;
    }
    CountAppendedLocked(members.size() + 1);
  }
  if (wake) cv_.notify_one();
  return last;
}

uint64_t LogWriter::RotateForSnapshot() {
  std::unique_lock lock(mu_);
  uint64_t base = next_lsn_;
  uint64_t ticket = ++rotations_requested_;
  queue_.push_back(Pending{0, {}, 0, 0, true, base, {}});
  wake_now_ = true;
  cv_.notify_one();
  // Wait until the new segment exists, so that every older segment may be removed once the
  // snapshot is durable. A log that cannot be written (disk full) must not hang SAVE: then the
  // rotation happens later and compaction keeps the current segment.
  progress_cv_.wait_for(lock, std::chrono::seconds(10), [&] {
    return rotations_done_.load() >= ticket || stop_ || !write_ok_.load();
  });
  return base;
}

uint64_t LogWriter::DurableLsn() const {
  return policy_.load() == FsyncPolicy::kAlways ? synced_lsn_.load() : written_lsn_.load();
}

bool LogWriter::DurableNow(uint64_t lsn) {
  if (DurableLsn() >= lsn) return true;
  if (policy_.load() != FsyncPolicy::kAlways) WriteOnCaller();
  return DurableLsn() >= lsn;
}

bool LogWriter::WhenDurable(uint64_t lsn, std::function<void()> done) {
  const auto durable = [this] { return DurableLsn(); };
  if (DurableNow(lsn)) return true;
  {
    std::lock_guard lock(waiters_mu_);
    if (durable() >= lsn) return true;
    waiters_.emplace(lsn, std::move(done));
  }
  // Another writer holds the records, or the log is failing, or the policy changed to always
  // meanwhile: the log thread sees to them now rather than after its pause for callers.
  WakeWriter();
  return false;
}

void LogWriter::WriteOnCaller() {
  // An fsync holds the file's lock, which a write takes when it finishes: a client's io thread
  // would wait out the whole fsync (Redis's aof_fsync_in_progress rule). The log thread takes
  // the records instead.
  if (sync_in_progress_.load()) return;
  std::unique_lock writer(writer_mu_, std::try_to_lock);
  // Someone else is writing (it takes this caller's records too, or the log thread does next),
  // or the log is failing: retries and their order are the log thread's.
  if (!writer.owns_lock() || !carry_.empty() || !write_ok_.load() || file_ == nullptr) return;
  {
    std::lock_guard lock(mu_);
    if (stop_ || queue_.empty() || queued_bytes_ > kCallerWriteMaxBytes) return;
    // A batch that starts a segment (by size, or a snapshot's rotation) is the log thread's: it
    // fsyncs the segment it closes, which no client should wait behind.
    const uint64_t end = current_offset_ + queued_bytes_ + queue_.size() * kRecordHeaderSize;
    if (end > segment_bytes_ ||
        std::any_of(queue_.begin(), queue_.end(), [](const Pending& p) { return p.lsn == 0; })) {
      return;
    }
    carry_.swap(queue_);
    queued_bytes_ = 0;
  }
  const bool ok = WriteCarried();
  writer.unlock();
  caller_writes_.fetch_add(1, std::memory_order_relaxed);
  NotifyDurable();
  NotifyProgress();
  if (!ok) WakeWriter();  // it retries what is carried
}

bool LogWriter::WriteCarried() {
  const size_t written = WriteBatch(carry_);
  carry_.erase(carry_.begin(), carry_.begin() + static_cast<long>(written));
  idle_and_written_ = carry_.empty();
  return carry_.empty();
}

void LogWriter::WakeWriter() {
  {
    std::lock_guard lock(mu_);
    wake_now_ = true;
  }
  cv_.notify_one();
}

void LogWriter::NotifyDurable() {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard lock(waiters_mu_);
    const uint64_t durable = DurableLsn();
    auto end = waiters_.upper_bound(durable);
    for (auto it = waiters_.begin(); it != end; ++it) ready.push_back(std::move(it->second));
    waiters_.erase(waiters_.begin(), end);
  }
  for (auto& done : ready) done();
}

void LogWriter::RecordError(const std::string& what) {
  bool was_ok = write_ok_.exchange(false);
  cv_.notify_all();  // the writer retries, even with nothing new to write
  std::lock_guard lock(error_mu_);
  if (was_ok || last_error_ != what) {
    spdlog::error("Log write failed, refusing writes until it recovers: {}", what);
  }
  last_error_ = what;
  last_error_time_ = CoarseNowMs() / 1000;
}

bool LogWriter::SyncCurrent() {
  std::lock_guard lock(file_mu_);
  uint64_t target = written_lsn_.load();
  const uint64_t end = segments_.empty() ? 0 : segments_.back().bytes;
  if (synced_lsn_.load() >= target || file_ == nullptr) return true;
  sync_in_progress_.store(true);
  const Status synced = file_->Sync();
  sync_in_progress_.store(false);
  if (!synced.ok()) {
    RecordError(synced.message());
    return false;
  }
  synced_lsn_ = target;
  if (reader_ != nullptr) reader_->MarkDurable(end);
  return true;
}

size_t LogWriter::WriteBatch(std::vector<Pending>& batch) {
  std::vector<iovec>& iov = iov_;
  std::vector<Whole>& wholes = wholes_;  // records in `iov`, with where each ends
  iov.clear();
  wholes.clear();
  size_t written_records = 0;
  uint64_t planned = current_offset_;

  // Writes everything in `iov`; on error cuts the file back to the last whole record.
  auto flush = [&]() -> bool {
    if (iov.empty()) return true;
    const uint64_t start = current_offset_;
    uint64_t done = 0;
    // Positional writes: after a failed write is cut back, the retry must land exactly at the
    // end of the last whole record.
    const Status status = file_ != nullptr
                              ? file_->WriteAt(start, iov, &done)
                              : Status::IoError("no open log segment (creating one failed)");
    const bool ok = status.ok();
    uint64_t good_end = start;
    uint64_t last_lsn = 0;
    size_t whole_count = 0;
    for (const Whole& w : wholes) {
      if (w.end_offset > start + done) break;
      good_end = w.end_offset, last_lsn = w.lsn, ++whole_count;
    }
    if (!ok && file_ != nullptr) {
      if (Status cut = file_->Truncate(good_end); !cut.ok()) {
        spdlog::error("Can't cut the log back after a failed write: {}", cut.message());
      }
    }
    // Reported once the file is cut back: whoever sees the log unhealthy sees only whole records
    // in it.
    if (!ok) RecordError(status.message());
    current_offset_ = good_end;
    written_records += whole_count;
    // Placed before written_lsn_ moves, so a caller that waited for durability finds it done;
    // the payloads (still held by `batch`) keep each placed buffer alive meanwhile.
    for (size_t w = 0; w < whole_count && reader_ != nullptr; ++w) {
      const Pending& p = batch[wholes[w].index];
      if (p.placed) p.placed(reader_, wholes[w].end_offset - p.payload_length);
    }
    if (whole_count > 0) {
      std::lock_guard lock(file_mu_);
      segments_.back().last_lsn = last_lsn;
      segments_.back().bytes = good_end;
      written_lsn_ = last_lsn;
    }
    iov.clear();
    wholes.clear();
    planned = current_offset_;
    return ok;
  };

  for (size_t i = 0; i < batch.size(); ++i) {
    Pending& p = batch[i];
    uint64_t record_size = kRecordHeaderSize + p.payload_length;
    // A segment that failed to open is opened again before anything is written.
    // A group's records start a segment only as a whole: before the group's record.
    const uint64_t unit_size = p.group_bytes != 0 ? p.group_bytes : record_size;
    bool roll = p.rotate_before || file_ == nullptr ||
                (p.lsn != 0 && !p.in_group && planned > kFileHeaderSize &&
                 planned + unit_size > segment_bytes_);
    if (roll) {
      if (!flush()) return written_records;
      std::lock_guard lock(file_mu_);
      CloseSegment();
      if (Status opened = OpenSegment(p.lsn != 0 ? p.lsn : p.rotate_base); !opened.ok()) {
        RecordError(opened.message());
        return written_records;
      }
      planned = current_offset_;
      if (p.lsn == 0) rotations_done_.fetch_add(1);
      p.rotate_before = false;  // done: a retry must not roll again
    }
    if (p.lsn == 0) {
      ++written_records;  // a bare rotation marker
      continue;
    }
    Seal(p);
    // A record staged right after the previous one (same thread's slab) extends its iovec.
    uint8_t* head = p.record.head.mutable_data();
    if (!iov.empty() && static_cast<uint8_t*>(iov.back().iov_base) + iov.back().iov_len == head) {
      iov.back().iov_len += p.record.head.size();
    } else {
      iov.push_back(iovec{head, p.record.head.size()});
    }
    for (const Bytes& piece : p.record.rest) {
      if (!piece.empty()) iov.push_back(iovec{const_cast<uint8_t*>(piece.data()), piece.size()});
    }
    planned += record_size;
    wholes.push_back(Whole{planned, p.lsn, i});
    if (iov.size() >= 2048 && !flush()) return written_records;
  }
  flush();
  return written_records;
}

void LogWriter::Seal(Pending& p) const {
  uint8_t* header = p.record.head.mutable_data();
  RecordHeader h;
  h.type = p.record.type;
  h.db = p.db;
  h.lsn = p.lsn;
  h.payload_length = p.payload_length;
  EncodeRecordHeader(h, header);
  if (p.record.rest.empty()) {
    PutU64(header, ContiguousRecordChecksum(seed_, header, p.payload_length));
    return;
  }
  RecordHash hash(seed_, header);
  hash.Update(p.record.head.view().substr(kRecordHeaderSize));
  for (const Bytes& piece : p.record.rest) hash.Update(piece.view());
  PutU64(header, hash.Digest());
}

void LogWriter::AwaitWork(std::unique_lock<std::mutex>& lock) {
  writer_asleep_ = true;
  cv_.wait(lock, [this] { return stop_ || wake_now_ || !queue_.empty(); });
  writer_asleep_ = false;
  if (policy_.load() != FsyncPolicy::kAlways) {
    cv_.wait_for(lock, kCallerGrace,
                 [this] { return stop_ || wake_now_ || queue_.size() >= kWakeAtRecords; });
  }
  wake_now_ = false;
}

void LogWriter::WriterLoop() {
  while (true) {
    bool retrying = false;
    {
      std::lock_guard writer(writer_mu_);
      retrying = !carry_.empty() || !write_ok_.load();
    }
    {
      std::unique_lock lock(mu_);
      // A failed write or fsync is retried even when no new record arrives: the records it
      // holds back wait for it.
      if (!retrying) AwaitWork(lock);
    }
    std::unique_lock writer(writer_mu_);
    {
      std::lock_guard lock(mu_);
      if (stop_ && queue_.empty() && carry_.empty()) break;  // everything is written
      for (auto& p : queue_) carry_.push_back(std::move(p));
      queue_.clear();
      queued_bytes_ = 0;
    }
    bool ok = WriteCarried();
    // Also syncs what a caller wrote just before the policy changed to always.
    if (ok && (policy_.load() == FsyncPolicy::kAlways || !write_ok_.load())) ok = SyncCurrent();
    if (ok) MarkHealthy();
    const size_t carried = carry_.size();
    writer.unlock();
    NotifyDurable();
    NotifyProgress();
    if (!ok) {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, retry_interval_, [&] { return stop_; })) {
        if (carried > 0) {
          spdlog::critical("Stopping with {} unacknowledged records not written to the log",
                           carried);
        }
        break;
      }
    }
  }
  SyncCurrent();
  NotifyDurable();
  NotifyProgress();
}

void LogWriter::NotifyProgress() {
  // The counters a waiter tests are atomics written without mu_. A waiter tests them holding
  // mu_ and only then sleeps; passing through mu_ here means it either saw the new values or is
  // asleep already and gets this notification. Without it the wake-up could fall between its
  // test and its sleep, and Sync() would wait for a write that has already happened.
  { std::lock_guard lock(mu_); }
  progress_cv_.notify_all();
}

void LogWriter::MarkHealthy() {
  if (!write_ok_.exchange(true)) spdlog::warn("Log writes succeed again; accepting writes");
}

void LogWriter::SyncerLoop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    syncer_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stop_) break;
    if (policy_.load() != FsyncPolicy::kEverySec) continue;
    lock.unlock();
    if (SyncCurrent() && idle_and_written_.load()) MarkHealthy();
    lock.lock();
  }
}

void LogWriter::Sync() {
  uint64_t target;
  {
    std::unique_lock lock(mu_);
    target = next_lsn_ - 1;
    wake_now_ = true;  // no pause for callers: this one waits for every record
    cv_.notify_one();
    // A log that cannot be written makes no progress: return rather than hang the caller.
    progress_cv_.wait(lock,
                      [&] { return written_lsn_.load() >= target || stop_ || !write_ok_.load(); });
  }
  SyncCurrent();
}

void LogWriter::RemoveSegmentsBefore(uint64_t lsn) {
  std::lock_guard lock(file_mu_);
  bool removed = false;
  for (size_t i = 0; i + 1 < segments_.size();) {
    const SegmentInfo& s = segments_[i];
    bool all_older = s.last_lsn < lsn;  // an empty segment (last_lsn 0) qualifies too
    if (!all_older) {
      ++i;
      continue;
    }
    if (Status removed_one = env_->Remove(s.path);
        !removed_one.ok() && removed_one.code() != StatusCode::kNotFound) {
      spdlog::warn("Can't remove old log segment {}: {}", s.path, removed_one.message());
      ++i;
      continue;
    }
    segments_.erase(segments_.begin() + static_cast<long>(i));
    removed = true;
  }
  if (removed) {
    if (Status synced = env_->SyncDir(dir_); !synced.ok()) {
      spdlog::warn("Can't sync {} after removing old segments: {}", dir_, synced.message());
    }
  }
}

LogStats LogWriter::Stats() const {
  LogStats s;
  {
    std::lock_guard lock(file_mu_);
    for (const SegmentInfo& seg : segments_) s.bytes += seg.bytes;
    s.segments = segments_.size();
  }
  {
    std::lock_guard lock(mu_);
    s.pending_records = queue_.size();
  }
  s.records_appended = records_appended_.load();
  s.caller_writes = caller_writes_.load(std::memory_order_relaxed);
  s.written_lsn = written_lsn_.load();
  s.synced_lsn = synced_lsn_.load();
  s.write_ok = write_ok_.load();
  std::lock_guard lock(error_mu_);
  s.last_error = last_error_;
  s.last_error_time = last_error_time_;
  return s;
}

}  // namespace prefixd::persist
