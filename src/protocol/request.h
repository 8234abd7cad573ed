// Request: one parsed client command, its arguments as byte views. Small arguments live in an
// arena owned by the request; large ones are separate Bytes read straight from the socket, so a
// handler can keep them without a copy. Owned by one connection's thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bytes.h"

namespace prefixd::protocol {

class Request {
 public:
  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  std::string_view operator[](size_t i) const {
    const Slot& s = slots_[i];
    if (s.large) return large_[s.offset].view();
    return std::string_view(arena_.data() + s.offset, s.length);
  }

  // The argument as shareable Bytes: the socket's own buffer for large arguments, a copy of the
  // arena bytes for small ones.
  Bytes TakeBytes(size_t i) const;

  // True when the request came as an inline (telnet-style) line rather than a multibulk.
  bool is_inline() const { return inline_; }
  // Sum of argument lengths, for accounting.
  size_t payload_bytes() const { return payload_bytes_; }

  void Clear();
  // Exchanges every argument and buffer with `other` (the parser hands a finished request over).
  void swap(Request& other) noexcept {
    arena_.swap(other.arena_);
    slots_.swap(other.slots_);
    large_.swap(other.large_);
    std::swap(payload_bytes_, other.payload_bytes_);
    std::swap(inline_, other.inline_);
  }
  // Frees storage a past request grew beyond everyday sizes (kept otherwise, to be reused).
  // Returns the bytes freed.
  size_t ReleaseIdleMemory();
  // Heap bytes the request holds: arena and slot capacity plus its large arguments.
  size_t allocated_bytes() const;
  // The arena and slot table are freed between requests once past these.
  static constexpr size_t kIdleArenaCapacity = 4096;
  static constexpr size_t kIdleSlotCapacity = 64;

  // Builders for the parser (and for tests building requests by hand).
  // Inline: the parser calls them for every argument of every request.
  void AddSmall(std::string_view arg) {
    BeginSmall(arg.size());
    AppendSmall(arg);
  }
  // Starts a small argument of `length` bytes whose contents are appended later with AppendSmall.
  void BeginSmall(size_t length) {
    slots_.push_back(Slot{static_cast<uint32_t>(arena_.size()), 0, static_cast<uint32_t>(length)});
    payload_bytes_ += length;
  }
  void AppendSmall(std::string_view part) { arena_.append(part); }
  void AddLarge(Bytes arg);
  // Argument `i` of `other`, appended: a small one copied into this request's arena, a large one
  // shared (SHM.CALL builds the command it carries from its own arguments).
  void AddFrom(const Request& other, size_t i);
  void set_inline(bool value) { inline_ = value; }

 private:
  struct Slot {
    uint32_t offset;  // into arena_, or index into large_ when large
    uint32_t large : 1;
    uint32_t length : 31;  // unused for large slots
  };
  std::string arena_;
  std::vector<Slot> slots_;
  std::vector<Bytes> large_;
  size_t payload_bytes_ = 0;
  bool inline_ = false;
};

}  // namespace prefixd::protocol
