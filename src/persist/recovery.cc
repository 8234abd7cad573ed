#include "persist/recovery.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>

#include "persist/cold_directory.h"
#include "persist/record_layout.h"

namespace prefixd::persist {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

// A cold record of kind R read from its file up to its values (its head, record_layout.h): its
// fields before them, their length or count, and where they start in the file.
template <typename R>
struct ColdHead {
  R fields;
  uint64_t values_head = 0;  // the values' length (a blob) or count (layers)
  uint64_t values_at = 0;    // where they start in the file
  uint64_t values_end = 0;   // where the payload ends in the file
};

template <typename R>
Status ReadColdHead(RecordReader& reader, const Record& record, ColdHead<R>& out) {
  const uint64_t at = record.offset + kRecordHeaderSize;
  const uint64_t length = record.header.payload_length;
  out.values_end = at + length;
  // Its first field is a name: its length says how long the head is.
  Bytes name_length;
  if (length < FieldWire<std::string>::kHead) {
    return Status::Corruption("its fields run past its payload");
  }
  PREFIXD_RETURN_IF_ERROR(reader.ReadAt(at, FieldWire<std::string>::kHead, name_length));
  const uint32_t name_bytes = GetU32(name_length.data());
  if (name_bytes > Limits::Hard().max_sid_len) return Status::Corruption("its name is too long");
  const uint64_t head_bytes = HeadBytes<R>(name_bytes);
  if (head_bytes > length) return Status::Corruption("its fields run past its payload");
  Bytes head;
  PREFIXD_RETURN_IF_ERROR(reader.ReadAt(at, head_bytes, head));
  Mutation m;
  PREFIXD_RETURN_IF_ERROR(DecodeHead(R::kType, head, m, out.values_head));
  out.fields = std::move(std::get<R>(m));
  out.values_at = at + head_bytes;
  return {};
}

// ReadColdHead for a record whose one value (a string's bytes, a run of V-store rows) is all of
// its payload after the head; `unfilled` is the corruption reported when it is not.
template <typename R>
Status ReadColdBlobHead(RecordReader& reader, const Record& record, ColdHead<R>& out,
                        const char* unfilled) {
  PREFIXD_RETURN_IF_ERROR(ReadColdHead(reader, record, out));
  if (out.values_head != out.values_end - out.values_at) return Status::Corruption(unfilled);
  return {};
}

}  // namespace

Status Recovery::Run() {
  auto start = std::chrono::steady_clock::now();
  auto names = env_->List(options_.dir);
  if (!names.ok()) {
    return Status::IoError("can't list " + options_.dir + ": " + names.status().message());
  }
  // A snapshot that was being written when the process stopped is incomplete: drop it.
  for (const std::string& name : *names) {
    if (name.starts_with("temp-") && name.ends_with(".pds")) {
      if (Status removed = env_->Remove(options_.dir + "/" + name); !removed.ok()) {
        return Status::IoError("can't remove the incomplete snapshot " + name + ": " +
                               removed.message());
      }
    }
  }
  uint64_t base_lsn = 1;
  std::string snapshot = options_.dir + "/" + kSnapshotName;
  auto info = env_->Stat(snapshot);
  if (info.ok()) {
    PREFIXD_RETURN_IF_ERROR(LoadSnapshot(snapshot, base_lsn));
    snapshot_bytes_ = info->size;
  } else if (info.status().code() != StatusCode::kNotFound) {
    return Status::IoError("can't read " + snapshot + ": " + info.status().message());
  }
  next_lsn_ = base_lsn;
  PREFIXD_RETURN_IF_ERROR(ReplaySegments(base_lsn));
  seconds_ = SecondsSince(start);
  store::StoreStats s = stores_.Of(0).state.Stats();
  spdlog::info(
      "Recovered {} records ({:.1f} MB) in {:.3f} s: {} sessions, {} entries, {:.1f} MB "
      "of state",
      records_, bytes_ / 1e6, seconds_, s.sessions, s.entries, s.payload_bytes / 1e6);
  return {};
}

