#include "protocol/reply_writer.h"

#include <charconv>

#include "common/numbers.h"

namespace prefixd::protocol {

std::string& ReplyWriter::Tail() {
  if (pieces_.empty() || pieces_.back().is_reference) pieces_.emplace_back();
  return pieces_.back().owned;
}

void ReplyWriter::Append(std::string_view bytes) {
  Tail().append(bytes);
  pending_bytes_ += bytes.size();
  owned_bytes_ += bytes.size();
}

void ReplyWriter::Header(char type, int64_t n) {
  char buf[24];
  buf[0] = type;
  auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
  end[0] = '\r';
  end[1] = '\n';
  Append(std::string_view(buf, static_cast<size_t>(end + 2 - buf)));
}

void ReplyWriter::Simple(std::string_view text) {
  std::string& t = Tail();
  size_t before = t.size();
  t.push_back('+');
  t.append(text);
  t.append("\r\n");
  pending_bytes_ += t.size() - before;
  owned_bytes_ += t.size() - before;
}

void ReplyWriter::Error(std::string_view message) {
  std::string& t = Tail();
  size_t before = t.size();
  t.push_back('-');
  for (char c : message) t.push_back(c == '\r' || c == '\n' ? ' ' : c);
  t.append("\r\n");
  pending_bytes_ += t.size() - before;
  owned_bytes_ += t.size() - before;
}

void ReplyWriter::Integer(int64_t value) { Header(':', value); }

void ReplyWriter::Bulk(std::string_view value) {
  Header('$', static_cast<int64_t>(value.size()));
  Append(value);
  Append("\r\n");
}

void ReplyWriter::Bulk(const Bytes& value) {
  if (value.size() < kReferenceThreshold) return Bulk(value.view());
  Header('$', static_cast<int64_t>(value.size()));
  Piece p;
  p.referenced = value;
  p.is_reference = true;
  pieces_.push_back(std::move(p));
  pending_bytes_ += value.size();
  Append("\r\n");
}

void ReplyWriter::BulkPieces(std::span<const Bytes> pieces) {
  size_t total = 0;
  for (const Bytes& piece : pieces) total += piece.size();
  Header('$', static_cast<int64_t>(total));
  for (const Bytes& piece : pieces) {
    if (piece.size() < kReferenceThreshold) {
      Append(piece.view());
      continue;
    }
    Piece p;
    p.referenced = piece;
    p.is_reference = true;
    pieces_.push_back(std::move(p));
    pending_bytes_ += piece.size();
  }
  Append("\r\n");
}

void ReplyWriter::Null() { Append(protocol_ >= 3 ? "_\r\n" : "$-1\r\n"); }
void ReplyWriter::NullArray() { Append(protocol_ >= 3 ? "_\r\n" : "*-1\r\n"); }
void ReplyWriter::ArrayLen(size_t n) { Header('*', static_cast<int64_t>(n)); }

void ReplyWriter::MapLen(size_t n) {
  if (protocol_ >= 3) return Header('%', static_cast<int64_t>(n));
  Header('*', static_cast<int64_t>(2 * n));
}

void ReplyWriter::SetLen(size_t n) { Header(protocol_ >= 3 ? '~' : '*', static_cast<int64_t>(n)); }

void ReplyWriter::Double(double value) {
  std::string text = FormatDouble(value);
  if (protocol_ < 3) return Bulk(text);
  Append(",");
  Append(text);
  Append("\r\n");
}

void ReplyWriter::Bool(bool value) {
  if (protocol_ < 3) return Integer(value ? 1 : 0);
  Append(value ? "#t\r\n" : "#f\r\n");
}

void ReplyWriter::Verbatim(std::string_view text, std::string_view format) {
  if (protocol_ < 3) return Bulk(text);
  Header('=', static_cast<int64_t>(text.size() + format.size() + 1));
  Append(format);
  Append(":");
  Append(text);
  Append("\r\n");
}

void ReplyWriter::Raw(std::string_view resp) { Append(resp); }

std::vector<std::span<const uint8_t>> ReplyWriter::Buffers() const {
  std::vector<std::span<const uint8_t>> out;
  out.reserve(pieces_.size());
  for (const Piece& p : pieces_) {
    if (p.is_reference) {
      out.emplace_back(p.referenced.data(), p.referenced.size());
    } else if (!p.owned.empty()) {
      out.emplace_back(reinterpret_cast<const uint8_t*>(p.owned.data()), p.owned.size());
    }
  }
  return out;
}

ReplyWriter::Mark ReplyWriter::GetMark() const {
  Mark m{pieces_.size(), 0, pending_bytes_, owned_bytes_};
  if (!pieces_.empty() && !pieces_.back().is_reference) m.tail_size = pieces_.back().owned.size();
  return m;
}

void ReplyWriter::RewindTo(const Mark& mark) {
  pieces_.resize(mark.pieces);
  if (!pieces_.empty() && !pieces_.back().is_reference) {
    pieces_.back().owned.resize(mark.tail_size);
    pieces_.back().owned.shrink_to_fit();
  }
  pending_bytes_ = mark.pending_bytes;
  owned_bytes_ = mark.owned_bytes;
}

void ReplyWriter::Clear() {
  // Keep the first owned chunk's capacity for the next batch of replies.
  if (!pieces_.empty() && !pieces_.front().is_reference) {
    pieces_.resize(1);
    pieces_.front().owned.clear();
  } else {
    pieces_.clear();
  }
  pending_bytes_ = 0;
  owned_bytes_ = 0;
}

}  // namespace prefixd::protocol
