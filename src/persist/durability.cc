#include "persist/durability.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>

#include "common/clock.h"
#include "persist/cold_directory.h"
#include "persist/key_records.h"
#include "persist/mutation.h"
#include "persist/record_reader.h"

namespace prefixd::persist {
namespace {

constexpr const char* kSnapshotName = "snapshot.pds";

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Writes one sealed record (header plus payload pieces) at `offset` with a gather write and
// advances `offset` past it.
Status WriteRecord(File& file, uint64_t& offset, uint64_t seed, RecordType type,
                   const std::vector<Bytes>& payload, uint16_t db = 0, uint8_t flags = 0) {
  uint8_t header[kRecordHeaderSize];
  SealRecord(seed, type, 0, payload, header, db, flags);
  std::vector<iovec> iov;
  iov.reserve(payload.size() + 1);
  iov.push_back(iovec{header, kRecordHeaderSize});
  for (const Bytes& piece : payload) {
    if (!piece.empty()) iov.push_back(iovec{const_cast<uint8_t*>(piece.data()), piece.size()});
  }
  uint64_t written = 0;
  Status status = file.WriteAt(offset, iov, &written);
  offset += written;
  return status;
}

// Reports recovery progress every few seconds for large stores.
class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)) {}
  void Add(uint64_t bytes) {
    ++records_, bytes_ += bytes;
    if (SecondsSince(last_) >= 2.0) {
      last_ = std::chrono::steady_clock::now();
      spdlog::info("{}: {} records, {:.1f} MB, {:.1f} s", what_, records_, bytes_ / 1e6,
                   SecondsSince(start_));
    }
  }
  uint64_t records() const { return records_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::string what_;
  uint64_t records_ = 0, bytes_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;
};

}  // namespace

FsyncPolicy ParsePolicy(std::string_view name) {
  if (name == "always") return FsyncPolicy::kAlways;
  if (name == "no") return FsyncPolicy::kNo;
  return FsyncPolicy::kEverySec;
}

Durability::Durability(DurabilityOptions options, store::StateStore& store,
                       store::VectorStore* vectors)
    : options_(std::move(options)),
      env_(options_.env != nullptr ? options_.env : Env::Posix()),
      store_(store),
      vectors_(vectors) {}

Durability::~Durability() {
  {
    std::lock_guard lock(maintenance_mu_);
    stopping_ = true;
  }
  maintenance_cv_.notify_all();
  if (maintenance_thread_.joinable()) maintenance_thread_.join();
  if (bgsave_thread_.joinable()) bgsave_thread_.join();
  log_.reset();  // writes and syncs what is queued
}

std::string Durability::Open() {
  if (Status made = env_->CreateDirs(options_.dir); !made.ok()) return made.message();
  auto lock = env_->Lock(options_.dir + "/LOCK");
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kUnavailable) {
      return "data directory " + options_.dir + " is in use by another prefixd process";
    }
    return "can't lock " + options_.dir + ": " + lock.status().message();
  }
  lock_ = std::move(lock).value();
  // As Redis: the last save is the start until a snapshot is written here, whatever was loaded.
  last_save_time_ = NowMs() / 1000;
  std::string err = Recover();
  if (!err.empty()) return err;
  maintenance_thread_ = std::thread([this] { MaintenanceLoop(); });
  return {};
}

std::string Durability::Recover() {
  auto start = std::chrono::steady_clock::now();
  auto names = env_->List(options_.dir);
  if (!names.ok()) return "can't list " + options_.dir + ": " + names.status().message();
  // A snapshot that was being written when the process stopped is incomplete: drop it.
  for (const std::string& name : *names) {
    if (name.starts_with("temp-") && name.ends_with(".pds")) {
      if (Status removed = env_->Remove(options_.dir + "/" + name); !removed.ok()) {
        return "can't remove the incomplete snapshot " + name + ": " + removed.message();
      }
    }
  }
  uint64_t base_lsn = 1;
  std::string snapshot = options_.dir + "/" + kSnapshotName;
  auto info = env_->Stat(snapshot);
  if (info.ok()) {
    std::string err = LoadSnapshot(snapshot, base_lsn);
    if (!err.empty()) return err;
    snapshot_bytes_ = info->size;
  } else if (info.status().code() != StatusCode::kNotFound) {
    return "can't read " + snapshot + ": " + info.status().message();
  }
  uint64_t next_lsn = base_lsn, next_sequence = 1;
  std::vector<SegmentInfo> segments;
  std::string err = ReplaySegments(base_lsn, next_lsn, next_sequence, segments);
  if (!err.empty()) return err;
  recovery_seconds_ = SecondsSince(start);
  store::StoreStats s = store_.Stats();
  spdlog::info(
      "Recovered {} records ({:.1f} MB) in {:.3f} s: {} sessions, {} entries, {:.1f} MB "
      "of state",
      recovered_records_, recovered_bytes_ / 1e6, recovery_seconds_, s.sessions, s.entries,
      s.payload_bytes / 1e6);
  log_ = std::make_unique<LogWriter>(options_.dir, options_.policy, options_.segment_bytes,
                                     next_lsn, next_sequence, std::move(segments), env_);
  log_->set_retry_interval(options_.log_retry_interval);
  err = log_->Start();
  if (!err.empty()) return err;
  log_base_bytes_ = log_->Stats().bytes;
  return {};
}

std::string Durability::Replay(const Record& record, Mutation& m,
                               const std::shared_ptr<store::ColdFile>& file) {
  std::string err = DecodePayload(record.header.type, record.payload, m);
  if (!err.empty()) return "its payload does not decode: " + err;
  // Checked again as the live path checked it: a record that would exhaust memory or break an
  // invariant of the stores is reported, never applied.
  Limits limits = Limits::Hard();
  if (options_.memory_budget != 0) limits.memory_budget = options_.memory_budget;
  const Verdict verdict = Check(m, limits);
  if (!verdict.ok) return verdict.why + "; it holds " + Describe(m);
  Outcome outcome;
  try {
    err = ApplyToDatabase(m, record.header.db, &outcome);
  } catch (const std::exception& e) {
    return std::string("applying it failed (") + e.what() + "); it holds " + Describe(m);
  }
  if (!err.empty()) return err;
  bool placed = false;
  // Applied V-store rows sit in the file too (the disk tier places them, as the log does live).
  if (const auto* rows = std::get_if<VStore>(&m);
      rows != nullptr && outcome.kind == Outcome::Kind::kApplied && !rows->data.pieces.empty()) {
    if (store::VectorStore* vectors = VectorsOf(record.header.db); vectors != nullptr) {
      const uint64_t at =
          record.offset + kRecordHeaderSize +
          static_cast<uint64_t>(rows->data.pieces[0].data() - record.payload.data());
      vectors->Place(rows->sid, store::VectorStore::kAnyIndex, rows->layer, rows->start, rows->rows,
                     file, at);
      placed = file != nullptr;
    }
  }
  // The values are slices of the payload: where they sit in the file follows, in the record's
  // database.
  if (const auto* put = std::get_if<SsmPut>(&m); put != nullptr && file != nullptr) {
    store::StateStore& state = StateOf(record.header.db);
    const uint64_t payload_at = record.offset + kRecordHeaderSize;
    for (const auto& [layer, value] : put->layers) {
      const uint64_t at = payload_at + static_cast<uint64_t>(value.data() - record.payload.data());
      state.Place(put->sid, layer, value.data(), file, at);
    }
    placed = true;
  }
  // So are a string set's large values (the disk tier keeps strings from the entry's inline
  // size on). Replay is alone: the key holds the record's value (or a compact copy of it).
  if (store::Keyspace* keys = KeysOf(record.header.db); keys != nullptr && file != nullptr) {
    for (const StringValueAt& w : StringValueOffsets(m, store::KeyEntry::kInlineValueBelow)) {
      keys->PlaceString(w.key, nullptr, file, record.offset + kRecordHeaderSize + w.offset);
      placed = true;
    }
  }
  if (placed && options_.placed_while_recovering) {
    options_.placed_while_recovering(m, record.header.db);
  }
  return {};
}