Status Recovery::Replay(const Record& record, Mutation& m,
                        const std::shared_ptr<store::ColdFile>& file) {
  if (Status decoded = DecodePayload(record.header.type, record.payload, m); !decoded.ok()) {
    return Status::Corruption("its payload does not decode: " + decoded.message());
  }
  // Checked again as the live path checked it: a record that would exhaust memory or break an
  // invariant of the stores is reported, never applied.
  Limits limits = Limits::Hard();
  if (options_.memory_budget != 0) limits.memory_budget = options_.memory_budget;
  const Verdict verdict = Check(m, limits);
  if (!verdict.ok) return Status::Corruption(verdict.why + "; it holds " + Describe(m));
  Outcome outcome;
  try {
    PREFIXD_RETURN_IF_ERROR(stores_.Apply(m, record.header.db, &outcome));
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("applying it failed (") + e.what() + "); it holds " +
                              Describe(m));
  }
  if (PlaceValues(record, m, outcome, file) && options_.placed_while_recovering) {
    options_.placed_while_recovering(m, record.header.db);
  }
  return {};
}

bool Recovery::PlaceValues(const Record& record, const Mutation& m, const Outcome& outcome,
                           const std::shared_ptr<store::ColdFile>& file) {
  const Stores stores = stores_.Of(record.header.db);
  const uint64_t payload_at = record.offset + kRecordHeaderSize;
  // The values are slices of the payload: where they sit in the file follows.
  const auto in_file = [&](const uint8_t* data) {
    return payload_at + static_cast<uint64_t>(data - record.payload.data());
  };
  bool placed = false;
  // Applied V-store rows sit in the file too (the disk tier places them, as the log does live).
  if (const auto* rows = std::get_if<VStore>(&m);
      rows != nullptr && outcome.kind == Outcome::Kind::kApplied && !rows->data.pieces.empty()) {
    if (stores.vectors != nullptr) {
      stores.vectors->Place(rows->sid, store::VectorStore::kAnyIndex, rows->layer, rows->start,
                            rows->rows, file, in_file(rows->data.pieces[0].data()));
      placed = file != nullptr;
    }
  }
  if (const auto* put = std::get_if<SsmPut>(&m); put != nullptr && file != nullptr) {
    for (const auto& [layer, value] : put->layers) {
      stores.state.Place(put->sid, layer, value.data(), file, in_file(value.data()));
    }
    placed = true;
  }
  // So are a string set's large values (the disk tier keeps strings from the entry's inline
  // size on). Replay is alone: the key holds the record's value (or a compact copy of it).
  if (stores.keys != nullptr && file != nullptr) {
    for (const StringValueAt& w : StringValueOffsets(m, store::KeyEntry::kInlineValueBelow)) {
      stores.keys->PlaceString(w.key, nullptr, file, payload_at + w.offset);
      placed = true;
    }
  }
  return placed;
}

Status Recovery::LoadColdRecord(RecordReader& reader, const Record& record,
                                const std::shared_ptr<store::ColdFile>& file) {
  switch (record.header.type) {
    case RecordType::kVStore:
      return LoadColdRows(reader, record, file);
    case RecordType::kStringSet:
      return LoadColdString(reader, record, file);
    case RecordType::kSsmPut:
      return LoadColdPut(reader, record, file);
    default:
      return Status::Corruption("a cold record that is not an SSM put");
  }
}

Status Recovery::LoadColdPut(RecordReader& reader, const Record& record,
                             const std::shared_ptr<store::ColdFile>& file) {
  PREFIXD_RETURN_IF_ERROR(stores_.CheckDatabase(record.header.db));
  ColdHead<SsmPut> head;
  PREFIXD_RETURN_IF_ERROR(ReadColdHead(reader, record, head));
  const std::string& sid = head.fields.sid;
  store::StateStore& state = stores_.Of(record.header.db).state;
  uint64_t at = head.values_at;
  for (uint64_t i = 0; i < head.values_head; ++i) {
    constexpr uint64_t kItemHead = FieldWire<LayerBlobs>::kItemHead;
    if (kItemHead > head.values_end - at) {
      return Status::Corruption("its fields run past its payload");
    }
    Bytes item;
    PREFIXD_RETURN_IF_ERROR(reader.ReadAt(at, kItemHead, item));
    at += kItemHead;
    const LayerHead layer = DecodeLayerHead(item.data());
    if (layer.length > head.values_end - at) {
      return Status::Corruption("a value runs past its payload");
    }
    state.PutCold(sid, layer.layer, layer.length, file, at);
    at += layer.length;
  }
  if (at != head.values_end) {
    return Status::Corruption(std::to_string(head.values_end - at) + " unexpected trailing bytes");
  }
  if (head.values_head > 0) KeepColdKey(record.header.db, sid, store::KeyType::kSsmPrefix);
  return {};
}

