#include "persist/snapshot_writer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "persist/cold_directory.h"
#include "persist/key_records.h"
#include "persist/log_format.h"
#include "persist/recovery.h"

namespace prefixd::persist {
namespace {

// Writes one sealed record (header plus payload pieces) at `offset` with a gather write and
// advances `offset` past it.
Status WriteSealed(File& file, uint64_t& offset, uint64_t seed, RecordType type,
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

// What WriteColdRegion needs of each kind of cold directory: its payload, and the bytes the
// records one of its entries lists take.
Bytes Encoded(const ColdDirectory& directory) { return EncodeColdDirectory(directory); }
Bytes Encoded(const VectorColdDirectory& directory) { return EncodeVectorColdDirectory(directory); }
uint64_t RecordsBytes(const ColdEntry& e) { return kRecordHeaderSize + SsmPutPayloadLength(e); }
uint64_t RecordsBytes(const VectorColdEntry& e) { return VectorColdEntryBytes(e); }

}  // namespace

Status SnapshotWriter::Write(uint64_t base_lsn, const std::function<Status()>& before_rename) {
  if (Status begun = Begin(base_lsn); !begun.ok()) return begun;
  stores_.ForEach([&](uint16_t db, const Stores& stores) { WriteDatabase(db, stores); });
  if (status_.ok()) {
    const Mutation end = SnapshotEnd{count_};
    status_ = WriteSealed(*file_, bytes_, seed_, RecordType::kSnapshotEnd, EncodePayload(end));
  }
  return Finish(before_rename);
}

void SnapshotWriter::Fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

Status SnapshotWriter::Begin(uint64_t base_lsn) {
  temp_path_ = dir_ + "/temp-" + std::to_string(getpid()) + ".pds";
  auto file = env_->Open(temp_path_, OpenMode::kCreateTruncate);
  if (!file.ok()) {
    return Status::IoError("snapshot failed: can't create " + temp_path_ + ": " +
                           file.status().message());
  }
  file_ = std::move(file).value();
  const FileHeader h = NewFileHeader(kSnapshotFileMagic, 0, base_lsn);
  seed_ = FileSeed(h);
  uint8_t header[kFileHeaderSize];
  EncodeFileHeader(h, header);
  status_ = WriteAllAt(*file_, 0, header, kFileHeaderSize);
  bytes_ = kFileHeaderSize;
  return {};
}

void SnapshotWriter::WriteDatabase(uint16_t db, const Stores& stores) {
  db_ = db;
  state_ = &stores.state;
  vectors_ = stores.vectors;
  keys_ = stores.keys;
  // SSM sessions (cold ones after the hot ones, behind their directory), V-store sessions the
  // same way, then the registrations on their own (a half dropped with V.DROP must not come
  // back from the snapshot), the prefix index, and the keyspace's own values.
  stores.state.ForEachSessionPlace(
      [&](const std::string& sid, const LayerPlaces& places) { WriteSession(sid, places); });
  WriteColdSessions();
  if (stores.vectors != nullptr) {
    stores.vectors->ForEachSession(
        [&](const std::string& sid, const store::VectorSessionInfo& info,
            const std::vector<store::LayerRead>& layers) { WriteVectorSession(sid, info, layers); },
        /*read_cold=*/false);
    WriteColdVectors();
    stores.vectors->ForEachPrefix([&](const std::string& ns, const store::PrefixSpec& spec) {
      WriteRecord(KvPrefixRecord(ns, spec));
    });
  }
  if (stores.prefixes != nullptr) {
    stores.prefixes->ForEach([&](const std::string& ns, const store::PrefixIndex& index) {
      WritePrefixNamespace(ns, index, [&](const Mutation& m) { WriteRecord(m); });
    });
  }
  if (stores.keys != nullptr) WriteKeys(*stores.keys);
}

void SnapshotWriter::WriteKeys(const store::Keyspace& keys) {
  // Strings with their expiry, the other values the keyspace holds (sets, lists, hashes, sorted
  // sets, streams), then the other types' expiries, once every key they name exists.
  keys.ForEach([&](const std::string& key, const store::KeyInfo& info) {
    if (info.type == store::KeyType::kString) {
      WriteString(key, info);
    } else if (store::HoldsValue(info.type)) {
      WriteRecord(MembersRecord(key, info));
    }
  });
  keys.ForEach([&](const std::string& key, const store::KeyInfo& info) {
    if (info.type == store::KeyType::kString || info.expire_at_ms == 0) return;
    WriteRecord(KeyExpire{key, static_cast<uint64_t>(info.expire_at_ms)});
  });
}

void SnapshotWriter::WriteRecord(const Mutation& m, uint8_t flags) {
  if (status_.ok()) {
    status_ = WriteSealed(*file_, bytes_, seed_, TypeOf(m), EncodePayload(m), db_, flags);
  }
  ++count_;
}

void SnapshotWriter::WriteSession(const std::string& sid, const LayerPlaces& places) {
  // A database's cold sessions wait until its hot ones are written, then follow a directory of
  // them, so a restart places them all from it without reading their records (one seek, not
  // one per layer).
  const bool any_cold =
      std::any_of(places.begin(), places.end(), [](const store::LayerPlace& p) { return p.cold; });
  if (any_cold) {
    cold_sessions_.emplace_back(sid, places);
  } else {
    WritePut(sid, places, 0);
  }
}

void SnapshotWriter::WritePut(const std::string& sid, const LayerPlaces& places, uint8_t flags) {
  SsmPut put{sid, {}};
  put.layers.reserve(places.size());
  for (const store::LayerPlace& p : places) {
    Bytes value = p.value;
    if (p.cold) {
      std::string read_error;
      if (!p.file->Read(p.offset, p.length, value, read_error)) {
        Fail(Status::IoError("copying a cold value: " + read_error));
        return;
      }
    }
    put.layers.emplace_back(p.layer, std::move(value));
  }
  const uint64_t record_at = bytes_;
  WriteRecord(put, flags);
  const std::vector<uint64_t> offsets = SsmPutValueOffsets(put);
  for (size_t i = 0; i < places.size(); ++i) {
    const store::LayerPlace& p = places[i];
    moved_.push_back(Moved{state_, sid, p.layer, p.file, p.offset,
                           p.file == nullptr ? p.value : Bytes(),
                           record_at + kRecordHeaderSize + offsets[i]});
  }
}

void SnapshotWriter::WriteColdSessions() {
  if (cold_sessions_.empty() || !status_.ok()) return cold_sessions_.clear();
  ColdDirectory directory;
  for (const auto& [sid, places] : cold_sessions_) {
    ColdEntry& e = directory.entries.emplace_back();
    e.sid = sid;
    for (const store::LayerPlace& p : places) {
      e.layers.emplace_back(p.layer, p.cold ? p.length : p.value.size());
    }
  }
  // A cold session stays cold across a restart: recovery will not read its values.
  WriteColdRegion(RecordType::kColdDirectory, directory, "cold record", "cold records",
                  [&](size_t i) {
                    WritePut(cold_sessions_[i].first, cold_sessions_[i].second, kRecordFlagCold);
                  });
  cold_sessions_.clear();
}

template <typename Directory>
void SnapshotWriter::WriteColdRegion(RecordType type, Directory& directory, std::string_view entry,
                                     std::string_view region,
                                     const std::function<void(size_t)>& write_entry) {
  // Offsets are fixed-width: the directory's size does not depend on them.
  uint64_t at = bytes_ + kRecordHeaderSize + Encoded(directory).size();
  for (auto& e : directory.entries) {
    e.record_offset = at;
    at += RecordsBytes(e);
  }
  directory.region_end = at;
  status_ = WriteSealed(*file_, bytes_, seed_, type, {Encoded(directory)}, db_);
  for (size_t i = 0; i < directory.entries.size() && status_.ok(); ++i) {
    if (bytes_ != directory.entries[i].record_offset) {
      status_ = Status::Internal(std::string(entry) + " " + std::to_string(i) + " written at " +
                                 std::to_string(bytes_) + ", its directory says " +
                                 std::to_string(directory.entries[i].record_offset));
      return;
    }
    write_entry(i);
  }
  if (status_.ok() && bytes_ != directory.region_end) {
    status_ = Status::Internal(std::string(region) + " end at " + std::to_string(bytes_) +
                               ", their directory says " + std::to_string(directory.region_end));
  }
}

void SnapshotWriter::WriteVectorSession(const std::string& sid,
                                        const store::VectorSessionInfo& info,
                                        const std::vector<store::LayerRead>& layers) {
  // A session with a cold layer waits until the database's hot sessions are written, then
  // follows a directory (type 17) with the others, its rows records flagged cold: a restart
  // creates it and places its rows from the directory without reading them.
  if (std::any_of(layers.begin(), layers.end(), [](const store::LayerRead& l) { return l.cold; })) {
    cold_vectors_.push_back(ColdVector{sid, info, layers});
  } else {
    WriteVectorRows(sid, info, layers, 0);
  }
}

std::vector<SnapshotWriter::RowsOut> SnapshotWriter::RowsRecordsOf(const store::LayerRead& layer) {
  std::vector<RowsOut> out;
  if (!layer.cold) {
    for (const store::RowRun& run : layer.runs) {
      out.push_back(RowsOut{layer.layer, run.start, run.rows.rows, run.rows.pieces, {}, false});
    }
    return out;
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
  return out;
}

void SnapshotWriter::WriteVectorRows(const std::string& sid, const store::VectorSessionInfo& info,
                                     const std::vector<store::LayerRead>& layers, uint8_t flags) {
  const auto tier = static_cast<uint32_t>(info.tier);
  WriteRecord(VCreate{sid, info.index, info.dim, tier});
  for (const store::LayerRead& layer : layers) {
    MovedRows placed{vectors_, sid, info.index, layer.layer, layer.version, {}};
    for (RowsOut& r : RowsRecordsOf(layer)) {
      if (r.from_disk) {
        try {
          r.pieces = vectors_->ReadPieces({r.cold}, info.row_bytes).pieces;
        } catch (const std::exception& e) {
          Fail(Status::IoError(std::string("copying cold rows: ") + e.what()));
          return;
        }
      }
      const uint64_t record_at = bytes_;
      WriteRecord(VStore{sid, layer.layer, r.start, r.rows, info.dim, tier, Blob{r.pieces}}, flags);
      placed.runs.push_back(
          store::PlacedRun{r.start, r.rows, record_at + kRecordHeaderSize + VStoreRowsOffset(sid)});
    }
    moved_rows_.push_back(std::move(placed));
  }
}

void SnapshotWriter::WriteColdVectors() {
  if (cold_vectors_.empty() || !status_.ok()) return cold_vectors_.clear();
  VectorColdDirectory directory;
  for (const ColdVector& v : cold_vectors_) {
    VectorColdEntry& e = directory.entries.emplace_back();
    e.sid = v.sid;
    e.index = v.info.index;
    e.dim = v.info.dim;
    e.tier = static_cast<uint32_t>(v.info.tier);
    for (const store::LayerRead& layer : v.layers) {
      for (const RowsOut& r : RowsRecordsOf(layer)) e.records.push_back({r.layer, r.start, r.rows});
    }
  }
  WriteColdRegion(RecordType::kVectorColdDirectory, directory, "cold V-store session",
                  "cold V-store records", [&](size_t i) {
                    const ColdVector& v = cold_vectors_[i];
                    WriteVectorRows(v.sid, v.info, v.layers, kRecordFlagCold);
                  });
  cold_vectors_.clear();
}

void SnapshotWriter::WriteString(const std::string& key, const store::KeyInfo& info) {
  // A cold value is copied from where it sits and its record flagged cold, so a restart keeps
  // it on disk; a large value's new place (hot or cold) is taken up once the snapshot is
  // durable, if the key still holds that value.
  if (!status_.ok()) return;
  StringSet record;
  try {
    record = StringRecord(key, info);
  } catch (const std::exception& e) {
    Fail(Status::IoError(std::string("copying a cold string: ") + e.what()));
    return;
  }
  const uint64_t record_at = bytes_;
  // A parked small string is in the cold index with its value in memory: written hot.
  const bool on_disk = info.place.file != nullptr;
  WriteRecord(record, on_disk ? kRecordFlagCold : 0);
  for (const StringValueAt& w : StringValueOffsets(record, store::KeyEntry::kInlineValueBelow)) {
    moved_strings_.push_back(MovedString{keys_, key, on_disk ? info.place.file : nullptr,
                                         info.place.offset, on_disk ? Bytes() : info.value,
                                         record_at + kRecordHeaderSize + w.offset});
  }
}

Status SnapshotWriter::Finish(const std::function<Status()>& before_rename) {
  Status status = std::move(status_);
  if (status.ok()) status = file_->Sync();
  file_.reset();
  if (status.ok()) status = before_rename();
  const std::string final_path = dir_ + "/" + kSnapshotName;
  Result<std::shared_ptr<store::ColdFile>> cold =
      status.ok() ? OpenColdFile(env_, temp_path_) : Status::Aborted("the snapshot failed");
  if (status.ok()) status = env_->Rename(temp_path_, final_path);
  if (status.ok()) status = env_->SyncDir(dir_);
  if (!status.ok()) {
    (void)env_->Remove(temp_path_);  // best effort: the next start removes it anyway
    return Status(status.code(), "snapshot failed: " + status.message());
  }
  if (cold.ok()) {
    TakeUpNewPlaces(*cold);
  } else {
    spdlog::warn("Snapshot values cannot serve the disk tier: {}", cold.status().message());
  }
  moved_.clear();
  moved_rows_.clear();
  moved_strings_.clear();
  return {};
}

void SnapshotWriter::TakeUpNewPlaces(const std::shared_ptr<store::ColdFile>& snapshot) {
  // The snapshot is durable: its copies become where the values sit, for values unchanged
  // since (the open handle reads it under its final name).
  snapshot->MarkDurable(store::ColdFile::kAllDurable);
  for (const Moved& m : moved_) {
    if (m.old_file != nullptr) {
      m.state->Repoint(m.sid, m.layer, m.old_file.get(), m.old_offset, snapshot, m.offset);
    } else {
      m.state->Place(m.sid, m.layer, m.unplaced.data(), snapshot, m.offset);
    }
  }
  for (const MovedRows& m : moved_rows_) {
    m.vectors->Repoint(m.sid, m.index, m.layer, m.version, m.runs, snapshot);
  }
  for (const MovedString& m : moved_strings_) {
    if (m.keys == nullptr) continue;
    if (m.old_file != nullptr) {
      m.keys->RepointString(m.key, m.old_file.get(), m.old_offset, snapshot, m.offset);
    } else {
      m.keys->PlaceString(m.key, m.unplaced.data(), snapshot, m.offset);
    }
  }
}

}  // namespace prefixd::persist
