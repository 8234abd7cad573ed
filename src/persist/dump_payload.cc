#include "persist/dump_payload.h"

#include <xxhash.h>

#include <memory>
#include <optional>
#include <utility>

#include "persist/log_format.h"

namespace prefixd::persist {
namespace {

constexpr uint64_t kDumpSeed = 0;

struct Xxh3 {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state{XXH3_createState(),
                                                                 &XXH3_freeState};
  Xxh3() { XXH3_64bits_reset_withSeed(state.get(), kDumpSeed); }
  void Add(const uint8_t* data, size_t size) { XXH3_64bits_update(state.get(), data, size); }
  uint64_t Digest() const { return XXH3_64bits_digest(state.get()); }
};

// Calls `use` with the key field a record names (a string record's is a RecordKey, the others' a
// std::string); false when it names none.
template <typename Use>
bool WithNameOf(Mutation& m, Use&& use) {
  return std::visit(
      [&](auto& r) -> bool {
        using R = std::remove_cvref_t<decltype(r)>;
        if constexpr (requires { r.sid; }) {
          use(r.sid);
        } else if constexpr (std::is_base_of_v<PrefixFields, R> ||
                             std::is_same_v<R, PrefixNamespace> ||
                             std::is_same_v<R, PrefixBlocks> ||
                             std::is_same_v<R, PrefixCheckpoints>) {
          use(r.ns);
        } else if constexpr (std::is_same_v<R, StringSet> || std::is_same_v<R, SetValue> ||
                             std::is_same_v<R, ListValue> || std::is_same_v<R, HashValue> ||
                             std::is_same_v<R, ZsetValue> || std::is_same_v<R, StreamValue>) {
          use(r.key);
        } else {
          return false;
        }
        return true;
      },
      m);
}

std::optional<store::KeyType> TypeOpening(const Mutation& m) {
  if (std::holds_alternative<StringSet>(m)) return store::KeyType::kString;
  if (std::holds_alternative<SetValue>(m)) return store::KeyType::kSet;
  if (std::holds_alternative<ListValue>(m)) return store::KeyType::kList;
  if (std::holds_alternative<HashValue>(m)) return store::KeyType::kHash;
  if (std::holds_alternative<ZsetValue>(m)) return store::KeyType::kZset;
  if (std::holds_alternative<StreamValue>(m)) return store::KeyType::kStream;
  if (std::holds_alternative<SsmPut>(m)) return store::KeyType::kSsmPrefix;
  if (std::holds_alternative<VCreate>(m)) return store::KeyType::kVstore;
  if (std::holds_alternative<KvPrefix>(m)) return store::KeyType::kKvPrefix;
  if (std::holds_alternative<PrefixNamespace>(m)) return store::KeyType::kPrefixIndex;
  return std::nullopt;
}

// Checks that the records recreate one key the way KeyRecords writes it; a Corruption says why
// not.
class ShapeCheck {
 public:
  Status Add(const Mutation& m, const std::string& name) {
    if (count_++ == 0) {
      auto type = TypeOpening(m);
      if (!type) return Status::Corruption("it does not open with a key's first record");
      type_ = *type, key_ = name;
      if (const auto* v = std::get_if<VCreate>(&m)) sessions_.push_back(Session{name, *v});
      if (const auto* s = std::get_if<StringSet>(&m); s && (s->flags & StringSet::kKeepTtl)) {
        return Status::Corruption("a string record that keeps an expiry");
      }
      const auto* set = std::get_if<SetValue>(&m);
      const auto* list = std::get_if<ListValue>(&m);
      const auto* hash = std::get_if<HashValue>(&m);
      const auto* zset = std::get_if<ZsetValue>(&m);
      const auto* stream = std::get_if<StreamValue>(&m);
      if ((set && set->op != SetValue::kWhole) || (list && list->op != ListValue::kWhole) ||
          (hash && hash->op != HashValue::kWhole) || (zset && zset->op != ZsetValue::kWhole) ||
          (stream && stream->op != StreamValue::kWhole)) {
        return Status::Corruption(
            "a set, list, hash, zset or stream change that is not a whole value");
      }
      if ((set && set->members.size() == 0) || (list && list->elements.size() == 0) ||
          (hash && hash->fields.size() == 0) || (zset && zset->members.size() == 0) ||
          (stream && stream->value.size() == 0)) {
        return Status::Corruption("a set, list, hash, zset or stream without its value");
      }
      return {};
    }
    switch (type_) {
      case store::KeyType::kString:
      case store::KeyType::kSet:
      case store::KeyType::kList:
      case store::KeyType::kHash:
      case store::KeyType::kZset:
      case store::KeyType::kStream:
      case store::KeyType::kSsmPrefix:
        return Status::Corruption("more than one record for a " +
                                  std::string(store::KeyTypeName(type_)) + " key");
      case store::KeyType::kVstore:
        return Rows(m, name);
      case store::KeyType::kKvPrefix:
        if (std::holds_alternative<SsmPut>(m) && name == key_ && !ssm_++) return {};
        if (const auto* v = std::get_if<VCreate>(&m)) {
          if (name != store::VectorStore::KeySid(key_) &&
              name != store::VectorStore::ValueSid(key_)) {
            return Status::Corruption("a session that is not the registration's");
          }
          for (const Session& s : sessions_) {
            if (s.sid == name) return Status::Corruption("a session created twice");
          }
          sessions_.push_back(Session{name, *v});
          return {};
        }
        return Rows(m, name);
      case store::KeyType::kPrefixIndex:
        if ((std::holds_alternative<PrefixBlocks>(m) ||
             std::holds_alternative<PrefixCheckpoints>(m)) &&
            name == key_) {
          return {};
        }
        return Status::Corruption("a record that is not the namespace's");
    }
    return Status::Corruption("an unknown key type");
  }
  store::KeyType type() const { return type_; }
  const std::string& key() const { return key_; }
  bool empty() const { return count_ == 0; }