Status Recovery::LoadColdString(RecordReader& reader, const Record& record,
                                const std::shared_ptr<store::ColdFile>& file) {
  PREFIXD_RETURN_IF_ERROR(stores_.CheckDatabase(record.header.db));
  store::Keyspace* keys = stores_.Of(record.header.db).keys;
  if (keys == nullptr) return Status::Corruption("a string without a keyspace");
  ColdHead<StringSet> head;
  PREFIXD_RETURN_IF_ERROR(
      ReadColdBlobHead(reader, record, head, "its value does not fill its payload"));
  const StringSet& r = head.fields;
  const uint64_t length = head.values_head;
  const uint32_t encoding = (r.flags >> StringSet::kEncodingShift) & 3;
  if ((r.flags & StringSet::kKeepTtl) != 0 || encoding > 2) {
    return Status::Corruption("its flags " + std::to_string(r.flags) + " are not a snapshot's");
  }
  if (length < store::KeyEntry::kInlineValueBelow) {
    return Status::Corruption("a cold value below the inline size");
  }
  if (r.at_ms > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::Corruption("its expiry is out of range");
  }
  keys->PutColdString(std::string(r.key.view()), static_cast<store::StringEncoding>(encoding),
                      static_cast<int64_t>(r.at_ms),
                      store::StringPlace{file, head.values_at, length});
  return {};
}

Status Recovery::LoadColdRows(RecordReader& reader, const Record& record,
                              const std::shared_ptr<store::ColdFile>& file) {
  PREFIXD_RETURN_IF_ERROR(stores_.CheckDatabase(record.header.db));
  store::VectorStore* vectors = stores_.Of(record.header.db).vectors;
  if (vectors == nullptr) return Status::Corruption("V-store rows without a V-store");
  ColdHead<VStore> head;
  PREFIXD_RETURN_IF_ERROR(
      ReadColdBlobHead(reader, record, head, "its rows do not fill its payload"));
  const VStore& r = head.fields;
  const uint64_t length = head.values_head;
  const auto tier = store::TierFromCode(r.tier);
  if (!tier) return Status::Corruption("its tier " + std::to_string(r.tier) + " is unknown");
  if (r.rows == 0 || r.rows > (~uint64_t{0} - r.start) ||
      length / r.rows != store::RowBytes(*tier, r.dim) || length % r.rows != 0) {
    return Status::Corruption("its " + std::to_string(r.rows) + " rows do not match its " +
                              std::to_string(length) + " bytes");
  }
  if (!vectors->PutColdRows(r.sid, r.layer, r.start, r.rows, r.dim, *tier, file, head.values_at)) {
    return Status::Corruption("its session " + r.sid +
                              " does not exist with that shape, or holds the layer in memory");
  }
  if (cold_vector_sessions_.empty() || cold_vector_sessions_.back().second != r.sid ||
      cold_vector_sessions_.back().first != record.header.db) {
    cold_vector_sessions_.emplace_back(record.header.db, r.sid);
  }
  return {};
}

void Recovery::KeepColdKey(uint16_t db, const std::string& sid, store::KeyType type) {
  if (store::Keyspace* keys = stores_.Of(db).keys; keys != nullptr) {
    keys->Set(sid, type);
    keys->MoveTier(sid, /*cold=*/true, [] { return true; });
  }
}

