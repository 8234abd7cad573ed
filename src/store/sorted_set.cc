#include "store/sorted_set.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "store/members.h"

namespace prefixd::store {
namespace {

constexpr size_t kScoreBytes = 8;

void PutScore(uint8_t* p, double score) {
  uint64_t bits;
  std::memcpy(&bits, &score, sizeof bits);
  for (size_t i = 0; i < kScoreBytes; ++i) p[i] = static_cast<uint8_t>(bits >> (8 * i));
}

double GetScore(std::string_view bytes) {
  uint64_t bits = 0;
  for (size_t i = 0; i < kScoreBytes; ++i) {
    bits |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  double score;
  std::memcpy(&score, &bits, sizeof score);
  return score;
}

// Calls `visit(score, member)` for each pair of `value`; false when the framing is broken (an odd
// item count, a score item that is not 8 bytes or holds NaN).
template <class Visit>
bool ForEachPair(std::string_view value, Visit&& visit) {
  double score = 0;
  bool have_score = false, ok = true;
  const bool framed = ForEachMember(value, [&](std::string_view item) {
    if (!ok) return;
    if (!have_score) {
      ok = item.size() == kScoreBytes && !std::isnan(GetScore(item));
      if (ok) score = GetScore(item), have_score = true;
      return;
    }
    visit(score, item);
    have_score = false;
  });
  return framed && ok && !have_score;
}

}  // namespace

bool ZsetLess(double score_a, std::string_view a, double score_b, std::string_view b) {
  if (score_a != score_b) return score_a < score_b;
  return a < b;  // std::string_view compares bytes as unsigned chars, then by length: memcmp's
}

namespace {

template <class Pair>
Bytes EncodePairs(const std::vector<Pair>& members) {
  size_t size = 0;
  for (const Pair& m : members) size += 4 + kScoreBytes + 4 + m.member.size();
  std::string out(size, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  for (const Pair& m : members) {
    const uint32_t length = static_cast<uint32_t>(m.member.size());
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(kScoreBytes >> (8 * i));
    PutScore(p + 4, m.score);
    p += 4 + kScoreBytes;
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(length >> (8 * i));
    if (length > 0) std::memcpy(p + 4, m.member.data(), length);
    p += 4 + length;
  }
  return Bytes::CopyCompact(out);
}

bool ViewLess(const ScoredView& a, const ScoredView& b) {
  return ZsetLess(a.score, a.member, b.score, b.member);
}

}  // namespace

Bytes EncodeZset(const std::vector<ScoredView>& members) { return EncodePairs(members); }

std::optional<std::vector<ScoredView>> DecodeZsetViews(std::string_view value) {
  std::vector<ScoredView> out;
  bool ordered = true;
  const bool framed = ForEachPair(value, [&](double score, std::string_view member) {
    if (!out.empty() && !ViewLess(out.back(), {score, member})) ordered = false;
    out.push_back({score, member});
  });
  if (!framed || !ordered) return std::nullopt;
  // Strictly ascending pairs can still repeat a member under two scores.
  std::unordered_set<std::string_view> seen;
  seen.reserve(out.size());
  for (const ScoredView& m : out) {
    if (!seen.insert(m.member).second) return std::nullopt;
  }
  return out;
}

std::vector<ScoredView> ZsetViews(std::string_view value) {
  std::vector<ScoredView> out;
  ForEachPair(value, [&](double score, std::string_view member) {
    out.push_back({score, member});
  });
  return out;
}

std::optional<std::vector<ScoredMember>> DecodeZset(std::string_view value) {
  auto views = DecodeZsetViews(value);
  if (!views) return std::nullopt;
  std::vector<ScoredMember> out;
  out.reserve(views->size());
  for (const ScoredView& m : *views) out.push_back({m.score, std::string(m.member)});
  return out;
}

bool ValidZset(std::string_view value) { return DecodeZsetViews(value).has_value(); }

size_t CountZset(std::string_view value) {
  size_t n = 0;
  ForEachPair(value, [&](double, std::string_view) { ++n; });
  return n;
}

namespace {

// The pairs of `value` whose member is not in `named`, in order.
std::vector<ScoredView> Kept(std::string_view value,
                             const std::unordered_set<std::string_view>& named) {
  std::vector<ScoredView> kept;
  ForEachPair(value, [&](double score, std::string_view member) {
    if (named.count(member) == 0) kept.push_back({score, member});
  });
  return kept;
}

}  // namespace

Bytes ZsetPutScores(std::string_view value, std::string_view scored) {
  // A member named twice keeps its last score.
  std::unordered_map<std::string_view, double> last;
  ForEachPair(scored, [&](double score, std::string_view member) { last[member] = score; });
  std::unordered_set<std::string_view> named;
  std::vector<ScoredView> put;
  for (const auto& [member, score] : last) named.insert(member), put.push_back({score, member});
  std::sort(put.begin(), put.end(), ViewLess);
  const std::vector<ScoredView> kept = Kept(value, named);
  std::vector<ScoredView> out(kept.size() + put.size());
  std::merge(kept.begin(), kept.end(), put.begin(), put.end(), out.begin(), ViewLess);
  return EncodeZset(out);
}

Bytes ZsetRemoveMembers(std::string_view value, std::string_view removed) {
  std::unordered_set<std::string_view> gone;
  ForEachMember(removed, [&](std::string_view m) { gone.insert(m); });
  return EncodeZset(Kept(value, gone));
}

ZsetEncoding ZsetEncodingAfterAdd(ZsetEncoding encoding, size_t size_before, size_t added_members,
                                  size_t longest_added, size_t max_entries, size_t max_value) {
  if (encoding == ZsetEncoding::kSkiplist || added_members == 0) return encoding;
  if (size_before + added_members > max_entries || longest_added > max_value) {
    return ZsetEncoding::kSkiplist;
  }
  return ZsetEncoding::kListpack;
}

std::optional<double> ParseScore(std::string_view text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (static_cast<size_t>(end - copy.c_str()) != copy.size() || std::isnan(value)) {
    return std::nullopt;
  }
  // Overflow and underflow to zero are refused; a denormal result is kept (Redis's rule).
  if (errno == ERANGE && (std::isinf(value) || value == 0)) return std::nullopt;
  return value;
}

std::optional<ScoreBound> ParseScoreBound(std::string_view text) {
  ScoreBound bound;
  if (!text.empty() && text[0] == '(') {
    bound.exclusive = true;
    text.remove_prefix(1);
  }
  // strtod up to the first NUL, which must end what it read (zslParseRange): an empty bound
  // reads as 0, leading space is skipped.
  const std::string copy(text);
  char* end = nullptr;
  bound.value = std::strtod(copy.c_str(), &end);
  if (*end != '\0' || std::isnan(bound.value)) return std::nullopt;
  return bound;
}

std::optional<LexBound> ParseLexBound(std::string_view text) {
  if (text.empty()) return std::nullopt;
  LexBound bound;
  switch (text[0]) {
    case '-':
    case '+':
      if (text.size() != 1) return std::nullopt;
      bound.kind = text[0] == '-' ? LexBound::kMin : LexBound::kMax;
      return bound;
    case '[':
    case '(':
      bound.kind = text[0] == '[' ? LexBound::kInclusive : LexBound::kExclusive;
      bound.member = std::string(text.substr(1));
      return bound;
    default:
      return std::nullopt;
  }
}

bool AboveMin(double score, const ScoreBound& min) {
  return min.exclusive ? score > min.value : score >= min.value;
}
bool BelowMax(double score, const ScoreBound& max) {
  return max.exclusive ? score < max.value : score <= max.value;
}

bool AboveMin(std::string_view member, const LexBound& min) {
  switch (min.kind) {
    case LexBound::kMin:
      return true;
    case LexBound::kMax:
      return false;
    case LexBound::kInclusive:
      return member >= min.member;
    case LexBound::kExclusive:
      return member > min.member;
  }
  return false;
}

bool BelowMax(std::string_view member, const LexBound& max) {
  switch (max.kind) {
    case LexBound::kMin:
      return false;
    case LexBound::kMax:
      return true;
    case LexBound::kInclusive:
      return member <= max.member;
    case LexBound::kExclusive:
      return member < max.member;
  }
  return false;
}

}  // namespace prefixd::store