std::string Durability::CheckDatabase(uint16_t db) const {
  if (databases_ == nullptr) {
    if (db != 0) return "it names database " + std::to_string(db) + " of a single database";
  } else if (db >= databases_->count()) {
    return "it names database " + std::to_string(db) + ", past the " +
           std::to_string(databases_->count()) + " the `databases` setting allows";
  }
  return {};
}

store::StateStore& Durability::StateOf(uint16_t db) {
  return databases_ == nullptr ? store_ : databases_->At(db).state;
}

store::Keyspace* Durability::KeysOf(uint16_t db) {
  return databases_ == nullptr ? keys_ : &databases_->At(db).keys;
}

store::VectorStore* Durability::VectorsOf(uint16_t db) {
  return databases_ == nullptr ? vectors_ : &databases_->At(db).vectors;
}

std::string Durability::ApplyToDatabase(const Mutation& m, uint16_t db, Outcome* outcome) {
  if (std::string err = CheckDatabase(db); !err.empty()) return err;
  Outcome ignored;
  if (outcome == nullptr) outcome = &ignored;
  if (databases_ == nullptr) {
    if (const auto* swap = std::get_if<SwapDb>(&m); swap != nullptr && (swap->a | swap->b) != 0) {
      return "it swaps databases " + std::to_string(swap->a) + " and " + std::to_string(swap->b) +
             " of a single database";
    }
    *outcome = Apply(m, Stores{store_, vectors_, 0, keys_, prefixes_}, {});
    return {};
  }
  if (const auto* swap = std::get_if<SwapDb>(&m)) {
    if (std::max(swap->a, swap->b) >= databases_->count()) {
      return "it swaps database " + std::to_string(std::max(swap->a, swap->b)) + ", past the " +
             std::to_string(databases_->count()) + " the `databases` setting allows";
    }
    databases_->Swap(swap->a, swap->b);
    return {};
  }
  const auto stores_of = [](store::Database& d) {
    return Stores{d.state, &d.vectors, 0, &d.keys, &d.prefixes};
  };
  *outcome = Apply(m, stores_of(databases_->At(db)), {});
  if (std::holds_alternative<FlushAll>(m)) {  // one record empties every database
    databases_->ForEach([&](size_t index, store::Database& other) {
      if (index != db) Apply(m, stores_of(other), {});
    });
  }
  return {};
}

namespace {

// A cold record's fields, read in order straight from its file without its values (a restart
// places cold entries and never reads their bytes).
class ColdFields {
 public:
  ColdFields(RecordReader& reader, const Record& record)
      : reader_(reader),
        at_(record.offset + kRecordHeaderSize),
        end_(record.offset + kRecordHeaderSize + record.header.payload_length) {}

  // The next `n` bytes, in field(); an error text when they run past the payload or can't be read.
  std::string Take(uint64_t n) {
    if (n > end_ - at_) return "its fields run past its payload";
    std::string err = reader_.ReadAt(at_, n, field_);
    at_ += n;
    return err;
  }
  // A name (a sid or key: u32 length, the bytes, at most max_sid_len) into `name`, and the
  // `fixed` bytes after it, which fixed() then points at.
  std::string TakeName(std::string& name, uint64_t fixed) {
    if (std::string err = Take(4); !err.empty()) return err;
    const uint32_t length = GetU32(field_.data());
    if (length > Limits::Hard().max_sid_len) return "its name is too long";
    if (std::string err = Take(length + fixed); !err.empty()) return err;
    name.assign(field_.view().substr(0, length));
    fixed_ = field_.data() + length;
    return {};
  }
  const uint8_t* field() const { return field_.data(); }
  const uint8_t* fixed() const { return fixed_; }
  // Where the next field starts in the file, and the payload bytes left from there.
  uint64_t at() const { return at_; }
  uint64_t left() const { return end_ - at_; }
  void Skip(uint64_t n) { at_ += n; }

 private:
  RecordReader& reader_;
  uint64_t at_;
  const uint64_t end_;
  Bytes field_;
  const uint8_t* fixed_ = nullptr;
};

}  // namespace

std::string Durability::LoadColdPut(RecordReader& reader, const Record& record,
                                    const std::shared_ptr<store::ColdFile>& file) {
  if (record.header.type != RecordType::kSsmPut) return "a cold record that is not an SSM put";
  if (std::string err = CheckDatabase(record.header.db); !err.empty()) return err;
  // The layout of SsmPut (mutation.h): u32 sid length, sid, u32 count, then per layer u32
  // layer, u64 length, the value; read without the values.
  ColdFields fields(reader, record);
  std::string sid;
  std::string err = fields.TakeName(sid, 4);
  if (!err.empty()) return err;
  const uint32_t count = GetU32(fields.fixed());
  store::StateStore& state = StateOf(record.header.db);
  for (uint32_t i = 0; i < count; ++i) {
    if (err = fields.Take(12); !err.empty()) return err;
    const uint32_t layer = GetU32(fields.field());
    const uint64_t length = GetU64(fields.field() + 4);
    if (length > fields.left()) return "a value runs past its payload";
    state.PutCold(sid, layer, length, file, fields.at());
    fields.Skip(length);
  }
  if (fields.left() != 0) return std::to_string(fields.left()) + " unexpected trailing bytes";
  if (count > 0) KeepColdKey(record.header.db, sid, store::KeyType::kSsmPrefix);
  return {};
}