Status Recovery::LoadVectorColdDirectory(RecordReader& reader, const Record& record,
                                         const std::shared_ptr<store::ColdFile>& file,
                                         uint64_t& records) {
  PREFIXD_RETURN_IF_ERROR(stores_.CheckDatabase(record.header.db));
  VectorColdDirectory directory;
  const uint64_t region_start = record.offset + kRecordHeaderSize + record.header.payload_length;
  if (Status decoded =
          DecodeVectorColdDirectory(record.payload, region_start, reader.file_size(),
                                    Limits::Hard().max_sid_len, Limits::Hard().max_dim, directory);
      !decoded.ok()) {
    return Status::Corruption("its V-store cold directory is damaged: " + decoded.message());
  }
  // Without a file to serve them from, the records that follow are read and loaded whole.
  if (file == nullptr) return {};
  store::VectorStore* vectors = stores_.Of(record.header.db).vectors;
  if (vectors == nullptr) return Status::Corruption("a V-store cold directory without a V-store");
  for (const VectorColdEntry& e : directory.entries) {
    const store::Tier tier = *store::TierFromCode(e.tier);  // checked by the decoder
    if (vectors->Create(e.sid, e.dim, tier, e.index, 0, nullptr) !=
        store::VectorStore::CreateResult::kCreated) {
      return Status::Corruption("its V-store cold directory lists " + e.sid +
                                ", which already exists");
    }
    const std::vector<uint64_t> offsets = VectorColdRowsOffsets(e);
    for (size_t i = 0; i < e.records.size(); ++i) {
      const VectorColdRows& r = e.records[i];
      if (!vectors->PutColdRows(e.sid, r.layer, r.start, r.rows, e.dim, tier, file, offsets[i])) {
        return Status::Corruption("its V-store cold directory places rows of " + e.sid +
                                  " that do not fit it");
      }
    }
    cold_vector_sessions_.emplace_back(record.header.db, e.sid);
    records += 1 + e.records.size();
  }
  reader.Seek(directory.region_end);
  return {};
}

void Recovery::KeepColdVectorKeys() {
  // After the whole snapshot: a registration record (after the sessions) brings its sessions'
  // keys back to the hot index, and a registration is cold when both halves are.
  for (const auto& [db, sid] : cold_vector_sessions_) {
    KeepColdKey(db, sid, store::KeyType::kVstore);
    if (!sid.ends_with("_pk")) continue;
    const std::string ns = sid.substr(0, sid.size() - 3);
    store::VectorStore* vectors = stores_.Of(db).vectors;
    store::Keyspace* keys = stores_.Of(db).keys;
    if (keys == nullptr || !vectors->Prefix(ns) ||
        vectors->ColdBytes(store::VectorStore::ValueSid(ns)) == 0) {
      continue;
    }
    store::StateStore& state = stores_.Of(db).state;
    if (state.Contains(ns) && state.ColdBytes(ns) == 0) continue;
    keys->MoveTier(ns, /*cold=*/true, [] { return true; });
  }
  cold_vector_sessions_.clear();
}

