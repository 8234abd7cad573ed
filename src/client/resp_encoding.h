// RESP request encoding for the client: requests as arrays of bulk strings (framed by
// protocol/command_encoding, the server's own encoder), queued in a RequestBuffer and sent with
// one gather write. Owned by one connection (one thread at a time).
//
// Small arguments are copied into the buffer; large ones (blobs) are referenced and go to the
// socket from the caller's memory, so they must stay alive until Send() returns.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixd/status.h"

namespace prefixd::client_internal {

// A number rendered for the wire; lives on the caller's stack while a request is built.
class Decimal {
 public:
  explicit Decimal(uint64_t value);
  std::string_view view() const { return {buf_.data(), len_}; }

 private:
  std::array<char, 24> buf_{};
  size_t len_ = 0;
};

// Milliseconds as the shortest decimal that reads back as the same double.
std::string MillisText(double ms);

std::string ErrnoText(int err);

class RequestBuffer {
 public:
  void Add(std::span<const std::string_view> args);

  bool empty() const { return pieces_.empty(); }

  void Clear() {
    inline_.clear();
    pieces_.clear();
  }

  // Writes every queued request to `fd`, then clears the buffer.
  Status Send(int fd);

 private:
  struct Piece {
    const char* external;  // null: `size` bytes of inline_ from `offset`
    size_t offset;
    size_t size;
  };

  Status Write(int fd);
  void AppendInline(std::string_view text);

  std::string inline_;
  std::vector<Piece> pieces_;
};

}  // namespace prefixd::client_internal