std::string Durability::LoadColdString(RecordReader& reader, const Record& record,
                                       const std::shared_ptr<store::ColdFile>& file) {
  if (std::string err = CheckDatabase(record.header.db); !err.empty()) return err;
  store::Keyspace* keys = KeysOf(record.header.db);
  if (keys == nullptr) return "a string without a keyspace";
  // The layout of StringSet (mutation.h): u32 key length, the key, u32 flags, u64 at_ms, u64
  // value length, the value; read without the value.
  ColdFields fields(reader, record);
  std::string key;
  if (std::string err = fields.TakeName(key, 20); !err.empty()) return err;
  const uint8_t* f = fields.fixed();
  const uint32_t flags = GetU32(f);
  const uint64_t at_ms = GetU64(f + 4), length = GetU64(f + 12);
  const uint32_t encoding = (flags >> StringSet::kEncodingShift) & 3;
  if ((flags & StringSet::kKeepTtl) != 0 || encoding > 2) {
    return "its flags " + std::to_string(flags) + " are not a snapshot's";
  }
  if (length != fields.left()) return "its value does not fill its payload";
  if (length < store::KeyEntry::kInlineValueBelow) return "a cold value below the inline size";
  if (at_ms > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return "its expiry is out of range";
  }
  keys->PutColdString(key, static_cast<store::StringEncoding>(encoding),
                      static_cast<int64_t>(at_ms), store::StringPlace{file, fields.at(), length});
  return {};
}

void Durability::KeepColdKey(uint16_t db, const std::string& sid, store::KeyType type) {
  if (store::Keyspace* keys = KeysOf(db); keys != nullptr) {
    keys->Set(sid, type);
    keys->MoveTier(sid, /*cold=*/true, [] { return true; });
  }
}

std::string Durability::LoadColdRows(RecordReader& reader, const Record& record,
                                     const std::shared_ptr<store::ColdFile>& file) {
  if (std::string err = CheckDatabase(record.header.db); !err.empty()) return err;
  store::VectorStore* vectors = VectorsOf(record.header.db);
  if (vectors == nullptr) return "V-store rows without a V-store";
  // The layout of VStore (mutation.h): u32 sid length, sid, u32 layer, u64 start, u64 rows,
  // u32 dim, u32 tier, u64 data length, the rows; read without the rows.
  ColdFields fields(reader, record);
  std::string sid;
  if (std::string err = fields.TakeName(sid, 36); !err.empty()) return err;
  const uint8_t* f = fields.fixed();
  const uint32_t layer = GetU32(f);
  const uint64_t start = GetU64(f + 4), rows = GetU64(f + 12);
  const uint32_t dim = GetU32(f + 20), tier_code = GetU32(f + 24);
  const uint64_t length = GetU64(f + 28);
  const auto tier = store::TierFromCode(tier_code);
  if (!tier) return "its tier " + std::to_string(tier_code) + " is unknown";
  if (length != fields.left()) return "its rows do not fill its payload";
  if (rows == 0 || rows > (~uint64_t{0} - start) || length / rows != store::RowBytes(*tier, dim) ||
      length % rows != 0) {
    return "its " + std::to_string(rows) + " rows do not match its " + std::to_string(length) +
           " bytes";
  }
  if (!vectors->PutColdRows(sid, layer, start, rows, dim, *tier, file, fields.at())) {
    return "its session " + sid + " does not exist with that shape, or holds the layer in memory";
  }
  if (cold_vector_sessions_.empty() || cold_vector_sessions_.back().second != sid ||
      cold_vector_sessions_.back().first != record.header.db) {
    cold_vector_sessions_.emplace_back(record.header.db, sid);
  }
  return {};
}

std::string Durability::LoadVectorColdDirectory(RecordReader& reader, const Record& record,
                                                const std::shared_ptr<store::ColdFile>& file,
                                                uint64_t& records) {
  if (std::string err = CheckDatabase(record.header.db); !err.empty()) return err;
  VectorColdDirectory directory;
  const uint64_t region_start = record.offset + kRecordHeaderSize + record.header.payload_length;
  std::string err =
      DecodeVectorColdDirectory(record.payload, region_start, reader.file_size(),
                                Limits::Hard().max_sid_len, Limits::Hard().max_dim, directory);
  if (!err.empty()) return "its V-store cold directory is damaged: " + err;
  // Without a file to serve them from, the records that follow are read and loaded whole.
  if (file == nullptr) return {};
  store::VectorStore* vectors = VectorsOf(record.header.db);
  if (vectors == nullptr) return "a V-store cold directory without a V-store";
  for (const VectorColdEntry& e : directory.entries) {
    const store::Tier tier = *store::TierFromCode(e.tier);  // checked by the decoder
    if (vectors->Create(e.sid, e.dim, tier, e.index, 0, nullptr) !=
        store::VectorStore::CreateResult::kCreated) {
      return "its V-store cold directory lists " + e.sid + ", which already exists";
    }
    const std::vector<uint64_t> offsets = VectorColdRowsOffsets(e);
    for (size_t i = 0; i < e.records.size(); ++i) {
      const VectorColdRows& r = e.records[i];
      if (!vectors->PutColdRows(e.sid, r.layer, r.start, r.rows, e.dim, tier, file, offsets[i])) {
        return "its V-store cold directory places rows of " + e.sid + " that do not fit it";
      }
    }
    cold_vector_sessions_.emplace_back(record.header.db, e.sid);
    records += 1 + e.records.size();
  }
  reader.Seek(directory.region_end);
  return {};
}

void Durability::KeepColdVectorKeys() {
  // After the whole snapshot: a registration record (after the sessions) brings its sessions'
  // keys back to the hot index, and a registration is cold when both halves are.
  for (const auto& [db, sid] : cold_vector_sessions_) {
    KeepColdKey(db, sid, store::KeyType::kVstore);
    if (!sid.ends_with("_pk")) continue;
    const std::string ns = sid.substr(0, sid.size() - 3);
    store::VectorStore* vectors = VectorsOf(db);
    store::Keyspace* keys = KeysOf(db);
    if (keys == nullptr || !vectors->Prefix(ns) ||
        vectors->ColdBytes(store::VectorStore::ValueSid(ns)) == 0) {
      continue;
    }
    store::StateStore& state = StateOf(db);
    if (state.Contains(ns) && state.ColdBytes(ns) == 0) continue;
    keys->MoveTier(ns, /*cold=*/true, [] { return true; });
  }
  cold_vector_sessions_.clear();
}

std::string Durability::LoadColdDirectory(RecordReader& reader, const Record& record,
                                          const std::shared_ptr<store::ColdFile>& file,
                                          uint64_t& entries) {
  if (std::string err = CheckDatabase(record.header.db); !err.empty()) return err;
  ColdDirectory directory;
  const uint64_t region_start = record.offset + kRecordHeaderSize + record.header.payload_length;
  std::string err = DecodeColdDirectory(record.payload, region_start, reader.file_size(),
                                        Limits::Hard().max_sid_len, directory);
  if (!err.empty()) return "its cold directory is damaged: " + err;
  // Without a file to serve them from, the cold records that follow are read and loaded whole.
  if (file == nullptr) return {};
  store::StateStore& state = StateOf(record.header.db);
  for (const ColdEntry& e : directory.entries) {
    const std::vector<uint64_t> offsets = ColdValueOffsets(e);
    for (size_t i = 0; i < e.layers.size(); ++i) {
      state.PutCold(e.sid, e.layers[i].first, e.layers[i].second, file, offsets[i]);
    }
    if (!e.layers.empty()) KeepColdKey(record.header.db, e.sid, store::KeyType::kSsmPrefix);
  }
  entries = directory.entries.size();
  reader.Seek(directory.region_end);
  return {};
}