Status Recovery::LoadColdDirectory(RecordReader& reader, const Record& record,
                                   const std::shared_ptr<store::ColdFile>& file,
                                   uint64_t& entries) {
  PREFIXD_RETURN_IF_ERROR(stores_.CheckDatabase(record.header.db));
  ColdDirectory directory;
  const uint64_t region_start = record.offset + kRecordHeaderSize + record.header.payload_length;
  if (Status decoded = DecodeColdDirectory(record.payload, region_start, reader.file_size(),
                                           Limits::Hard().max_sid_len, directory);
      !decoded.ok()) {
    return Status::Corruption("its cold directory is damaged: " + decoded.message());
  }
  // Without a file to serve them from, the cold records that follow are read and loaded whole.
  if (file == nullptr) return {};
  store::StateStore& state = stores_.Of(record.header.db).state;
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

Status Recovery::LoadSnapshot(const std::string& path, uint64_t& base_lsn) {
  RecordReader reader;
  if (Status opened = reader.Open(path, kSnapshotFileMagic, env_); !opened.ok()) {
    return Status::Corruption("snapshot: " + opened.message());
  }
  base_lsn = reader.file_header().base_lsn;
  Result<std::shared_ptr<store::ColdFile>> opened_cold = OpenColdFile(env_, path);
  std::shared_ptr<store::ColdFile> cold = opened_cold.ok() ? *opened_cold : nullptr;
  if (cold != nullptr) cold->MarkDurable(store::ColdFile::kAllDurable);
  reader.set_skip_cold(cold != nullptr);
  Progress progress("Loading snapshot " + path);
  Record record;
  Mutation m;
  bool ended = false;
  while (true) {
    Status loaded;
    ReadStatus status = reader.Next(record);
    if (status == ReadStatus::kEnd) break;
    if (status == ReadStatus::kBad || ended) {
      // Snapshots are renamed into place only once complete and synced: damage is corruption.
      return Status::Corruption(
          "snapshot " + path + " is corrupt at offset " +
          std::to_string(status == ReadStatus::kBad ? reader.bad_offset() : record.offset) + ": " +
          (status == ReadStatus::kBad ? reader.problem() : "records after its end"));
    }
    if (record.header.type == RecordType::kSnapshotEnd) {
      if (Status decoded = DecodePayload(record.header.type, record.payload, m); !decoded.ok()) {
        loaded = decoded;
      } else if (std::get<SnapshotEnd>(m).count != progress.records()) {
        loaded = Status::Corruption(
            "it ends the snapshot after " + std::to_string(progress.records()) +
            " records but says it holds " + std::to_string(std::get<SnapshotEnd>(m).count));
      }
      ended = true;
    } else if (record.header.type == RecordType::kColdDirectory) {
      // An index, not an entry: the records it lists count, it does not.
      uint64_t entries = 0;
      loaded = LoadColdDirectory(reader, record, cold, entries);
      for (uint64_t i = 0; i < entries; ++i) progress.Add(0);
    } else if (record.header.type == RecordType::kVectorColdDirectory) {
      uint64_t records = 0;
      loaded = LoadVectorColdDirectory(reader, record, cold, records);
      for (uint64_t i = 0; i < records; ++i) progress.Add(0);
    } else if (record.payload_skipped) {
      loaded = LoadColdRecord(reader, record, cold);
      progress.Add(0);
    } else {
      loaded = Replay(record, m, cold);
      progress.Add(record.payload.size());
    }
    if (!loaded.ok()) {
      return Status::Corruption("snapshot " + path + " has a bad record at offset " +
                                std::to_string(record.offset) + ": " + loaded.message());
    }
  }
  if (!ended)
    return Status::Corruption("snapshot " + path + " has no end record: it is incomplete");
  KeepColdVectorKeys();
  records_ += progress.records();
  bytes_ += progress.bytes();
  return {};
}

Status Recovery::ReplaySegments(uint64_t base_lsn) {
  uint64_t& next_lsn = next_lsn_;
  uint64_t& next_sequence = next_sequence_;
  std::vector<SegmentInfo>& segments = segments_;
  std::vector<std::pair<uint64_t, std::string>> files;
  auto names = env_->List(options_.dir);
  if (!names.ok())
    return Status::IoError("can't list " + options_.dir + ": " + names.status().message());
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
    if (Status opened = reader.Open(path, kLogFileMagic, env_); !opened.ok()) {
      // A crash right after creating the newest segment can leave it without a whole header.
      if (is_last && reader.file_size() < kFileHeaderSize) {
        spdlog::warn("Removing log segment {} cut short at creation ({} bytes)", path,
                     reader.file_size());
        if (Status removed = env_->Remove(path); !removed.ok()) {
          return Status::IoError("can't remove " + path + ": " + removed.message());
        }
        continue;
      }
      return Status::Corruption("log: " + opened.message());
    }
    SegmentInfo info{sequence, path, reader.file_header().base_lsn, 0, reader.file_size()};
    Result<std::shared_ptr<store::ColdFile>> opened_cold = OpenColdFile(env_, path);
    std::shared_ptr<store::ColdFile> cold = opened_cold.ok() ? *opened_cold : nullptr;
    // What survived a restart is on disk (a torn tail is cut before anything points past it).
    if (cold != nullptr) cold->MarkDurable(store::ColdFile::kAllDurable);
    Record record;
    Mutation m;
    // Checks a whole record's lsn and applies it; an error text ends recovery.
    const auto replay_one = [&](const Record& r) -> Status {
      const uint64_t lsn = r.header.lsn;
      if (lsn <= last_lsn && lsn >= base_lsn) {
        return Status::Corruption("log segment " + path + " has lsn " + std::to_string(lsn) +
                                  " at offset " + std::to_string(r.offset) + " after lsn " +
                                  std::to_string(last_lsn));
      }
      info.last_lsn = std::max(info.last_lsn, lsn);
      if (lsn < base_lsn) return {};  // already in the snapshot
      last_lsn = lsn;
      if (r.header.type == RecordType::kExecGroup) return {};  // its records follow it
      if (Status why = Replay(r, m, cold); !why.ok()) {
        // Its checksum matched, so it was written whole: corruption (or a bug), never a torn
        // tail. Stop, or skip just this record when told to.
        std::string where = "log segment " + path + " has a bad record at offset " +
                            std::to_string(r.offset) + " (lsn " + std::to_string(lsn) +
                            "): " + why.message();
        if (!options_.skip_corrupt) {
          return Status::Corruption(
              where + ". Start with --log-skip-corrupt yes to skip it, losing what it held");
        }
        spdlog::error("Skipping a record: {}", where);
        return {};
      }
      progress.Add(r.payload.size());
      return {};
    };
    const auto cut_torn_tail = [&](uint64_t offset, const std::string& problem) -> Status {
      spdlog::warn(
          "Log segment {} has a torn tail at offset {} ({}): cutting {} bytes that "
          "were never acknowledged",
          path, offset, problem, reader.file_size() - offset);
      if (Status cut = CutFile(path, offset); !cut.ok()) {
        return Status::IoError("can't cut the torn tail of " + path + ": " + cut.message());
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
          if (Status cut = cut_torn_tail(offset, reader.problem()); !cut.ok()) return cut;
          break;
        }
        if (!options_.skip_corrupt) {
          return Status::Corruption(
              "log segment " + path + " is corrupt at offset " + std::to_string(offset) + " (" +
              reader.problem() +
              ")); records after it exist, so this is not a torn tail. Start with "
              "--log-skip-corrupt yes to skip the damaged bytes, losing what they held");
        }
        uint64_t resume = next_valid != 0 ? next_valid : reader.file_size();
        spdlog::error("Skipping {} corrupt bytes [{}, {}) of {} ({}): the records there are lost",
                      resume - offset, offset, resume, path, reader.problem());
        if (next_valid == 0) break;
        reader.Seek(next_valid);
        continue;
      }
      if (record.header.type != RecordType::kExecGroup) {
        if (Status replayed = replay_one(record); !replayed.ok()) return replayed;
        continue;
      }
      // An EXEC's records: applied only once every one of them is read whole. A log that ends
      // inside the group (a crash while it was written) loses the whole group, as Redis drops
      // a MULTI block cut off at the end of its AOF.
      ExecGroupRead group = ReadExecGroup(reader, record, is_last);
      if (group.outcome == ExecGroupRead::kTorn) {
        if (Status cut = cut_torn_tail(record.offset, group.problem); !cut.ok()) return cut;
        break;
      }
      if (group.outcome == ExecGroupRead::kCorrupt) {
        std::string where = "log segment " + path + " has a damaged transaction group at offset " +
                            std::to_string(record.offset) + " (" + group.problem + ")";
        if (!options_.skip_corrupt) {
          return Status::Corruption(
              where + ". Start with --log-skip-corrupt yes to skip it, losing what it held");
        }
        spdlog::error("Skipping a transaction's records: {}", where);
        if (group.resume == 0) break;
        reader.Seek(group.resume);
        continue;
      }
      if (Status replayed = replay_one(record); !replayed.ok()) return replayed;
      for (const Record& r : group.records) {
        if (Status replayed = replay_one(r); !replayed.ok()) return replayed;
      }
    }
    segments.push_back(info);
  }
  next_lsn = std::max(base_lsn, last_lsn + 1);
  for (const SegmentInfo& s : segments) next_lsn = std::max(next_lsn, s.last_lsn + 1);
  records_ += progress.records();
  bytes_ += progress.bytes();
  return {};
}

Status Recovery::CutFile(const std::string& path, uint64_t size) {
  auto file = env_->Open(path, OpenMode::kReadWrite);
  if (!file.ok()) return file.status();
  PREFIXD_RETURN_IF_ERROR((*file)->Truncate(size));
  return (*file)->Sync();
}
}  // namespace prefixd::persist
