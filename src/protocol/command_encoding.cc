#include "protocol/command_encoding.h"

#include <charconv>

namespace prefixd::protocol {

FrameHeader::FrameHeader(char type, size_t n) {
  buf_[0] = type;
  char* end = std::to_chars(buf_.data() + 1, buf_.data() + buf_.size() - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  len_ = static_cast<size_t>(end - buf_.data());
}

void AppendBulk(std::string& out, std::string_view arg) {
  out.append(FrameHeader::Bulk(arg.size()).view());
  out.append(arg);
  out += "\r\n";
}

std::string EncodeCommand(std::span<const std::string_view> argv) {
  // One allocation: each argument's header and CRLF take at most 24 bytes.
  size_t size = 16;
  for (std::string_view a : argv) size += a.size() + 24;
  std::string out;
  out.reserve(size);
  out.append(FrameHeader::Array(argv.size()).view());
  for (std::string_view a : argv) AppendBulk(out, a);
  return out;
}

}  // namespace prefixd::protocol
