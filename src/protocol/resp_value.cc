#include "protocol/resp_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include "common/numbers.h"

namespace prefixd::protocol {
namespace {

// Storage reserved ahead of the bytes that fill it is capped, so a hostile length costs nothing.
constexpr size_t kMaxReserve = 64 * 1024;
constexpr size_t kMaxReserveChildren = 64;
// Long payloads are cut in debug strings; test messages need the start, not megabytes.
constexpr size_t kDebugStringMax = 200;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

size_t SkipDigits(std::string_view s, size_t i) {
  while (i < s.size() && IsDigit(s[i])) ++i;
  return i;
}

// RESP3 doubles: a decimal with optional fraction and exponent, or inf/-inf/nan. The grammar is
// checked first because from_chars also takes forms no server sends ("infinity", hex digits).
std::optional<double> ParseDouble(std::string_view s) {
  if (s == "inf" || s == "+inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  if (s == "nan" || s == "-nan") return std::numeric_limits<double>::quiet_NaN();
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const size_t int_begin = i;
  i = SkipDigits(s, i);
  size_t digits = i - int_begin;
  if (i < s.size() && s[i] == '.') {
    const size_t frac_begin = ++i;
    i = SkipDigits(s, i);
    digits += i - frac_begin;
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t exp_begin = i;
    i = SkipDigits(s, i);
    if (i == exp_begin) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  if (s[0] == '+') s.remove_prefix(1);  // from_chars takes no '+'
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) {
    // Overflow and underflow still name a number; strtod rounds them to inf or zero.
    return std::strtod(std::string(s).c_str(), nullptr);
  }
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

bool IsBignum(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return !s.empty() && SkipDigits(s, 0) == s.size();
}

void AppendEscaped(std::string& out, std::string_view s) {
  const size_t shown = std::min(s.size(), kDebugStringMax);
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c >= 0x20 && c < 0x7f) {
          out.push_back(static_cast<char>(c));
        } else {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        }
    }
  }
  if (shown < s.size()) out += "...(" + std::to_string(s.size()) + " bytes)";
}

void AppendQuoted(std::string& out, std::string_view s) {
  out.push_back('"');
  AppendEscaped(out, s);
  out.push_back('"');
}

void AppendDebug(std::string& out, const RespValue& v);

void AppendList(std::string& out, const std::vector<RespValue>& items, size_t count, char open,
                char close) {
  out.push_back(open);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    AppendDebug(out, items[i]);
  }
  out.push_back(close);
}

// Key/value pairs as {k: v, ...}; `count` children of `items` are pairs.
void AppendPairs(std::string& out, const std::vector<RespValue>& items, size_t count) {
  out.push_back('{');
  for (size_t i = 0; i + 1 < count; i += 2) {
    if (i > 0) out += ", ";
    AppendDebug(out, items[i]);
    out += ": ";
    AppendDebug(out, items[i + 1]);
  }
  out.push_back('}');
}

void AppendDebug(std::string& out, const RespValue& v) {
  switch (v.type) {
    case RespType::kSimple:
      out.push_back('+');
      AppendEscaped(out, v.str);
      break;
    case RespType::kError:
      out.push_back('-');
      AppendEscaped(out, v.str);
      break;
    case RespType::kInteger:
      out += ":" + std::to_string(v.integer);
      break;
    case RespType::kBulk:
      AppendQuoted(out, v.str);
      break;
    case RespType::kNull:
      out += "null";
      break;
    case RespType::kArray:
      AppendList(out, v.children, v.children.size(), '[', ']');
      break;
    case RespType::kMap:
      AppendPairs(out, v.children, v.children.size());
      break;
    case RespType::kSet:
      out.push_back('~');
      AppendList(out, v.children, v.children.size(), '[', ']');
      break;
    case RespType::kDouble:
      out += "," + FormatDouble(v.number);
      break;
    case RespType::kBoolean:
      out += v.integer ? "#t" : "#f";
      break;
    case RespType::kVerbatim:
      out.push_back('=');
      AppendEscaped(out, v.format);
      out.push_back(':');
      AppendQuoted(out, v.str);
      break;
    case RespType::kBignum:
      out.push_back('(');
      AppendEscaped(out, v.str);
      break;
    case RespType::kPush:
      out.push_back('>');
      AppendList(out, v.children, v.children.size(), '[', ']');
      break;
    case RespType::kAttribute:
      out.push_back('|');
      if (v.children.empty()) {
        out += "{}";
        break;
      }
      AppendPairs(out, v.children, v.children.size() - 1);
      out.push_back(' ');
      AppendDebug(out, v.children.back());
      break;
  }
}