std::string Durability::LoadSnapshot(const std::string& path, uint64_t& base_lsn) {
  RecordReader reader;
  std::string err = reader.Open(path, kSnapshotFileMagic, env_);
  if (!err.empty()) return "snapshot: " + err;
  base_lsn = reader.file_header().base_lsn;
  std::string cold_error;
  std::shared_ptr<store::ColdFile> cold = OpenColdFile(env_, path, &cold_error);
  if (cold != nullptr) cold->MarkDurable(store::ColdFile::kAllDurable);
  reader.set_skip_cold(cold != nullptr);
  Progress progress("Loading snapshot " + path);
  Record record;
  Mutation m;
  bool ended = false;
  while (true) {
    ReadStatus status = reader.Next(record);
    if (status == ReadStatus::kEnd) break;
    if (status == ReadStatus::kBad || ended) {
      // Snapshots are renamed into place only once complete and synced: damage is corruption.
      return "snapshot " + path + " is corrupt at offset " +
             std::to_string(status == ReadStatus::kBad ? reader.bad_offset() : record.offset) +
             ": " + (status == ReadStatus::kBad ? reader.problem() : "records after its end");
    }
    if (record.header.type == RecordType::kSnapshotEnd) {
      err = DecodePayload(record.header.type, record.payload, m);
      if (err.empty() && std::get<SnapshotEnd>(m).count != progress.records()) {
        err = "it ends the snapshot after " + std::to_string(progress.records()) +
              " records but says it holds " + std::to_string(std::get<SnapshotEnd>(m).count);
      }
      ended = true;
    } else if (record.header.type == RecordType::kColdDirectory) {
      // An index, not an entry: the records it lists count, it does not.
      uint64_t entries = 0;
      err = LoadColdDirectory(reader, record, cold, entries);
      for (uint64_t i = 0; i < entries; ++i) progress.Add(0);
    } else if (record.header.type == RecordType::kVectorColdDirectory) {
      uint64_t records = 0;
      err = LoadVectorColdDirectory(reader, record, cold, records);
      for (uint64_t i = 0; i < records; ++i) progress.Add(0);
    } else if (record.payload_skipped) {
      err = record.header.type == RecordType::kVStore      ? LoadColdRows(reader, record, cold)
            : record.header.type == RecordType::kStringSet ? LoadColdString(reader, record, cold)
                                                           : LoadColdPut(reader, record, cold);
      progress.Add(0);
    } else {
      err = Replay(record, m, cold);
      progress.Add(record.payload.size());
    }
    if (!err.empty()) {
      return "snapshot " + path + " has a bad record at offset " + std::to_string(record.offset) +
             ": " + err;
    }
  }
  if (!ended) return "snapshot " + path + " has no end record: it is incomplete";
  KeepColdVectorKeys();
  recovered_records_ += progress.records();
  recovered_bytes_ += progress.bytes();
  return {};
}

std::string Durability::ReplaySegments(uint64_t base_lsn, uint64_t& next_lsn,
                                       uint64_t& next_sequence,
                                       std::vector<SegmentInfo>& segments) {
  std::vector<std::pair<uint64_t, std::string>> files;
  auto names = env_->List(options_.dir);
  if (!names.ok()) return "can't list " + options_.dir + ": " + names.status().message();
  for (const std::string& name : *names) {
    if (!name.starts_with("log-") || !name.ends_with(".seg")) continue;
    uint64_t sequence = std::strtoull(name.c_str() + 4, nullptr, 10);
    files.emplace_back(sequence, options_.dir + "/" + name);
  }
  std::sort(files.begin(), files.end());
  Progress progress("Replaying log");
  uint64_t last_lsn = base_lsn - 1;
  for (size_t i = 0; i < files.size(); ++i) {
    const uint64_t sequence = files[i].first;
    // A plain reference, not a structured binding: the lambdas below capture it (clang before 16
    // refuses to capture a binding).
    const std::string& path = files[i].second;
    bool is_last = i + 1 == files.size();
    next_sequence = sequence + 1;
    RecordReader reader;
    std::string err = reader.Open(path, kLogFileMagic, env_);
    if (!err.empty()) {
      // A crash right after creating the newest segment can leave it without a whole header.
      if (is_last && reader.file_size() < kFileHeaderSize) {
        spdlog::warn("Removing log segment {} cut short at creation ({} bytes)", path,
                     reader.file_size());
        if (Status removed = env_->Remove(path); !removed.ok()) {
          return "can't remove " + path + ": " + removed.message();
        }
        continue;
      }
      return "log: " + err;
    }
    SegmentInfo info{sequence, path, reader.file_header().base_lsn, 0, reader.file_size()};
    std::string cold_error;
    std::shared_ptr<store::ColdFile> cold = OpenColdFile(env_, path, &cold_error);
    // What survived a restart is on disk (a torn tail is cut before anything points past it).
    if (cold != nullptr) cold->MarkDurable(store::ColdFile::kAllDurable);
    Record record;
    Mutation m;
    // Checks a whole record's lsn and applies it; an error text ends recovery.
    const auto replay_one = [&](const Record& r) -> std::string {
      const uint64_t lsn = r.header.lsn;
      if (lsn <= last_lsn && lsn >= base_lsn) {
        return "log segment " + path + " has lsn " + std::to_string(lsn) + " at offset " +
               std::to_string(r.offset) + " after lsn " + std::to_string(last_lsn);
      }
      info.last_lsn = std::max(info.last_lsn, lsn);
      if (lsn < base_lsn) return {};  // already in the snapshot
      last_lsn = lsn;
      if (r.header.type == RecordType::kExecGroup) return {};  // its records follow it
      if (std::string why = Replay(r, m, cold); !why.empty()) {
        // Its checksum matched, so it was written whole: corruption (or a bug), never a torn
        // tail. Stop, or skip just this record when told to.
        std::string where = "log segment " + path + " has a bad record at offset " +
                            std::to_string(r.offset) + " (lsn " + std::to_string(lsn) + "): " + why;
        if (!options_.skip_corrupt) {
          return where + ". Start with --log-skip-corrupt yes to skip it, losing what it held";
        }
        spdlog::error("Skipping a record: {}", where);
        return {};
      }
      progress.Add(r.payload.size());
      return {};
    };
    const auto cut_torn_tail = [&](uint64_t offset, const std::string& problem) -> std::string {
      spdlog::warn(
          "Log segment {} has a torn tail at offset {} ({}): cutting {} bytes that "
          "were never acknowledged",
          path, offset, problem, reader.file_size() - offset);
      if (Status cut = CutFile(path, offset); !cut.ok()) {
        return "can't cut the torn tail of " + path + ": " + cut.message();
      }
      info.bytes = offset;
      return {};
    };
    while (true) {
      ReadStatus status = reader.Next(record);
      if (status == ReadStatus::kEnd) break;
      if (status == ReadStatus::kBad) {
        uint64_t offset = reader.bad_offset();
        uint64_t next_valid = reader.NextValidRecord(offset);
        if (is_last && next_valid == 0) {
          if (err = cut_torn_tail(offset, reader.problem()); !err.empty()) return err;
          break;
        }
        if (!options_.skip_corrupt) {
          return "log segment " + path + " is corrupt at offset " + std::to_string(offset) + " (" +
                 reader.problem() +
                 "); records after it exist, so this is not a torn tail. Start with "
                 "--log-skip-corrupt yes to skip the damaged bytes, losing what they held";
        }
        uint64_t resume = next_valid != 0 ? next_valid : reader.file_size();
        spdlog::error("Skipping {} corrupt bytes [{}, {}) of {} ({}): the records there are lost",
                      resume - offset, offset, resume, path, reader.problem());
        if (next_valid == 0) break;
        reader.Seek(next_valid);
        continue;
      }
      if (record.header.type != RecordType::kExecGroup) {
        if (err = replay_one(record); !err.empty()) return err;
        continue;
      }
      // An EXEC's records: applied only once every one of them is read whole. A log that ends
      // inside the group (a crash while it was written) loses the whole group, as Redis drops
      // a MULTI block cut off at the end of its AOF.
      ExecGroupRead group = ReadExecGroup(reader, record, is_last);
      if (group.outcome == ExecGroupRead::kTorn) {
        if (err = cut_torn_tail(record.offset, group.problem); !err.empty()) return err;
        break;
      }
      if (group.outcome == ExecGroupRead::kCorrupt) {
        std::string where = "log segment " + path + " has a damaged transaction group at offset " +
                            std::to_string(record.offset) + " (" + group.problem + ")";
        if (!options_.skip_corrupt) {
          return where + ". Start with --log-skip-corrupt yes to skip it, losing what it held";
        }
        spdlog::error("Skipping a transaction's records: {}", where);
        if (group.resume == 0) break;
        reader.Seek(group.resume);
        continue;
      }
      if (err = replay_one(record); !err.empty()) return err;
      for (const Record& r : group.records) {
        if (err = replay_one(r); !err.empty()) return err;
      }
    }
    segments.push_back(info);
  }
  next_lsn = std::max(base_lsn, last_lsn + 1);
  for (const SegmentInfo& s : segments) next_lsn = std::max(next_lsn, s.last_lsn + 1);
  recovered_records_ += progress.records();
  recovered_bytes_ += progress.bytes();
  return {};
}

