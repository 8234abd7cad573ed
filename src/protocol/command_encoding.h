// RESP command encoding: a command as a client sends it, an array of bulk strings. The one
// encoder of every sender: the client library, replication's stream and MIGRATE. Pure functions
// and a value type; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace prefixd::protocol {

// A frame's header, on the caller's stack: `*<count>\r\n` before a command's arguments,
// `$<size>\r\n` before each argument's bytes (which CRLF ends). For a sender that queues an
// argument's bytes by reference instead of copying them.
class FrameHeader {
 public:
  static FrameHeader Array(size_t count) { return FrameHeader('*', count); }
  static FrameHeader Bulk(size_t size) { return FrameHeader('$', size); }
  std::string_view view() const { return {buf_.data(), len_}; }

 private:
  FrameHeader(char type, size_t n);

  std::array<char, 24> buf_{};  // a type byte, up to 20 digits, CRLF
  size_t len_ = 0;
};

// Appends one argument whole: its header, its bytes, CRLF.
void AppendBulk(std::string& out, std::string_view arg);

// A command whole, arguments copied.
std::string EncodeCommand(std::span<const std::string_view> argv);

}  // namespace prefixd::protocol
