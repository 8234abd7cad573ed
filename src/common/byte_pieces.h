// BytePieces: the buffers of one logical value in order, as a vector's subset of operations, with
// a single buffer (most values: a string, a member list) held in place, so a record of a small
// write allocates nothing for its list. Plain data; one thread at a time, as any container.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

#include "common/bytes.h"

namespace prefixd {

class BytePieces {
 public:
  BytePieces() = default;
  BytePieces(std::initializer_list<Bytes> pieces) { Assign(pieces.begin(), pieces.end()); }
  BytePieces(const std::vector<Bytes>& pieces) { Assign(pieces.begin(), pieces.end()); }
  BytePieces(std::vector<Bytes>&& pieces) {
    if (pieces.size() == 1) {
      one_ = std::move(pieces.front());
      has_one_ = true;
    } else {
      many_ = std::move(pieces);
    }
  }

  BytePieces(const BytePieces&) = default;
  BytePieces& operator=(const BytePieces&) = default;
  // A moved-from list is empty, as a moved-from vector is in practice.
  BytePieces(BytePieces&& other) noexcept
      : one_(std::move(other.one_)),
        has_one_(std::exchange(other.has_one_, false)),
        many_(std::move(other.many_)) {
    other.many_.clear();
  }
  BytePieces& operator=(BytePieces&& other) noexcept {
    one_ = std::move(other.one_);
    has_one_ = std::exchange(other.has_one_, false);
    many_ = std::move(other.many_);
    other.many_.clear();
    return *this;
  }

  size_t size() const { return has_one_ ? 1 : many_.size(); }
  bool empty() const { return size() == 0; }
  Bytes* begin() { return has_one_ ? &one_ : many_.data(); }
  Bytes* end() { return begin() + size(); }
  const Bytes* begin() const { return has_one_ ? &one_ : many_.data(); }
  const Bytes* end() const { return begin() + size(); }
  Bytes& operator[](size_t i) { return begin()[i]; }
  const Bytes& operator[](size_t i) const { return begin()[i]; }
  Bytes& front() { return *begin(); }
  const Bytes& front() const { return *begin(); }
  Bytes& back() { return end()[-1]; }
  const Bytes& back() const { return end()[-1]; }

  void clear() {
    one_ = Bytes();
    has_one_ = false;
    many_.clear();
  }
  Bytes& emplace_back() { return push_back(Bytes()); }
  Bytes& push_back(Bytes piece) {
    if (empty()) {
      one_ = std::move(piece);
      has_one_ = true;
      return one_;
    }
    if (has_one_) {  // a second piece: both move to the vector, so the pieces stay contiguous
      many_.push_back(std::move(one_));
      one_ = Bytes();
      has_one_ = false;
    }
    return many_.emplace_back(std::move(piece));
  }

 private:
  template <class It>
  void Assign(It first, It last) {
    if (last - first == 1) {
      one_ = *first;
      has_one_ = true;
    } else {
      many_.assign(first, last);
    }
  }

  Bytes one_;
  bool has_one_ = false;
  std::vector<Bytes> many_;  // the pieces when there are none or more than one
};

}  // namespace prefixd
