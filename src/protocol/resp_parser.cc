#include "protocol/resp_parser.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/numbers.h"

namespace prefixd::protocol {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool SplitInlineArgs(std::string_view line, Request& out) {
  // A NUL ends the line, as it ends Redis's C-string scan.
  if (auto nul = line.find('\0'); nul != std::string_view::npos) line = line.substr(0, nul);
  size_t i = 0;
  const size_t n = line.size();
  auto at = [&](size_t k) -> char { return k < n ? line[k] : '\0'; };
  std::string current;
  while (true) {
    while (i < n && IsSpace(line[i])) ++i;
    if (i >= n) return true;
    bool in_double = false, in_single = false, done = false;
    current.clear();
    while (!done) {
      char c = at(i);
      if (in_double) {
        if (c == '\\' && at(i + 1) == 'x' && HexValue(at(i + 2)) >= 0 && HexValue(at(i + 3)) >= 0) {
          current.push_back(static_cast<char>(HexValue(at(i + 2)) * 16 + HexValue(at(i + 3))));
          i += 3;
        } else if (c == '\\' && at(i + 1) != '\0') {
          ++i;
          switch (at(i)) {
            case 'n':
              current.push_back('\n');
              break;
            case 'r':
              current.push_back('\r');
              break;
            case 't':
              current.push_back('\t');
              break;
            case 'b':
              current.push_back('\b');
              break;
            case 'a':
              current.push_back('\a');
              break;
            default:
              current.push_back(at(i));
              break;
          }
        } else if (c == '"') {
          // The closing quote must be followed by a space or the end.
          if (at(i + 1) != '\0' && !IsSpace(at(i + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          current.push_back(c);
        }
      } else if (in_single) {
        if (c == '\\' && at(i + 1) == '\'') {
          ++i;
          current.push_back('\'');
        } else if (c == '\'') {
          if (at(i + 1) != '\0' && !IsSpace(at(i + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          current.push_back(c);
        }
      } else {
        switch (c) {
          case ' ':
          case '\n':
          case '\r':
          case '\t':
          case '\0':
            done = true;
            break;
          case '"':
            in_double = true;
            break;
          case '\'':
            in_single = true;
            break;
          default:
            current.push_back(c);
            break;
        }
      }
      if (i < n) ++i;
    }
    out.AddSmall(current);
  }
}

size_t RequestParser::TakeWholeRequest(std::string_view input) {
  const char* p = input.data();
  const char* const end = p + input.size();
  // Digits up to a '\r' and the byte after it (skipped unseen, as TakeCountLine does). Only
  // what ParseInt64 reads as the same number: no sign, no leading zero, at most 9 digits.
  const auto number = [&p, end](int64_t& out) {
    const char* digits = p;
    int64_t value = 0;
    while (p < end && *p >= '0' && *p <= '9' && p - digits < 9) value = value * 10 + (*p++ - '0');
    const auto length = p - digits;
    if (length == 0 || (length > 1 && *digits == '0') || end - p < 2 || *p != '\r') return false;
    p += 2;
    out = value;
    return true;
  };
  int64_t count = 0;
  if (!request_.empty() || p == end || *p++ != '*' || !number(count) || count == 0) return 0;
  if (count > kUnauthenticatedMaxArgs && !limits_.authenticated) return 0;
  int64_t declared = 0;
  for (int64_t i = 0; i < count; ++i) {
    int64_t length = 0;
    if (p == end || *p++ != '$' || !number(length)) break;
    if (length > limits_.max_bulk_length || static_cast<size_t>(length) >= kLargeArgument ||
        (length > kUnauthenticatedMaxBulk && !limits_.authenticated)) {
      break;
    }
    declared += length + kArgumentOverhead;
    if (declared > limits_.max_request_bytes || end - p < length + 2) break;
    request_.AddSmall(std::string_view(p, static_cast<size_t>(length)));
    p += length + 2;  // the bytes after an argument are skipped unseen, as in kCrlf
  }
  if (static_cast<int64_t>(request_.size()) != count) {
    request_.Clear();
    return 0;
  }
  declared_bytes_ = declared;
  ready_ = true;
  return static_cast<size_t>(p - input.data());
}

size_t RequestParser::Feed(std::string_view input) {
  if (state_ == State::kStart && !ready_ && error_ == ParseError::kNone) {
    if (const size_t taken = TakeWholeRequest(input); taken > 0) return taken;
  }
  size_t consumed = 0;
  while (!ready_ && error_ == ParseError::kNone && consumed < input.size()) {
    std::string_view rest = input.substr(consumed);
    switch (state_) {
      case State::kStart:
        line_.clear();
        saw_cr_ = false;
        state_ = rest[0] == '*' ? State::kCountLine : State::kInlineLine;
        break;
      case State::kInlineLine: {
        size_t nl = rest.find('\n');
        size_t take = nl == std::string_view::npos ? rest.size() : nl;
        if (line_.size() + take > kInlineMax) return Fail(ParseError::kTooBigInline), consumed;
        line_.append(rest.substr(0, take));
        consumed += take;
        if (nl != std::string_view::npos) {
          ++consumed;  // the '\n'
          OnInlineLine();
        }
        break;
      }
      case State::kCountLine:
        if (TakeCountLine(rest, consumed, ParseError::kTooBigMultibulkCount)) OnCountLine();
        break;
      case State::kBulkLine:
        if (TakeCountLine(rest, consumed, ParseError::kTooBigBulkCount)) OnBulkLine();
        break;
      case State::kSmallData: {
        size_t take = std::min(rest.size(), small_remaining_);
        request_.AppendSmall(rest.substr(0, take));
        small_remaining_ -= take;
        consumed += take;
        if (small_remaining_ == 0) state_ = State::kCrlf, crlf_remaining_ = 2;
        break;
      }
      case State::kLargeData: {
        auto target = DirectTarget();
        size_t take = std::min(rest.size(), target.size());
        std::memcpy(target.data(), rest.data(), take);
        consumed += take;
        CommitDirect(take);
        break;
      }
      case State::kSkipData: {
        size_t take = std::min(rest.size(), skip_remaining_);
        skip_remaining_ -= take;
        consumed += take;
        if (skip_remaining_ == 0) FinishArgument();
        break;
      }
      case State::kCrlf: {
        // Redis skips the two bytes after a bulk without looking at them.
        size_t take = std::min(rest.size(), static_cast<size_t>(crlf_remaining_));
        crlf_remaining_ -= static_cast<int>(take);
        consumed += take;
        if (crlf_remaining_ == 0) FinishArgument();
        break;
      }
    }
  }
  return consumed;
}

bool RequestParser::TakeCountLine(std::string_view rest, size_t& consumed, ParseError too_big) {
  if (saw_cr_) {
    ++consumed;  // the byte after '\r'
    return true;
  }
  size_t cr = rest.find('\r');
  size_t take = cr == std::string_view::npos ? rest.size() : cr;
  if (line_.size() + take > kInlineMax) {
    Fail(too_big);
    return false;
  }
  line_.append(rest.substr(0, take));
  consumed += take;
  if (cr == std::string_view::npos) return false;
  ++consumed;
  saw_cr_ = true;
  if (rest.size() > cr + 1) {
    ++consumed;
    return true;
  }
  return false;
}

void RequestParser::OnCountLine() {
  auto count = ParseInt64(std::string_view(line_).substr(1));
  line_.clear();
  saw_cr_ = false;
  if (!count || *count > INT_MAX) return Fail(ParseError::kInvalidMultibulkLength);
  if (*count > kUnauthenticatedMaxArgs && !limits_.authenticated) {
    return Fail(ParseError::kUnauthenticatedMultibulk);
  }
  if (*count <= 0) {
    state_ = State::kStart;  // "*0" and "*-1" are skipped
    return;
  }
  args_remaining_ = *count;
  declared_bytes_ = 0;
  state_ = State::kBulkLine;
}

void RequestParser::OnBulkLine() {
  std::string_view line = line_;
  saw_cr_ = false;
  if (line.empty() || line[0] != '$') {
    bad_byte_ = line.empty() ? '\r' : line[0];
    return Fail(ParseError::kExpectedDollar);
  }
  auto length = ParseInt64(line.substr(1));
  line_.clear();
  if (!length || *length < 0 || *length > limits_.max_bulk_length) {
    return Fail(ParseError::kInvalidBulkLength);
  }
  if (*length > kUnauthenticatedMaxBulk && !limits_.authenticated) {
    return Fail(ParseError::kUnauthenticatedBulk);
  }
  // Each argument also costs its bookkeeping, so a flood of empty arguments is bounded too.
  declared_bytes_ += *length + kArgumentOverhead;
  if (declared_bytes_ > limits_.max_request_bytes) return Fail(ParseError::kRequestTooLarge);
  auto size = static_cast<size_t>(*length);
  if (refusal_.empty() && size >= kLargeArgument && gate_) refusal_ = gate_(request_);
  if (!refusal_.empty()) {
    skip_remaining_ = size + 2;  // the argument and its CRLF
    state_ = State::kSkipData;
    return;
  }
  if (size >= kLargeArgument) {
    // Committed as the bytes arrive: a client that declares a large argument and sends little
    // costs what it sent.
    large_ = Bytes::AllocateForFill(size);
    large_filled_ = 0;
    huge_advised_to_ = 0;
    state_ = State::kLargeData;
  } else if (size == 0) {
    request_.BeginSmall(0);
    state_ = State::kCrlf;
    crlf_remaining_ = 2;
  } else {
    request_.BeginSmall(size);
    small_remaining_ = size;
    state_ = State::kSmallData;
  }
}

void RequestParser::OnInlineLine() {
  std::string_view line = line_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!SplitInlineArgs(line, request_)) return Fail(ParseError::kUnbalancedQuotes);
  line_.clear();
  state_ = State::kStart;
  if (request_.empty()) return;  // an empty line is skipped
  request_.set_inline(true);
  ready_ = true;
}

std::span<uint8_t> RequestParser::DirectTarget() {
  if (state_ != State::kLargeData) return {};
  return {large_.mutable_data() + large_filled_, large_.size() - large_filled_};
}

void RequestParser::CommitDirect(size_t n) {
  large_filled_ += n;
  // Once data flows, huge pages for the stretch ahead cut its page faults 512-fold.
  if (large_filled_ >= kHugePagesAfter && huge_advised_to_ < large_.size() &&
      large_filled_ + kHugePagesAhead / 2 >= huge_advised_to_) {
    const size_t from = std::max(huge_advised_to_, large_filled_);
    huge_advised_to_ = std::min(large_.size(), from + kHugePagesAhead);
    large_.AdviseHugePages(from, huge_advised_to_ - from);
  }
  if (large_filled_ == large_.size()) {
    large_.MarkFilled();
    request_.AddLarge(std::move(large_));
    large_ = Bytes();
    large_filled_ = 0;
    state_ = State::kCrlf;
    crlf_remaining_ = 2;
  }
}

void RequestParser::FinishArgument() {
  if (--args_remaining_ > 0) {
    state_ = State::kBulkLine;
    return;
  }
  state_ = State::kStart;
  ready_ = true;
}

size_t RequestParser::ReleaseIdleMemory() {
  size_t freed = request_.ReleaseIdleMemory();
  if (line_.capacity() > kIdleLineCapacity && line_.empty()) {
    freed += line_.capacity();
    std::string().swap(line_);
  }
  return freed;
}

size_t RequestParser::buffer_bytes() const {
  return line_.capacity() + large_filled_ + request_.allocated_bytes();
}

void RequestParser::TakeRequest(Request& out) {
  out.Clear();
  out.swap(request_);
  ready_ = false;
}

std::string RequestParser::ErrorMessage() const {
  switch (error_) {
    case ParseError::kNone:
      return {};
    case ParseError::kInvalidMultibulkLength:
      return "ERR Protocol error: invalid multibulk length";
    case ParseError::kExpectedDollar:
      return std::string("ERR Protocol error: expected '$', got '") + bad_byte_ + "'";
    case ParseError::kInvalidBulkLength:
      return "ERR Protocol error: invalid bulk length";
    case ParseError::kTooBigInline:
      return "ERR Protocol error: too big inline request";
    case ParseError::kTooBigMultibulkCount:
      return "ERR Protocol error: too big mbulk count string";
    case ParseError::kTooBigBulkCount:
      return "ERR Protocol error: too big bulk count string";
    case ParseError::kUnbalancedQuotes:
      return "ERR Protocol error: unbalanced quotes in request";
    case ParseError::kUnauthenticatedMultibulk:
      return "ERR Protocol error: unauthenticated multibulk length";
    case ParseError::kUnauthenticatedBulk:
      return "ERR Protocol error: unauthenticated bulk length";
    case ParseError::kRequestTooLarge:
      return "ERR Protocol error: request exceeds client-query-buffer-limit";
  }
  return {};
}

}  // namespace prefixd::protocol
