// Recovery: a data directory's start: it drops an incomplete snapshot, loads the snapshot (its
// cold entries placed where they sit, not read), replays the log segments after it (cutting a
// torn tail, or skipping damage when told to) into the stores, and says where the log goes on.
// It runs once, on the thread that opens the directory, before anything is served.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "persist/durability_options.h"
#include "persist/env.h"
#include "persist/log_writer.h"
#include "persist/mutation.h"
#include "persist/record_reader.h"
#include "persist/store_set.h"
#include "prefixd/status.h"
#include "store/cold_file.h"

namespace prefixd::persist {

// The snapshot's name in the data directory.
inline constexpr const char* kSnapshotName = "snapshot.pds";

class Recovery {
 public:
  Recovery(const DurabilityOptions& options, Env* env, const StoreSet& stores)
      : options_(options), env_(env), stores_(stores) {}

  // Loads the snapshot and replays the log. An error names the file and offset of any damage it
  // could not pass.
  Status Run();

  // After Run: where the log goes on, and what was read.
  uint64_t next_lsn() const { return next_lsn_; }
  uint64_t next_sequence() const { return next_sequence_; }
  std::vector<SegmentInfo>& segments() { return segments_; }
  uint64_t records() const { return records_; }
  uint64_t bytes() const { return bytes_; }
  double seconds() const { return seconds_; }
  uint64_t snapshot_bytes() const { return snapshot_bytes_; }

 private:
  Status LoadSnapshot(const std::string& path, uint64_t& base_lsn);
  Status ReplaySegments(uint64_t base_lsn);
  // Decodes, checks and applies one record. `file`: the file being read, where its values stay
  // reachable (the disk tier).
  Status Replay(const Record& record, Mutation& m, const std::shared_ptr<store::ColdFile>& file);
  // The values of an applied record sit in `file`: the stores learn where (the disk tier). True
  // when any did.
  bool PlaceValues(const Record& record, const Mutation& m, const Outcome& outcome,
                   const std::shared_ptr<store::ColdFile>& file);
  // A snapshot's cold record (flagged cold, its payload not read): its fields are read from the
  // file and its values placed where they sit, in the database its header names.
  Status LoadColdRecord(RecordReader& reader, const Record& record,
                        const std::shared_ptr<store::ColdFile>& file);
  Status LoadColdPut(RecordReader& reader, const Record& record,
                     const std::shared_ptr<store::ColdFile>& file);
  Status LoadColdString(RecordReader& reader, const Record& record,
                        const std::shared_ptr<store::ColdFile>& file);
  Status LoadColdRows(RecordReader& reader, const Record& record,
                      const std::shared_ptr<store::ColdFile>& file);
  // A snapshot's cold directory: places every cold layer it lists in the database its header
  // names and moves `reader` past the records it lists (`entries` of them); with no `file`,
  // checks it and leaves those records to be read whole.
  Status LoadColdDirectory(RecordReader& reader, const Record& record,
                           const std::shared_ptr<store::ColdFile>& file, uint64_t& entries);
  // A snapshot's V-store cold directory: creates every listed session and places its rows, as
  // LoadColdDirectory (`records` of them).
  Status LoadVectorColdDirectory(RecordReader& reader, const Record& record,
                                 const std::shared_ptr<store::ColdFile>& file, uint64_t& records);
  // The keys of the V-store sessions placed cold (and of registrations whose halves both are) go
  // to the cold index, once the whole snapshot is read.
  void KeepColdVectorKeys();
  // `sid` of database `db` is a key of `type` in the disk tier.
  void KeepColdKey(uint16_t db, const std::string& sid, store::KeyType type);
  // Truncates `path` to `size` and syncs it.
  Status CutFile(const std::string& path, uint64_t size);

  const DurabilityOptions& options_;
  Env* env_;
  const StoreSet& stores_;
  std::vector<std::pair<uint16_t, std::string>> cold_vector_sessions_;
  uint64_t next_lsn_ = 1;
  uint64_t next_sequence_ = 1;
  std::vector<SegmentInfo> segments_;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
  double seconds_ = 0;
  uint64_t snapshot_bytes_ = 0;
};

}  // namespace prefixd::persist
