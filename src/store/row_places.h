// RowPlaces: where the rows of one V-store layer sit on disk (the disk tier), as non-overlapping
// extents `first row → (rows, file, offset)` in row order, later writes over earlier ones. 32
// bytes per extent in one sorted vector (files are named by a small per-layer index), so a layer
// appended in row order costs one push per write. Not thread-safe: its owner (a VectorStore
// layer, under its session lock) serialises every call.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "store/cold_file.h"

namespace prefixd::store {

// Consecutive rows on disk (`file` set) or zero rows (no file).
struct RowPiece {
  uint64_t rows = 0;
  std::shared_ptr<const ColdFile> file;
  uint64_t offset = 0;
};

class RowPlaces {
 public:
  // Every call names the layer's row size in bytes.
  // Rows [start, start + rows) now sit at `offset` of `file`; rows appended right after the
  // previous extent in the same file extend it.
  void Insert(uint64_t start, uint64_t rows, std::shared_ptr<const ColdFile> file, uint64_t offset,
              size_t row_bytes);
  // Rows [start, end) as pieces in row order: rows no extent covers, and rows at or past
  // `length`, are zero pieces.
  std::vector<RowPiece> Pieces(uint64_t start, uint64_t end, uint64_t length,
                               size_t row_bytes) const;
  // Every extent, in row order, as (first row, piece).
  std::vector<std::pair<uint64_t, RowPiece>> Extents() const;
  // Every extent ends before its file's durable end.
  bool Durable(size_t row_bytes) const;
  // The bytes the extents name on disk.
  uint64_t DiskBytes(size_t row_bytes) const;
  size_t size() const { return places_.size(); }
  // Memory held beyond the object itself.
  uint64_t MemoryBytes() const {
    return places_.capacity() * sizeof(Place) + files_.capacity() * sizeof(files_[0]);
  }
  void Clear();

 private:
  struct Place {
    uint64_t start = 0;
    uint64_t rows = 0;
    uint64_t offset = 0;
    uint32_t file = 0;  // index in files_
  };
  uint32_t FileIndex(std::shared_ptr<const ColdFile> file);
  // Drops files no extent names any more (a removed log segment is closed once none does).
  void ForgetUnusedFiles();

  std::vector<Place> places_;
  std::vector<std::shared_ptr<const ColdFile>> files_;
};

}  // namespace prefixd::store