RespValue Scalar(RespType type, std::string_view str = {}) {
  RespValue v;
  v.type = type;
  v.str = str;
  return v;
}

RespValue Aggregate(RespType type, std::vector<RespValue> children) {
  RespValue v;
  v.type = type;
  v.children = std::move(children);
  return v;
}

}  // namespace

RespValue RespValue::Simple(std::string_view text) { return Scalar(RespType::kSimple, text); }
RespValue RespValue::Error(std::string_view text) { return Scalar(RespType::kError, text); }
RespValue RespValue::Bulk(std::string_view value) { return Scalar(RespType::kBulk, value); }
RespValue RespValue::Null() { return Scalar(RespType::kNull); }
RespValue RespValue::Bignum(std::string_view digits) { return Scalar(RespType::kBignum, digits); }

RespValue RespValue::Integer(int64_t value) {
  RespValue v = Scalar(RespType::kInteger);
  v.integer = value;
  return v;
}

RespValue RespValue::Double(double value) {
  RespValue v = Scalar(RespType::kDouble);
  v.number = value;
  return v;
}

RespValue RespValue::Boolean(bool value) {
  RespValue v = Scalar(RespType::kBoolean);
  v.integer = value ? 1 : 0;
  return v;
}

RespValue RespValue::Verbatim(std::string_view format, std::string_view text) {
  RespValue v = Scalar(RespType::kVerbatim, text);
  v.format = format;
  return v;
}

RespValue RespValue::Array(std::vector<RespValue> elements) {
  return Aggregate(RespType::kArray, std::move(elements));
}

RespValue RespValue::Map(std::vector<RespValue> pairs) {
  return Aggregate(RespType::kMap, std::move(pairs));
}

RespValue RespValue::Set(std::vector<RespValue> elements) {
  return Aggregate(RespType::kSet, std::move(elements));
}

RespValue RespValue::Push(std::vector<RespValue> elements) {
  return Aggregate(RespType::kPush, std::move(elements));
}

RespValue RespValue::Attribute(std::vector<RespValue> pairs, RespValue annotated) {
  pairs.push_back(std::move(annotated));
  return Aggregate(RespType::kAttribute, std::move(pairs));
}

bool RespValue::is_aggregate() const {
  switch (type) {
    case RespType::kArray:
    case RespType::kMap:
    case RespType::kSet:
    case RespType::kPush:
    case RespType::kAttribute:
      return true;
    default:
      return false;
  }
}

const RespValue& RespValue::Unwrapped() const {
  const RespValue* v = this;
  while (v->type == RespType::kAttribute && !v->children.empty()) v = &v->children.back();
  return *v;
}

bool operator==(const RespValue& a, const RespValue& b) {
  if (a.type != b.type || a.integer != b.integer || a.str != b.str || a.format != b.format) {
    return false;
  }
  if (a.number != b.number && !(std::isnan(a.number) && std::isnan(b.number))) return false;
  return a.children == b.children;
}

std::string ToDebugString(const RespValue& value) {
  std::string out;
  AppendDebug(out, value);
  return out;
}