Status Durability::CutFile(const std::string& path, uint64_t size) {
  auto file = env_->Open(path, OpenMode::kReadWrite);
  if (!file.ok()) return file.status();
  PREFIXD_RETURN_IF_ERROR((*file)->Truncate(size));
  return (*file)->Sync();
}

thread_local Durability::Group* Durability::collecting_ = nullptr;

uint64_t Durability::Append(EncodedRecord&& record, uint16_t db, Placed&& placed,
                            uint64_t changes) {
  changes_since_save_.fetch_add(changes, std::memory_order_relaxed);
  if (Group* group = CollectingHere(); group != nullptr) {
    group->members_.push_back(LogWriter::GroupMember{std::move(record), db, std::move(placed)});
    return 0;
  }
  return log_->Append(std::move(record), db, std::move(placed));
}

Durability::Group::Group(Durability* durability) : durability_(durability) {
  if (durability_ == nullptr || durability_->log_ == nullptr || collecting_ != nullptr) {
    durability_ = nullptr;
    return;
  }
  collecting_ = this;
  std::lock_guard lock(durability_->groups_mu_);
  ticket_ = durability_->groups_.next++;
  durability_->groups_.open.push_back(ticket_);
}

uint64_t Durability::Group::End() {
  if (durability_ == nullptr) return 0;
  collecting_ = nullptr;
  Durability& d = *std::exchange(durability_, nullptr);
  uint64_t lsn = 0;
  if (members_.size() == 1) {  // one record is whole by itself
    LogWriter::GroupMember& only = members_.front();
    lsn = d.log_->Append(std::move(only.record), only.db, std::move(only.placed));
  } else if (!members_.empty()) {
    lsn = d.log_->AppendGroup(std::move(members_));
  }
  if (sync_at_end_) d.log_->Sync();
  {
    std::lock_guard lock(d.groups_mu_);
    std::erase(d.groups_.open, ticket_);
  }
  d.groups_cv_.notify_all();
  return lsn;
}

Durability::GroupTickets Durability::GroupsNow() {
  std::lock_guard lock(groups_mu_);
  return groups_;
}

bool Durability::WaitForGroups(const GroupTickets& started, uint64_t before) {
  const uint64_t own = CollectingHere() != nullptr ? CollectingHere()->ticket_ : 0;
  const auto others_open = [&] {
    return std::any_of(groups_.open.begin(), groups_.open.end(),
                       [&](uint64_t t) { return t < before && t != own; });
  };
  std::unique_lock lock(groups_mu_);
  // An EXEC runs its queue in milliseconds; one that takes longer (huge values) leaves this
  // snapshot the gap docs/architecture.md names rather than holding it up without end.
  if (!groups_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return !others_open(); })) {
    spdlog::warn("A snapshot did not wait longer for a transaction still running");
  }
  return started.open.empty() && started.next == before;
}

