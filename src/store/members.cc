#include "store/members.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "common/numbers.h"

namespace prefixd::store {
namespace {

void PutLength(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
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

std::optional<std::vector<std::string>> DecodeMembers(std::string_view value) {
  std::vector<std::string> out;
  if (!ForEachMember(value, [&](std::string_view m) { out.emplace_back(m); })) return std::nullopt;
  return out;
}

bool ValidMembers(std::string_view value) {
  return ForEachMember(value, [](std::string_view) {});
}

size_t CountMembers(std::string_view value) {
  size_t n = 0;
  ForEachMember(value, [&](std::string_view) { ++n; });
  return n;
}

namespace {

// Where each member of `value` starts, and the end, in order.
std::vector<size_t> MemberStarts(std::string_view value) {
  std::vector<size_t> starts;
  size_t at = 0;
  ForEachMember(value, [&](std::string_view m) {
    starts.push_back(at);
    at += 4 + m.size();
  });
  starts.push_back(value.size());
  return starts;
}

Bytes Joined(std::string_view a, std::string_view b) {
  std::string out;
  out.reserve(a.size() + b.size());
  out.append(a).append(b);
  return Bytes::CopyCompact(out);
}

}  // namespace

Bytes AddMembers(std::string_view value, std::string_view added, bool intset) {
  std::vector<std::string> members = DecodeMembers(value).value_or(std::vector<std::string>{});
  std::unordered_set<std::string> present(members.begin(), members.end());
  ForEachMember(added, [&](std::string_view m) {
    if (present.emplace(m).second) members.emplace_back(m);
  });
  if (intset && std::all_of(members.begin(), members.end(), IntsetMember)) SortIntset(members);
  return EncodeMembers(members);
}

Bytes RemoveMembers(std::string_view value, std::string_view removed) {
  std::unordered_set<std::string_view> gone;
  ForEachMember(removed, [&](std::string_view m) { gone.insert(m); });
  std::vector<std::string> kept;
  ForEachMember(value, [&](std::string_view m) {
    if (gone.count(m) == 0) kept.emplace_back(m);
  });
  return EncodeMembers(kept);
}

Bytes PushElements(std::string_view value, std::string_view elements, bool head) {
  return head ? Joined(elements, value) : Joined(value, elements);
}

Bytes PopElements(std::string_view value, uint64_t count, bool head) {
  const std::vector<size_t> starts = MemberStarts(value);
  const size_t n = starts.size() - 1;
  if (count >= n) return Bytes();
  return Bytes::CopyCompact(head ? value.substr(starts[count])
                                 : value.substr(0, starts[n - count]));
}

std::vector<std::string> EdgeMembers(std::string_view value, uint64_t count, bool head) {
  const std::vector<size_t> starts = MemberStarts(value);
  const size_t n = starts.size() - 1;
  const size_t take = static_cast<size_t>(std::min<uint64_t>(count, n));
  std::vector<std::string> out;
  out.reserve(take);
  for (size_t k = 0; k < take; ++k) {
    const size_t i = head ? k : n - 1 - k;
    out.emplace_back(value.substr(starts[i] + 4, starts[i + 1] - starts[i] - 4));
  }
  return out;
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

namespace {

// Calls `visit(field, value)` for each pair of a hash's encoding, in order.
template <class Visit>
void ForEachPair(std::string_view value, Visit&& visit) {
  std::string_view field;
  bool is_field = true;
  ForEachMember(value, [&](std::string_view m) {
    if (!is_field) visit(field, m);
    field = m;
    is_field = !is_field;
  });
}

void AppendMember(std::string& out, std::string_view member) {
  uint8_t length[4];
  PutLength(length, static_cast<uint32_t>(member.size()));
  out.append(reinterpret_cast<const char*>(length), 4).append(member);
}

}  // namespace

// One walk over the value, writing the new one as it goes: O(the hash's bytes) with no copy of
// a field that stays, so a write to a large hash costs a memcpy-like pass, not a rebuild.
Bytes SetFields(std::string_view value, std::string_view pairs) {
  std::vector<std::pair<std::string_view, std::string_view>> named;  // first-named order
  std::unordered_map<std::string_view, size_t> index;
  ForEachPair(pairs, [&](std::string_view field, std::string_view v) {
    auto [it, added] = index.emplace(field, named.size());
    if (added) {
      named.emplace_back(field, v);
    } else {
      named[it->second].second = v;  // a field named twice takes its last value
    }
  });
  std::vector<bool> present(named.size(), false);
  std::string out;
  out.reserve(value.size() + pairs.size());
  ForEachPair(value, [&](std::string_view field, std::string_view v) {
    auto it = index.find(field);
    AppendMember(out, field);
    if (it == index.end()) return AppendMember(out, v);
    AppendMember(out, named[it->second].second);
    present[it->second] = true;
  });
  for (size_t i = 0; i < named.size(); ++i) {
    if (!present[i]) AppendMember(out, named[i].first), AppendMember(out, named[i].second);
  }
  return Bytes::CopyCompact(out);
}

Bytes RemoveFields(std::string_view value, std::string_view fields) {
  std::unordered_set<std::string_view> gone;
  ForEachMember(fields, [&](std::string_view m) { gone.insert(m); });
  std::string out;
  out.reserve(value.size());
  ForEachPair(value, [&](std::string_view field, std::string_view v) {
    if (gone.count(field) == 0) AppendMember(out, field), AppendMember(out, v);
  });
  return Bytes::CopyCompact(out);
}

size_t CountPresent(std::string_view value, const std::unordered_set<std::string_view>& fields) {
  size_t n = 0;
  ForEachPair(value, [&](std::string_view field, std::string_view) { n += fields.count(field); });
  return n;
}

std::optional<std::string_view> FieldValue(std::string_view value, std::string_view field) {
  std::optional<std::string_view> found;
  bool is_field = true, match = false;
  ForEachMember(value, [&](std::string_view m) {
    if (is_field) {
      match = !found && m == field;
    } else if (match) {
      found = m;
    }
    is_field = !is_field;
  });
  return found;
}

bool ValidPairs(std::string_view value) {
  size_t n = 0;
  return ForEachMember(value, [&](std::string_view) { ++n; }) && n % 2 == 0;
}

HashEncoding HashEncodingAfterSet(HashEncoding encoding, size_t entries, size_t longest,
                                  size_t max_entries, size_t max_value) {
  if (encoding == HashEncoding::kHashtable || entries > max_entries || longest > max_value) {
    return HashEncoding::kHashtable;
  }
  return HashEncoding::kListpack;
}

}  // namespace prefixd::store