ReadResult ReplyParser::Feed(std::string_view input) {
  size_t pos = 0;
  while (!complete_ && error_.empty() && pos < input.size()) {
    switch (state_) {
      case State::kType:
        type_byte_ = input[pos++];
        line_.clear();
        saw_cr_ = false;
        state_ = State::kLine;
        break;
      case State::kLine:
        if (TakeLine(input, pos)) OnLine();
        break;
      case State::kPayload: {
        const size_t take = std::min(input.size() - pos, static_cast<size_t>(payload_left_));
        scalar_.str.append(input.substr(pos, take));
        pos += take;
        payload_left_ -= static_cast<int64_t>(take);
        if (payload_left_ == 0) {
          state_ = State::kPayloadEnd;
          payload_crlf_ = 2;
        }
        break;
      }
      case State::kPayloadEnd:
        // Unlike Redis's request parser, a reply reader insists on the CRLF: a client that
        // skipped it would silently desynchronise.
        if (input[pos] != (payload_crlf_ == 2 ? '\r' : '\n')) {
          Fail("expected CRLF after a payload");
          break;
        }
        ++pos;
        if (--payload_crlf_ == 0) OnPayload();
        break;
    }
  }
  if (complete_) return {ReadStatus::kComplete, pos};
  if (!error_.empty()) return {ReadStatus::kMalformed, pos};
  return {ReadStatus::kNeedMore, pos};
}

RespValue ReplyParser::TakeValue() {
  RespValue v = std::move(result_);
  result_ = RespValue();
  complete_ = false;
  return v;
}

bool ReplyParser::TakeLine(std::string_view input, size_t& pos) {
  if (saw_cr_) {
    if (input[pos] != '\n') {
      Fail("expected LF after CR");
      return false;
    }
    ++pos;
    saw_cr_ = false;
    return true;
  }
  std::string_view rest = input.substr(pos);
  const size_t end = rest.find_first_of("\r\n");
  const size_t take = end == std::string_view::npos ? rest.size() : end;
  if (line_.size() + take > limits_.max_line_length) {
    Fail("line too long");
    return false;
  }
  line_.append(rest.substr(0, take));
  pos += take;
  if (end == std::string_view::npos) return false;
  if (rest[end] == '\n') {
    Fail("LF without CR");
    return false;
  }
  ++pos;
  saw_cr_ = true;
  return false;  // the LF is checked on the next pass, which may be in the next Feed
}

void ReplyParser::OnLine() {
  state_ = State::kType;
  std::string_view line = line_;
  if (streaming_string_) {
    if (type_byte_ != ';') return Fail("expected ';' chunk in a streamed string");
    return OnLength(RespType::kBulk, line);
  }
  switch (type_byte_) {
    case '+':
      return Emit(RespValue::Simple(line));
    case '-':
      return Emit(RespValue::Error(line));
    case ':': {
      auto n = ParseInt64(line);
      if (!n) return Fail("invalid integer");
      return Emit(RespValue::Integer(*n));
    }
    case '$':
      if (line == "?") {
        streaming_string_ = true;
        scalar_ = RespValue::Bulk({});
        return;
      }
      return OnLength(RespType::kBulk, line);
    case '!':
      return OnLength(RespType::kError, line);
    case '=':
      return OnLength(RespType::kVerbatim, line);
    case '*':
      return OnAggregate(RespType::kArray, line);
    case '%':
      return OnAggregate(RespType::kMap, line);
    case '~':
      return OnAggregate(RespType::kSet, line);
    case '>':
      return OnAggregate(RespType::kPush, line);
    case '|':
      return OnAggregate(RespType::kAttribute, line);
    case '_':
      if (!line.empty()) return Fail("null with a payload");
      return Emit(RespValue::Null());
    case ',': {
      auto d = ParseDouble(line);
      if (!d) return Fail("invalid double");
      return Emit(RespValue::Double(*d));
    }
    case '#':
      if (line == "t" || line == "f") return Emit(RespValue::Boolean(line == "t"));
      return Fail("invalid boolean");
    case '(':
      if (!IsBignum(line)) return Fail("invalid big number");
      return Emit(RespValue::Bignum(line));
    case '.':
      return OnStreamEnd();
    default:
      return Fail("unknown reply type byte");
  }
}