std::string Durability::WriteSnapshot() {
  auto start = std::chrono::steady_clock::now();
  // Records from here on go to new segments; the snapshot holds at least everything before.
  uint64_t base_lsn = log_->RotateForSnapshot();
  const GroupTickets groups_at_start = GroupsNow();
  uint64_t changes_at_start = changes_since_save_.load();
  std::string temp = options_.dir + "/temp-" + std::to_string(getpid()) + ".pds";
  std::string final_path = options_.dir + "/" + kSnapshotName;
  auto file = env_->Open(temp, OpenMode::kCreateTruncate);
  if (!file.ok()) return "snapshot failed: can't create " + temp + ": " + file.status().message();
  const FileHeader h = NewFileHeader(kSnapshotFileMagic, 0, base_lsn);
  const uint64_t seed = FileSeed(h);
  uint8_t header[kFileHeaderSize];
  EncodeFileHeader(h, header);
  Status status = WriteAllAt(**file, 0, header, kFileHeaderSize);
  uint64_t count = 0, bytes = kFileHeaderSize;
  uint16_t db = 0;                       // the database whose records are being written
  store::StateStore* writing = &store_;  // and its state store
  auto write_with = [&](const Mutation& m, uint8_t flags) {
    if (status.ok()) {
      status = WriteRecord(**file, bytes, seed, TypeOf(m), EncodePayload(m), db, flags);
    }
    ++count;
  };
  auto write = [&](const Mutation& m) { write_with(m, 0); };
  // Cold layers are copied from the files they sit in; every layer's new place is recorded
  // and taken up once the snapshot is durable (the held handles keep each identity unique).
  // A layer with a place is named by it: a file (held open here) and an offset hold one value
  // only. A layer not placed yet is named by its buffer, held until then. Each names the state
  // store it was read from, which SWAPDB never replaces (it exchanges whole databases).
  struct Moved {
    store::StateStore* state;
    std::string sid;
    uint32_t layer;
    std::shared_ptr<const store::ColdFile> old_file;
    uint64_t old_offset;
    Bytes unplaced;
    uint64_t offset;  // of the value in the snapshot
  };
  std::vector<Moved> moved;
  std::string read_error;
  // One SSM put; its values' new places are recorded.
  const auto write_put = [&](const std::string& sid, const std::vector<store::LayerPlace>& places,
                             uint8_t flags) {
    SsmPut put{sid, {}};
    put.layers.reserve(places.size());
    for (const store::LayerPlace& p : places) {
      Bytes value = p.value;
      if (p.cold) {
        if (!p.file->Read(p.offset, p.length, value, read_error)) {
          if (status.ok()) status = Status::IoError("copying a cold value: " + read_error);
          return;
        }
      }
      put.layers.emplace_back(p.layer, std::move(value));
    }
    const uint64_t record_at = bytes;
    write_with(put, flags);
    const std::vector<uint64_t> offsets = SsmPutValueOffsets(put);
    for (size_t i = 0; i < places.size(); ++i) {
      const store::LayerPlace& p = places[i];
      moved.push_back(Moved{writing, sid, p.layer, p.file, p.offset,
                            p.file == nullptr ? p.value : Bytes(),
                            record_at + kRecordHeaderSize + offsets[i]});
    }
  };
  // V-store sessions: each run's new place is recorded, and taken up by its layer once the
  // snapshot is durable if the layer was not written since (its version). A session with a
  // cold layer waits until the database's hot sessions are written, then follows a directory
  // (type 17) with the others, its rows records flagged cold: a restart creates it and places
  // its rows from the directory without reading them.
  struct MovedRows {
    store::VectorStore* vectors;
    std::string sid;
    uint64_t index;
    uint32_t layer;
    uint64_t version;
    std::vector<store::PlacedRun> runs;
  };
  std::vector<MovedRows> moved_rows;
  store::VectorStore* writing_vectors = vectors_;
  // One rows record: its rows in memory (`pieces`), or where they sit on disk (`cold`).
  struct RowsOut {
    uint32_t layer;
    uint64_t start, rows;
    std::vector<Bytes> pieces;
    store::RowPiece cold;  // read when `from_disk` (a zero piece for the row that ends a layer)
    bool from_disk = false;
  };
  const auto write_rows =
      [&](const std::string& sid, const store::VectorSessionInfo& info,
          const std::vector<store::LayerRead>& layers, uint8_t flags,
          const std::function<bool(const store::LayerRead&, std::vector<RowsOut>&)>& records_of) {
        const auto tier = static_cast<uint32_t>(info.tier);
        write(VCreate{sid, info.index, info.dim, tier});
        for (const store::LayerRead& layer : layers) {
          MovedRows placed{writing_vectors, sid, info.index, layer.layer, layer.version, {}};
          std::vector<RowsOut> records;
          if (!records_of(layer, records)) return;
          for (RowsOut& r : records) {
            if (r.from_disk) {
              try {
                r.pieces = writing_vectors->ReadPieces({r.cold}, info.row_bytes).pieces;
              } catch (const std::exception& e) {
                if (status.ok())
                  status = Status::IoError(std::string("copying cold rows: ") + e.what());
                return;
              }
            }
            const uint64_t record_at = bytes;
            write_with(VStore{sid, layer.layer, r.start, r.rows, info.dim, tier, Blob{r.pieces}},
                       flags);
            placed.runs.push_back(store::PlacedRun{
                r.start, r.rows, record_at + kRecordHeaderSize + VStoreRowsOffset(sid)});
          }
          moved_rows.push_back(std::move(placed));
        }
      };
  // A hot layer's records are its stored runs; a cold one's, its extents, then a zero row at
  // the end of the layer when no extent reaches it (as StoredRuns does).
  const auto records_of = [](const store::LayerRead& layer, std::vector<RowsOut>& out) {
    if (!layer.cold) {
      for (const store::RowRun& run : layer.runs) {
        out.push_back(RowsOut{layer.layer, run.start, run.rows.rows, run.rows.pieces, {}, false});
      }
      return true;
    }
    uint64_t end = 0;
    for (const auto& [start, piece] : layer.cold_extents) {
      out.push_back(RowsOut{layer.layer, start, piece.rows, {}, piece, true});
      end = start + piece.rows;
    }
    if (layer.length > end) {
      out.push_back(
          RowsOut{layer.layer, layer.length - 1, 1, {}, store::RowPiece{1, nullptr, 0}, true});
    }
    return true;
  };
  struct ColdVector {
    std::string sid;
    store::VectorSessionInfo info;
    std::vector<store::LayerRead> layers;
  };
  std::vector<ColdVector> cold_vectors;
  const auto write_vector_session = [&](const std::string& sid,
                                        const store::VectorSessionInfo& info,
                                        const std::vector<store::LayerRead>& layers) {
    if (std::any_of(layers.begin(), layers.end(),
                    [](const store::LayerRead& l) { return l.cold; })) {
      cold_vectors.push_back(ColdVector{sid, info, layers});
    } else {
      write_rows(sid, info, layers, 0, records_of);
    }
  };
  const auto write_cold_vectors = [&] {
    if (cold_vectors.empty() || !status.ok()) return cold_vectors.clear();
    VectorColdDirectory directory;
    for (const ColdVector& v : cold_vectors) {
      VectorColdEntry& e = directory.entries.emplace_back();
      e.sid = v.sid;
      e.index = v.info.index;
      e.dim = v.info.dim;
      e.tier = static_cast<uint32_t>(v.info.tier);
      for (const store::LayerRead& layer : v.layers) {
        std::vector<RowsOut> records;
        records_of(layer, records);
        for (const RowsOut& r : records) e.records.push_back({r.layer, r.start, r.rows});
      }
    }
    // Offsets are fixed-width: the directory's size does not depend on them.
    uint64_t at = bytes + kRecordHeaderSize + EncodeVectorColdDirectory(directory).size();
    for (VectorColdEntry& e : directory.entries) {
      e.record_offset = at;
      at += VectorColdEntryBytes(e);
    }
    directory.region_end = at;
    status = WriteRecord(**file, bytes, seed, RecordType::kVectorColdDirectory,
                         {EncodeVectorColdDirectory(directory)}, db);
    for (size_t i = 0; i < cold_vectors.size() && status.ok(); ++i) {
      if (bytes != directory.entries[i].record_offset) {
        status = Status::Internal("cold V-store session " + std::to_string(i) + " written at " +
                                  std::to_string(bytes) + ", its directory says " +
                                  std::to_string(directory.entries[i].record_offset));
        break;
      }
      const ColdVector& v = cold_vectors[i];
      write_rows(v.sid, v.info, v.layers, kRecordFlagCold, records_of);
    }
    if (status.ok() && bytes != directory.region_end) {
      status = Status::Internal("cold V-store records end at " + std::to_string(bytes) +
                                ", their directory says " + std::to_string(directory.region_end));
    }
    cold_vectors.clear();
  };
  // A database's cold sessions wait until its hot ones are written, then follow a directory of
  // them, so a restart places them all from it without reading their records (one seek, not
  // one per layer).
  std::vector<std::pair<std::string, std::vector<store::LayerPlace>>> cold_sessions;
  auto write_session = [&](const std::string& sid, const std::vector<store::LayerPlace>& places) {
    const bool any_cold = std::any_of(places.begin(), places.end(),
                                      [](const store::LayerPlace& p) { return p.cold; });
    if (any_cold) {
      cold_sessions.emplace_back(sid, places);
    } else {
      write_put(sid, places, 0);
    }
  };
  auto write_cold_sessions = [&] {
    if (cold_sessions.empty() || !status.ok()) return cold_sessions.clear();
    ColdDirectory directory;
    for (const auto& [sid, places] : cold_sessions) {
      ColdEntry& e = directory.entries.emplace_back();
      e.sid = sid;
      for (const store::LayerPlace& p : places) {
        e.layers.emplace_back(p.layer, p.cold ? p.length : p.value.size());
      }
    }
    // Offsets are fixed-width: the directory's size does not depend on them.
    uint64_t at = bytes + kRecordHeaderSize + EncodeColdDirectory(directory).size();
    for (ColdEntry& e : directory.entries) {
      e.record_offset = at;
      at += kRecordHeaderSize + SsmPutPayloadLength(e);
    }
    directory.region_end = at;
    status = WriteRecord(**file, bytes, seed, RecordType::kColdDirectory,
                         {EncodeColdDirectory(directory)}, db);
    // A cold session stays cold across a restart: recovery will not read its values.
    for (size_t i = 0; i < cold_sessions.size() && status.ok(); ++i) {
      if (bytes != directory.entries[i].record_offset) {
        status = Status::Internal("cold record " + std::to_string(i) + " written at " +
                                  std::to_string(bytes) + ", its directory says " +
                                  std::to_string(directory.entries[i].record_offset));
        break;
      }
      write_put(cold_sessions[i].first, cold_sessions[i].second, kRecordFlagCold);
    }
    if (status.ok() && bytes != directory.region_end) {
      status = Status::Internal("cold records end at " + std::to_string(bytes) +
                                ", their directory says " + std::to_string(directory.region_end));
    }
    cold_sessions.clear();
  };
  // Strings: a cold value is copied from where it sits and its record flagged cold, so a restart
  // keeps it on disk; a large value's new place (hot or cold) is taken up once the snapshot is
  // durable, if the key still holds that value.
  struct MovedString {
    store::Keyspace* keys;
    std::string key;
    std::shared_ptr<const store::ColdFile> old_file;  // a cold value's place
    uint64_t old_offset;
    Bytes unplaced;   // a hot value's buffer
    uint64_t offset;  // of the value in the snapshot
  };
  std::vector<MovedString> moved_strings;
  store::Keyspace* writing_keys = keys_;
  const auto write_string = [&](const std::string& key, const store::KeyInfo& info) {
    if (!status.ok()) return;
    StringSet record;
    try {
      record = StringRecord(key, info);
    } catch (const std::exception& e) {
      status = Status::IoError(std::string("copying a cold string: ") + e.what());
      return;
    }
    const uint64_t record_at = bytes;
    // A parked small string is in the cold index with its value in memory: written hot.
    const bool on_disk = info.place.file != nullptr;
    write_with(record, on_disk ? kRecordFlagCold : 0);
    for (const StringValueAt& w : StringValueOffsets(record, store::KeyEntry::kInlineValueBelow)) {
      moved_strings.push_back(MovedString{writing_keys, key, on_disk ? info.place.file : nullptr,
                                          info.place.offset, on_disk ? Bytes() : info.value,
                                          record_at + kRecordHeaderSize + w.offset});
    }
  };
  if (databases_ == nullptr) {
    WriteDatabaseSnapshot(store_, vectors_, keys_, prefixes_, write_session, write_cold_sessions,
                          write_vector_session, write_cold_vectors, write_string, write);
  } else {
    databases_->ForEach([&](size_t index, store::Database& d) {
      db = static_cast<uint16_t>(index);
      writing = &d.state;
      writing_vectors = &d.vectors;
      writing_keys = &d.keys;
      WriteDatabaseSnapshot(d.state, &d.vectors, &d.keys, &d.prefixes, write_session,
                            write_cold_sessions, write_vector_session, write_cold_vectors,
                            write_string, write);
    });
  }
  if (status.ok()) {
    const Mutation end = SnapshotEnd{count};
    status = WriteRecord(**file, bytes, seed, RecordType::kSnapshotEnd, EncodePayload(end));
  }
  if (status.ok()) status = (*file)->Sync();
  file->reset();
  // An EXEC that ran while the stores were read may be in the snapshot in part: its group is in
  // the log, synced, before the snapshot takes effect.
  if (status.ok() && !WaitForGroups(groups_at_start, GroupsNow().next)) {
    log_->Sync();
    if (!log_->healthy()) status = Status::IoError("the log cannot be written: " + last_error());
  }
  std::string cold_error;
  std::shared_ptr<store::ColdFile> cold =
      status.ok() ? OpenColdFile(env_, temp, &cold_error) : nullptr;
  if (status.ok()) status = env_->Rename(temp, final_path);
  if (status.ok()) status = env_->SyncDir(options_.dir);
  if (!status.ok()) {
    (void)env_->Remove(temp);  // best effort: the next start removes it anyway
    return "snapshot failed: " + status.message();
  }
  // The snapshot is durable: its copies become where the values sit, for values unchanged since
  // (the open handle reads it under its final name).
  if (cold != nullptr) {
    cold->MarkDurable(store::ColdFile::kAllDurable);
    for (const Moved& m : moved) {
      if (m.old_file != nullptr) {
        m.state->Repoint(m.sid, m.layer, m.old_file.get(), m.old_offset, cold, m.offset);
      } else {
        m.state->Place(m.sid, m.layer, m.unplaced.data(), cold, m.offset);
      }
    }
    for (const MovedRows& m : moved_rows) {
      m.vectors->Repoint(m.sid, m.index, m.layer, m.version, m.runs, cold);
    }
    for (const MovedString& m : moved_strings) {
      if (m.keys == nullptr) continue;
      if (m.old_file != nullptr) {
        m.keys->RepointString(m.key, m.old_file.get(), m.old_offset, cold, m.offset);
      } else {
        m.keys->PlaceString(m.key, m.unplaced.data(), cold, m.offset);
      }
    }
  } else {
    spdlog::warn("Snapshot values cannot serve the disk tier: {}", cold_error);
  }
  moved.clear();
  moved_rows.clear();
  moved_strings.clear();
  // The log is cut only now that the snapshot is durable.
  log_->Sync();
  log_->RemoveSegmentsBefore(base_lsn);
  snapshot_bytes_ = bytes;
  log_base_bytes_ = log_->Stats().bytes;
  changes_since_save_ -= std::min(changes_at_start, changes_since_save_.load());
  last_save_time_ = CoarseNowMs() / 1000;
  rewrites_ += 1;
  spdlog::info("Snapshot saved: {} sessions, {:.1f} MB, {:.3f} s; log cut before lsn {}", count,
               bytes / 1e6, SecondsSince(start), base_lsn);
  return {};
}

