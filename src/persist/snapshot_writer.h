// SnapshotWriter: one snapshot of every database, written to a temporary file on the calling
// thread (SAVE's, or BGSAVE's and the automatic rewrite's background thread) while the stores
// go on serving, then synced and renamed into place; once it is durable, the values it copied
// take it as where they sit (the disk tier). It reads the stores through their own locks and
// owns nothing after Write returns. When a snapshot is taken, and the log it lets Durability
// cut, are Durability's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "persist/env.h"
#include "persist/mutation.h"
#include "persist/store_set.h"
#include "prefixd/status.h"
#include "store/cold_file.h"
#include "store/keyspace.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::persist {

class SnapshotWriter {
 public:
  SnapshotWriter(Env* env, std::string dir, const StoreSet& stores)
      : env_(env), dir_(std::move(dir)), stores_(stores) {}
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Writes the snapshot of everything before `base_lsn`; `before_rename` runs once the file is
  // synced and before it takes effect (Durability syncs the log groups it may hold part of).
  Status Write(uint64_t base_lsn, const std::function<Status()>& before_rename);

  // After Write: the records it holds (entries) and its size.
  uint64_t count() const { return count_; }
  uint64_t bytes() const { return bytes_; }

 private:
  // One SSM session's layers, in memory or where they sit on disk.
  using LayerPlaces = std::vector<store::LayerPlace>;
  // One rows record: its rows in memory (`pieces`), or where they sit on disk (`cold`).
  struct RowsOut {
    uint32_t layer;
    uint64_t start, rows;
    std::vector<Bytes> pieces;
    store::RowPiece cold;  // read when `from_disk` (a zero piece for the row that ends a layer)
    bool from_disk = false;
  };

  // The steps of Write, in order.
  Status Begin(uint64_t base_lsn);
  void WriteDatabase(uint16_t db, const Stores& stores);
  Status Finish(const std::function<Status()>& before_rename);
  void TakeUpNewPlaces(const std::shared_ptr<store::ColdFile>& snapshot);

  // One record (flagged cold or not) in the database being written.
  void WriteRecord(const Mutation& m, uint8_t flags = 0);
  // SSM sessions: hot ones at once, cold ones after a directory of them (WriteColdSessions).
  void WriteSession(const std::string& sid, const LayerPlaces& places);
  void WritePut(const std::string& sid, const LayerPlaces& places, uint8_t flags);
  void WriteColdSessions();
  // V-store sessions, as SSM sessions (a create, then a rows record per stored run).
  void WriteVectorSession(const std::string& sid, const store::VectorSessionInfo& info,
                          const std::vector<store::LayerRead>& layers);
  void WriteVectorRows(const std::string& sid, const store::VectorSessionInfo& info,
                       const std::vector<store::LayerRead>& layers, uint8_t flags);
  void WriteColdVectors();
  // A cold directory (a record of `type`), its entries' record offsets laid out first, then the
  // records it lists, `write_entry(i)` writing the i-th; one not where the directory says fails
  // the snapshot, its error naming an entry's records `entry` and all of them `region`.
  template <typename Directory>
  void WriteColdRegion(RecordType type, Directory& directory, std::string_view entry,
                       std::string_view region, const std::function<void(size_t)>& write_entry);
  // A hot layer's rows records are its stored runs; a cold one's, its extents, then a zero row
  // at the end of the layer when no extent reaches it (as StoredRuns does).
  static std::vector<RowsOut> RowsRecordsOf(const store::LayerRead& layer);
  void WriteString(const std::string& key, const store::KeyInfo& info);
  // Keys that are neither strings nor in the other stores, then every other key's expiry.
  void WriteKeys(const store::Keyspace& keys);
  // Sets status_ once: the first failure is the snapshot's.
  void Fail(Status status);

  Env* env_;
  std::string dir_;
  const StoreSet& stores_;
  std::string temp_path_;
  std::unique_ptr<File> file_;
  uint64_t seed_ = 0;
  Status status_;
  uint64_t count_ = 0, bytes_ = 0;
  uint16_t db_ = 0;                     // the database whose records are being written
  store::StateStore* state_ = nullptr;  // and its stores
  store::VectorStore* vectors_ = nullptr;
  store::Keyspace* keys_ = nullptr;

  // Cold layers are copied from the files they sit in; every layer's new place is recorded
  // and taken up once the snapshot is durable (the held handles keep each identity unique).
  // A layer with a place is named by it: a file (held open here) and an offset hold one value
  // only. A layer not placed yet is named by its buffer, held until then. Each names the store
  // it was read from, which SWAPDB never replaces (it exchanges whole databases).
  struct Moved {
    store::StateStore* state;
    std::string sid;
    uint32_t layer;
    std::shared_ptr<const store::ColdFile> old_file;
    uint64_t old_offset;
    Bytes unplaced;
    uint64_t offset;  // of the value in the snapshot
  };
  std::vector<Moved> moved_;
  // V-store runs: taken up by their layer once the snapshot is durable if the layer was not
  // written since (its version).
  struct MovedRows {
    store::VectorStore* vectors;
    std::string sid;
    uint64_t index;
    uint32_t layer;
    uint64_t version;
    std::vector<store::PlacedRun> runs;
  };
  std::vector<MovedRows> moved_rows_;
  // Strings: a large value's new place (hot or cold), taken up if the key still holds it.
  struct MovedString {
    store::Keyspace* keys;
    std::string key;
    std::shared_ptr<const store::ColdFile> old_file;  // a cold value's place
    uint64_t old_offset;
    Bytes unplaced;   // a hot value's buffer
    uint64_t offset;  // of the value in the snapshot
  };
  std::vector<MovedString> moved_strings_;
  // A database's sessions with a cold layer, written after its hot ones.
  std::vector<std::pair<std::string, LayerPlaces>> cold_sessions_;
  struct ColdVector {
    std::string sid;
    store::VectorSessionInfo info;
    std::vector<store::LayerRead> layers;
  };
  std::vector<ColdVector> cold_vectors_;
};

}  // namespace prefixd::persist