void ReplyParser::OnLength(RespType type, std::string_view digits) {
  auto n = ParseInt64(digits);
  if (!n) return Fail("invalid length");
  if (streaming_string_) {
    // A chunk of a `$?` string: ";0" ends it, and the whole string obeys the bulk limit.
    if (*n < 0 || *n > limits_.max_bulk_length - static_cast<int64_t>(scalar_.str.size())) {
      return Fail("invalid streamed string chunk length");
    }
    if (*n == 0) {
      streaming_string_ = false;
      return Emit(std::move(scalar_));
    }
  } else {
    if (*n == -1 && type == RespType::kBulk) return Emit(RespValue::Null());
    if (*n < 0 || *n > limits_.max_bulk_length) return Fail("invalid length");
    if (type == RespType::kVerbatim && *n < 4) return Fail("verbatim string without a format");
    scalar_ = RespValue();
    scalar_.type = type;
  }
  scalar_.str.reserve(scalar_.str.size() + std::min(static_cast<size_t>(*n), kMaxReserve));
  payload_left_ = *n;
  payload_crlf_ = 2;
  state_ = *n > 0 ? State::kPayload : State::kPayloadEnd;
}

void ReplyParser::OnPayload() {
  state_ = State::kType;
  if (streaming_string_) return;  // the next chunk follows
  if (scalar_.type == RespType::kVerbatim) {
    if (scalar_.str[3] != ':') return Fail("verbatim string without a format");
    scalar_.format = scalar_.str.substr(0, 3);
    scalar_.str.erase(0, 4);
  }
  Emit(std::move(scalar_));
}

void ReplyParser::OnAggregate(RespType type, std::string_view digits) {
  int64_t count = -1;  // streamed
  if (digits == "?") {
    if (type == RespType::kAttribute) return Fail("streamed attribute");
  } else {
    auto n = ParseInt64(digits);
    if (!n) return Fail("invalid aggregate length");
    if (*n == -1 && type == RespType::kArray) return Emit(RespValue::Null());
    const bool pairs = type == RespType::kMap || type == RespType::kAttribute;
    if (*n < 0 || *n > (pairs ? limits_.max_aggregate_length / 2 : limits_.max_aggregate_length)) {
      return Fail("invalid aggregate length");
    }
    count = pairs ? 2 * *n : *n;
    if (type == RespType::kAttribute) ++count;  // the reply the attribute annotates
    if (count == 0) return Emit(Aggregate(type, {}));
  }
  if (stack_.size() >= static_cast<size_t>(std::max(limits_.max_depth, 0))) {
    return Fail("aggregates nested too deeply");
  }
  RespValue node = Aggregate(type, {});
  node.children.reserve(count < 0 ? 0 : std::min(static_cast<size_t>(count), kMaxReserveChildren));
  stack_.push_back(Frame{std::move(node), count});
}

void ReplyParser::OnStreamEnd() {
  if (!line_.empty()) return Fail("end marker with a payload");
  if (stack_.empty() || stack_.back().remaining >= 0) return Fail("end marker outside a stream");
  RespValue node = std::move(stack_.back().node);
  stack_.pop_back();
  if (node.type == RespType::kMap && node.children.size() % 2 != 0) {
    return Fail("streamed map ended between a key and its value");
  }
  Emit(std::move(node));
}

void ReplyParser::Emit(RespValue value) {
  while (!stack_.empty()) {
    Frame& top = stack_.back();
    top.node.children.push_back(std::move(value));
    if (top.remaining < 0) {
      if (static_cast<int64_t>(top.node.children.size()) > limits_.max_aggregate_length) {
        Fail("streamed aggregate too long");
      }
      return;
    }
    if (--top.remaining > 0) return;
    value = std::move(top.node);
    stack_.pop_back();
  }
  result_ = std::move(value);
  complete_ = true;
}

void ReplyParser::Fail(std::string message) { error_ = std::move(message); }

}  // namespace prefixd::protocol