void Durability::WriteDatabaseSnapshot(
    const store::StateStore& state, const store::VectorStore* vectors, const store::Keyspace* keys,
    const store::PrefixStore* prefixes, const SessionWriter& write_session,
    const std::function<void()>& sessions_written, const VectorSessionWriter& write_vector_session,
    const std::function<void()>& vector_sessions_written, const StringWriter& write_string,
    const std::function<void(const Mutation&)>& write) {
  state.ForEachSessionPlace(write_session);
  sessions_written();
  if (vectors != nullptr) {
    WriteVectorSnapshot(*vectors, write_vector_session, vector_sessions_written, write);
  }
  if (prefixes != nullptr) WritePrefixSnapshot(*prefixes, write);
  if (keys == nullptr) return;
  // Strings with their expiry, the other values the keyspace holds (sets, lists, hashes, sorted
  // sets, streams), then the other types' expiries, once every key they name exists.
  keys->ForEach([&](const std::string& key, const store::KeyInfo& info) {
    if (info.type == store::KeyType::kString) {
      write_string(key, info);
    } else if (store::HoldsValue(info.type)) {
      write(MembersRecord(key, info));
    }
  });
  keys->ForEach([&](const std::string& key, const store::KeyInfo& info) {
    if (info.type == store::KeyType::kString || info.expire_at_ms == 0) return;
    write(KeyExpire{key, static_cast<uint64_t>(info.expire_at_ms)});
  });
}

