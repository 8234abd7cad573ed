#include "store/row_places.h"

#include <algorithm>
#include <iterator>

namespace prefixd::store {

uint32_t RowPlaces::FileIndex(std::shared_ptr<const ColdFile> file) {
  for (size_t i = 0; i < files_.size(); ++i) {
    if (files_[i] == file) return static_cast<uint32_t>(i);
  }
  // A layer names a few files at once (the segments its writes went to, or one snapshot);
  // sweep before growing past a handful.
  if (files_.size() >= 8) {
    ForgetUnusedFiles();
    for (size_t i = 0; i < files_.size(); ++i) {
      if (files_[i] == file) return static_cast<uint32_t>(i);
    }
  }
  files_.push_back(std::move(file));
  return static_cast<uint32_t>(files_.size() - 1);
}

void RowPlaces::ForgetUnusedFiles() {
  std::vector<uint32_t> renumbered(files_.size(), UINT32_MAX);
  std::vector<std::shared_ptr<const ColdFile>> kept;
  for (Place& p : places_) {
    if (renumbered[p.file] == UINT32_MAX) {
      renumbered[p.file] = static_cast<uint32_t>(kept.size());
      kept.push_back(files_[p.file]);
    }
    p.file = renumbered[p.file];
  }
  files_.swap(kept);
}

void RowPlaces::Insert(uint64_t start, uint64_t rows, std::shared_ptr<const ColdFile> file,
                       uint64_t offset, size_t row_bytes) {
  if (rows == 0) return;
  const uint64_t end = start + rows;
  const uint32_t f = FileIndex(std::move(file));
  // The common case, rows appended in order: one push, or the last extent grows.
  if (places_.empty() || places_.back().start + places_.back().rows <= start) {
    if (!places_.empty()) {
      Place& last = places_.back();
      if (last.start + last.rows == start && last.file == f &&
          last.offset + last.rows * row_bytes == offset) {
        last.rows += rows;
        return;
      }
    }
    places_.push_back(Place{start, rows, offset, f});
    return;
  }
  // The extents [lo, hi) overlap [start, end); what they hold outside it is kept around the
  // new extent.
  auto lo = std::upper_bound(places_.begin(), places_.end(), start,
                             [](uint64_t row, const Place& p) { return row < p.start; });
  if (lo != places_.begin() && std::prev(lo)->start + std::prev(lo)->rows > start) --lo;
  auto hi = lo;
  while (hi != places_.end() && hi->start < end) ++hi;
  std::vector<Place> replacement;
  if (lo != hi && lo->start < start) {
    replacement.push_back(Place{lo->start, start - lo->start, lo->offset, lo->file});
  }
  replacement.push_back(Place{start, rows, offset, f});
  if (lo != hi) {
    const Place& last = *std::prev(hi);
    if (last.start + last.rows > end) {
      replacement.push_back(Place{end, last.start + last.rows - end,
                                  last.offset + (end - last.start) * row_bytes, last.file});
    }
  }
  const auto at = places_.erase(lo, hi);
  places_.insert(at, replacement.begin(), replacement.end());
}

std::vector<RowPiece> RowPlaces::Pieces(uint64_t start, uint64_t end, uint64_t length,
                                        size_t row_bytes) const {
  std::vector<RowPiece> pieces;
  const auto zeros = [&](uint64_t n) {
    if (n == 0) return;
    if (!pieces.empty() && pieces.back().file == nullptr) {
      pieces.back().rows += n;
    } else {
      pieces.push_back(RowPiece{n, nullptr, 0});
    }
  };
  uint64_t row = start;
  const uint64_t stored_end = std::min(end, length);
  auto it = std::upper_bound(places_.begin(), places_.end(), start,
                             [](uint64_t r, const Place& p) { return r < p.start; });
  if (it != places_.begin()) --it;
  for (; it != places_.end() && it->start < stored_end && row < stored_end; ++it) {
    const uint64_t e_end = std::min(stored_end, it->start + it->rows);
    if (e_end <= row) continue;
    const uint64_t from = std::max(row, it->start);
    zeros(from - row);
    pieces.push_back(
        RowPiece{e_end - from, files_[it->file], it->offset + (from - it->start) * row_bytes});
    row = e_end;
  }
  zeros(end > row ? end - row : 0);
  return pieces;
}

std::vector<std::pair<uint64_t, RowPiece>> RowPlaces::Extents() const {
  std::vector<std::pair<uint64_t, RowPiece>> out;
  out.reserve(places_.size());
  for (const Place& p : places_)
    out.emplace_back(p.start, RowPiece{p.rows, files_[p.file], p.offset});
  return out;
}

bool RowPlaces::Durable(size_t row_bytes) const {
  return std::all_of(places_.begin(), places_.end(), [&](const Place& p) {
    return p.offset + p.rows * row_bytes <= files_[p.file]->durable_end();
  });
}

uint64_t RowPlaces::DiskBytes(size_t row_bytes) const {
  uint64_t total = 0;
  for (const Place& p : places_) total += p.rows * row_bytes;
  return total;
}

void RowPlaces::Clear() {
  std::vector<Place>().swap(places_);
  std::vector<std::shared_ptr<const ColdFile>>().swap(files_);
}

}  // namespace prefixd::store