 private:
  struct Session {
    std::string sid;
    VCreate created;
  };
  // V-store rows of a session created earlier in the payload, with its shape.
  Status Rows(const Mutation& m, const std::string& name) const {
    const auto* rows = std::get_if<VStore>(&m);
    if (rows == nullptr) return Status::Corruption("a record that is not the session's rows");
    for (const Session& s : sessions_) {
      if (s.sid != name) continue;
      if (rows->dim != s.created.dim || rows->tier != s.created.tier) {
        return Status::Corruption("rows of another dim or tier than their session");
      }
      return {};
    }
    return Status::Corruption("rows of a session the payload does not create");
  }

  uint64_t count_ = 0;
  store::KeyType type_ = store::KeyType::kString;
  std::string key_;
  int ssm_ = 0;
  std::vector<Session> sessions_;
};

}  // namespace

std::vector<Bytes> EncodeDump(const std::vector<Mutation>& records) {
  std::vector<Bytes> pieces;
  Xxh3 sum;
  const auto add = [&](Bytes piece) {
    sum.Add(piece.data(), piece.size());
    pieces.push_back(std::move(piece));
  };
  for (const Mutation& m : records) {
    std::vector<Bytes> payload = EncodePayload(m);
    Bytes header = Bytes::Allocate(kRecordHeaderSize);
    SealRecord(kDumpSeed, TypeOf(m), 0, payload, header.mutable_data());
    add(std::move(header));
    for (Bytes& piece : payload) {
      if (!piece.empty()) add(std::move(piece));
    }
  }
  Bytes footer = Bytes::Allocate(kDumpFooterSize);
  PutU16(footer.mutable_data(), kDumpVersion);
  sum.Add(footer.data(), 2);
  PutU64(footer.mutable_data() + 2, sum.Digest());
  pieces.push_back(std::move(footer));
  return pieces;
}

DumpStatus DecodeDump(const Bytes& payload, std::string_view key, DecodedDump& out) {
  out = DecodedDump{};
  const auto fail = [&](DumpStatus status, std::string why) {
    out.why = std::move(why);
    out.records.clear();
    return status;
  };
  if (payload.size() < kDumpFooterSize) return fail(DumpStatus::kBadFooter, "too short");
  const uint64_t body = payload.size() - kDumpFooterSize;
  const uint8_t* footer = payload.data() + body;
  if (GetU16(footer) != kDumpVersion) return fail(DumpStatus::kBadFooter, "another version");
  Xxh3 sum;
  sum.Add(payload.data(), body + 2);
  if (sum.Digest() != GetU64(footer + 2)) return fail(DumpStatus::kBadFooter, "bad checksum");

  ShapeCheck shape;
  uint64_t at = 0;
  while (at < body) {
    if (body - at < kRecordHeaderSize) return fail(DumpStatus::kBadFormat, "a cut record header");
    const RecordHeader h = DecodeRecordHeader(payload.data() + at);
    at += kRecordHeaderSize;
    if (h.magic != kRecordMagic || h.flags != 0 || h.db != 0 || h.lsn != 0) {
      return fail(DumpStatus::kBadFormat, "a bad record header");
    }
    if (h.payload_length > body - at) return fail(DumpStatus::kBadFormat, "a cut record");
    Mutation m;
    if (Status decoded = DecodePayload(h.type, payload.Slice(at, h.payload_length), m);
        !decoded.ok()) {
      return fail(DumpStatus::kBadFormat, decoded.message());
    }
    at += h.payload_length;
    Status shaped;
    const bool named = WithNameOf(m, [&](auto& name) {
      const std::string original{std::string_view(name)};
      shaped = shape.Add(m, original);
      // Renamed: the key, or a registration's session `<key>_pk` / `<key>_pv`.
      if (shaped.ok()) name = std::string(key) + original.substr(shape.key().size());
    });
    if (!named) return fail(DumpStatus::kBadFormat, "a record that names no key");
    if (!shaped.ok()) return fail(DumpStatus::kBadFormat, shaped.message());
    out.records.push_back(std::move(m));
  }
  if (shape.empty()) return fail(DumpStatus::kBadFormat, "no record");
  out.type = shape.type();
  out.original_key = shape.key();
  out.keys.emplace_back(key);
  for (const Mutation& m : out.records) {
    if (const auto* v = std::get_if<VCreate>(&m); v != nullptr && v->sid != key) {
      out.keys.push_back(v->sid);
    }
  }
  return DumpStatus::kOk;
}

}  // namespace prefixd::persist
