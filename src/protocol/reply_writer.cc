#include "protocol/reply_writer.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "common/numbers.h"

namespace prefixd::protocol {

std::string& ReplyWriter::Tail() {
  if (pieces_.empty() || pieces_.back().kind != Piece::Kind::kOwned ||
      pieces_.back().owned.size() >= kOwnedChunk) {
    pieces_.emplace_back();
  }
  return pieces_.back().owned;
}

void ReplyWriter::Reference(const Bytes& value) {
  // Slices of one buffer side by side (a run of shared zero rows) pin it once.
  const bool same_buffer = !pieces_.empty() && pieces_.back().kind == Piece::Kind::kReference &&
                           pieces_.back().referenced.SharesStorage(value);
  if (!same_buffer) referenced_bytes_ += value.size();
  Piece p;
  p.referenced = value;
  p.kind = Piece::Kind::kReference;
  pieces_.push_back(std::move(p));
  pending_bytes_ += value.size();
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
  ++error_count_;
  last_error_code_.assign(message.substr(0, std::min(message.find(' '), size_t{64})));
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
  // A small value (most GETs) is framed in one buffer and appended once.
  constexpr size_t kFramedBelow = 232;
  if (value.size() < kFramedBelow) {
    char framed[kFramedBelow + 24];
    framed[0] = '$';
    char* at = std::to_chars(framed + 1, framed + 24, value.size()).ptr;
    *at++ = '\r';
    *at++ = '\n';
    if (!value.empty()) std::memcpy(at, value.data(), value.size());
    at += value.size();
    *at++ = '\r';
    *at++ = '\n';
    return Append(std::string_view(framed, static_cast<size_t>(at - framed)));
  }
  Header('$', static_cast<int64_t>(value.size()));
  Append(value);
  Append("\r\n");
}

void ReplyWriter::Bulk(const Bytes& value) {
  if (value.size() < kReferenceThreshold) return Bulk(value.view());
  Header('$', static_cast<int64_t>(value.size()));
  Reference(value);
  Append("\r\n");
}

void ReplyWriter::BulkPieces(std::span<const Bytes> pieces) {
  size_t total = 0;
  for (const Bytes& piece : pieces) total += piece.size();
  Header('$', static_cast<int64_t>(total));
  for (const Bytes& piece : pieces) {
    if (piece.size() < kReferenceThreshold) {
      Append(piece.view());
    } else {
      Reference(piece);
    }
  }
  Append("\r\n");
}

void ReplyWriter::BulkProduced(uint64_t size, std::unique_ptr<ReplyProducer> producer) {
  Header('$', static_cast<int64_t>(size));
  if (size > 0) {
    Piece p;
    p.kind = Piece::Kind::kProduced;
    p.produced_size = size;
    referenced_bytes_ += producer->pinned_bytes();
    p.producer = std::move(producer);
    pieces_.push_back(std::move(p));
    pending_bytes_ += size;
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
    if (p.kind == Piece::Kind::kReference) {
      out.emplace_back(p.referenced.data(), p.referenced.size());
    } else if (p.kind == Piece::Kind::kOwned && !p.owned.empty()) {
      out.emplace_back(reinterpret_cast<const uint8_t*>(p.owned.data()), p.owned.size());
    }
  }
  return out;
}

bool ReplyWriter::NextWrite(std::vector<std::span<const uint8_t>>& out, FileSend* file) {
  out.clear();
  if (file != nullptr) *file = FileSend{};
  sending_.reset();
  while (next_piece_ < pieces_.size() && out.size() < kMaxRun) {
    Piece& p = pieces_[next_piece_];
    if (file != nullptr && p.kind == Piece::Kind::kProduced && produced_ == 0 &&
        p.producer->file_descriptor() >= 0) {
      if (!out.empty()) return true;  // the run before it goes first
      *file = FileSend{p.producer.get(), p.producer->file_descriptor(), p.producer->file_offset(),
                       p.produced_size};
      referenced_bytes_ -= p.producer->pinned_bytes();
      sending_ = std::move(p.producer);
      ++next_piece_;
      return true;
    }
    if (p.kind == Piece::Kind::kOwned) {
      if (!p.owned.empty()) {
        out.emplace_back(reinterpret_cast<const uint8_t*>(p.owned.data()), p.owned.size());
      }
    } else if (p.kind == Piece::Kind::kReference) {
      out.emplace_back(p.referenced.data(), p.referenced.size());
    } else {
      const auto n =
          static_cast<size_t>(std::min<uint64_t>(kProduceWindow, p.produced_size - produced_));
      if (scratch_.size() < n) scratch_.resize(n);
      p.producer->Produce(std::span<uint8_t>(scratch_.data(), n));
      out.emplace_back(scratch_.data(), n);
      produced_ += n;
      if (produced_ == p.produced_size) {
        // Done: what it pinned can go now rather than when the whole batch is written.
        referenced_bytes_ -= p.producer->pinned_bytes();
        p.producer.reset();
        produced_ = 0;
        ++next_piece_;
      }
      return true;  // the scratch buffer is reused by the next call: write this run first
    }
    ++next_piece_;
  }
  return !out.empty();
}

ReplyWriter::Mark ReplyWriter::GetMark() const {
  Mark m{pieces_.size(), 0, pending_bytes_, owned_bytes_, referenced_bytes_};
  if (!pieces_.empty() && pieces_.back().kind == Piece::Kind::kOwned) {
    m.tail_size = pieces_.back().owned.size();
  }
  return m;
}

void ReplyWriter::RewindTo(const Mark& mark) {
  // Dropping the pieces queued since the mark destroys their producers and Bytes handles, which
  // releases what they pinned; the counters go back to what they were, as nothing queued since
  // was handed to NextWrite (writes happen between batches, rewinds within one).
  pieces_.resize(mark.pieces);
  if (!pieces_.empty() && pieces_.back().kind == Piece::Kind::kOwned) {
    std::string& tail = pieces_.back().owned;
    tail.resize(mark.tail_size);
    // A partial reply may have grown the tail far past a chunk (one large copied bulk).
    if (tail.capacity() > kOwnedChunk) tail.shrink_to_fit();
  }
  pending_bytes_ = mark.pending_bytes;
  owned_bytes_ = mark.owned_bytes;
  referenced_bytes_ = mark.referenced_bytes;
}

size_t ReplyWriter::Clear() {
  sending_.reset();
  size_t freed = scratch_.capacity();
  std::vector<uint8_t>().swap(scratch_);
  // Keep a small first owned chunk for the next batch of replies; free everything else.
  const bool keep_first = !pieces_.empty() && pieces_.front().kind == Piece::Kind::kOwned &&
                          pieces_.front().owned.capacity() <= kKeptChunk;
  for (size_t i = keep_first ? 1 : 0; i < pieces_.size(); ++i) freed += pieces_[i].owned.capacity();
  if (keep_first) {
    pieces_.resize(1);
    pieces_.front().owned.clear();
  } else {
    pieces_.clear();
  }
  if (pieces_.capacity() > 16) {
    freed += pieces_.capacity() * sizeof(Piece);
    std::vector<Piece> kept;
    kept.swap(pieces_);
    if (keep_first) pieces_.push_back(std::move(kept.front()));
  }
  pending_bytes_ = 0;
  owned_bytes_ = 0;
  referenced_bytes_ = 0;
  next_piece_ = 0;
  produced_ = 0;
  return freed;
}

}  // namespace prefixd::protocol
