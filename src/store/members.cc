#include "store/members.h"

#include <algorithm>
#include <cstring>

#include "common/numbers.h"

namespace prefixd::store {
namespace {

void PutLength(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetLength(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

Bytes EncodeMembers(const std::vector<std::string>& members) {
  size_t size = 0;
  for (const std::string& m : members) size += 4 + m.size();
  std::string out(size, '\0');
  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  for (const std::string& m : members) {
    PutLength(p, static_cast<uint32_t>(m.size()));
    if (!m.empty()) std::memcpy(p + 4, m.data(), m.size());
    p += 4 + m.size();
  }
  return Bytes::CopyCompact(out);
}

// Calls `visit` with each member of `value` in order; false when the encoding is cut or overlong.
template <class Visit>
bool ForEachMember(std::string_view value, Visit&& visit) {
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  size_t at = 0;
  while (at < value.size()) {
    if (value.size() - at < 4) return false;
    const uint32_t length = GetLength(p + at);
    at += 4;
    if (value.size() - at < length) return false;
    visit(value.substr(at, length));
    at += length;
  }
  return true;
}

std::optional<std::vector<std::string>> DecodeMembers(std::string_view value) {
  std::vector<std::string> out;
  if (!ForEachMember(value, [&](std::string_view m) { out.emplace_back(m); })) return std::nullopt;
  return out;
}

bool ValidMembers(std::string_view value) {
  return ForEachMember(value, [](std::string_view) {});
}

bool IntsetMember(std::string_view member) {
  return member.size() <= 20 && ParseInt64(member).has_value();
}

SetEncoding SetEncodingAfterAdd(SetEncoding encoding, const std::vector<std::string>& members,
                                size_t max_intset) {
  if (encoding == SetEncoding::kHashtable || members.size() > max_intset) {
    return SetEncoding::kHashtable;
  }
  const bool integers = std::all_of(members.begin(), members.end(), IntsetMember);
  return integers ? SetEncoding::kIntset : SetEncoding::kHashtable;
}

void SortIntset(std::vector<std::string>& members) {
  std::sort(members.begin(), members.end(), [](const std::string& a, const std::string& b) {
    return *ParseInt64(a) < *ParseInt64(b);
  });
}

}  // namespace prefixd::store