void Durability::WriteVectorSnapshot(const store::VectorStore& vectors,
                                     const VectorSessionWriter& write_session,
                                     const std::function<void()>& sessions_written,
                                     const std::function<void(const Mutation&)>& write) {
  // Sessions (cold ones after the hot ones, read then), then the registrations on their own: a
  // half dropped with V.DROP must not come back from the snapshot.
  vectors.ForEachSession(write_session, /*read_cold=*/false);
  sessions_written();
  vectors.ForEachPrefix([&](const std::string& ns, const store::PrefixSpec& spec) {
    write(KvPrefixRecord(ns, spec));
  });
}

void Durability::WritePrefixSnapshot(const store::PrefixStore& prefixes,
                                     const std::function<void(const Mutation&)>& write) {
  prefixes.ForEach([&](const std::string& ns, const store::PrefixIndex& index) {
    WritePrefixNamespace(ns, index, write);
  });
}

void Durability::Sync() {
  if (!log_) return;
  log_->Sync();
  // Inside EXEC (KV.PREFIX.COMMIT queued after writes): the group's records are not queued yet;
  // they are synced as soon as they are, before EXEC replies.
  if (Group* group = CollectingHere(); group != nullptr) group->sync_at_end_ = true;
}

std::string Durability::Save() {
  // Inside EXEC (its group open) a save never waits for another one, which may be waiting for
  // this EXEC's group.
  std::unique_lock lock(save_mu_, std::defer_lock);
  if (CollectingHere() == nullptr) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return "Background save already in progress";
  }
  std::string err = WriteSnapshot();
  std::lock_guard error_lock(error_mu_);
  last_save_error_ = err;
  return err;
}

std::string Durability::BackgroundSave() {
  if (bgsave_running_.exchange(true)) return "Background save already in progress";
  if (bgsave_thread_.joinable()) bgsave_thread_.join();
  bgsave_thread_ = std::thread([this] {
    auto start = std::chrono::steady_clock::now();
    std::string err = Save();
    last_bgsave_ok_ = err.empty();
    last_bgsave_seconds_ = static_cast<int64_t>(SecondsSince(start));
    if (!err.empty()) spdlog::error("Background save failed: {}", err);
    bgsave_running_ = false;
  });
  return {};
}

void Durability::MaintenanceLoop() {
  std::unique_lock lock(maintenance_mu_);
  while (!stopping_) {
    maintenance_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_ || options_.auto_rewrite_percentage <= 0 || bgsave_running_.load()) continue;
    uint64_t log_bytes = log_->Stats().bytes;
    const uint64_t live = LiveBytes();
    // Measured against the live data, not the log size at start: a log that restarts keep
    // growing must still be rewritten once most of it is overwritten history.
    uint64_t base = live;
    uint64_t threshold =
        base + base * static_cast<uint64_t>(options_.auto_rewrite_percentage) / 100;
    if (log_bytes > options_.auto_rewrite_min_size && log_bytes > threshold) {
      spdlog::info("Log is {:.1f} MB for {:.1f} MB of live data: rewriting", log_bytes / 1e6,
                   live / 1e6);
      BackgroundSave();
    }
  }
}

uint64_t Durability::LiveBytes() const {
  const auto of = [](const store::StateStore& state, const store::VectorStore* vectors) {
    const store::StoreStats stats = state.Stats();
    return stats.payload_bytes + stats.cold_bytes +
           (vectors != nullptr ? vectors->Stats().payload_bytes : 0);
  };
  if (databases_ == nullptr) return of(store_, vectors_);
  uint64_t live = 0;
  databases_->ForEach([&](size_t, store::Database& d) { live += of(d.state, &d.vectors); });
  return live;
}

void Durability::set_policy(FsyncPolicy p) {
  if (log_) log_->set_policy(p);
}

std::string Durability::last_error() const {
  return log_ ? log_->Stats().last_error : std::string();
}

PersistStats Durability::Stats() const {
  PersistStats s;
  s.bgsave_in_progress = bgsave_running_.load();
  s.last_save_time = last_save_time_.load();
  s.last_bgsave_ok = last_bgsave_ok_.load();
  s.last_bgsave_seconds = last_bgsave_seconds_.load();
  s.changes_since_last_save = changes_since_save_.load();
  s.snapshot_bytes = snapshot_bytes_.load();
  s.log_base_bytes = log_base_bytes_.load();
  s.rewrites = rewrites_.load();
  if (log_) s.log = log_->Stats();
  s.recovered_records = recovered_records_;
  s.recovered_bytes = recovered_bytes_;
  s.recovery_seconds = recovery_seconds_;
  {
    std::lock_guard lock(error_mu_);
    s.last_save_error = last_save_error_;
  }
  return s;
}

}  // namespace prefixd::persist
