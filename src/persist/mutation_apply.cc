// Check and Apply of every kind of change (mutation.h): the bounds each record is checked
// against before it is logged or replayed, how it changes the stores, and how the keyspace
// follows. Each is one visitor over Mutation with a case per kind, so a kind without one does
// not compile (the static_asserts below name which). Pure functions; any thread.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>

#include "common/scratch_array.h"
#include "persist/mutation.h"
#include "persist/prefix_records.h"
#include "store/database.h"
#include "store/members.h"
#include "store/sorted_set.h"
#include "store/stream.h"
#include "store/vector_codec.h"

namespace prefixd::persist {
namespace {

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<uint64_t>::max();
  }
  return a * b;
}

// Checks shared by the record types.
struct Checker {
  const Limits& limits;
  Verdict verdict;

  bool Fail(std::string why, bool out_of_memory = false) {
    if (verdict.ok) verdict = Verdict{false, out_of_memory, std::move(why)};
    return false;
  }
  bool Sid(std::string_view sid, std::string_view what, size_t min, size_t suffix = 0) {
    const uint64_t most = limits.max_sid_len > suffix ? limits.max_sid_len - suffix : 0;
    if (sid.size() >= min && sid.size() <= most) return true;
    return Fail(std::string(what) + " of " + std::to_string(sid.size()) +
                " bytes is outside 1 to " + std::to_string(most));
  }
  // A known tier, dim within limits and storable in it; the tier on success.
  std::optional<store::Tier> Shape(uint32_t tier_code, uint32_t dim) {
    auto tier = store::TierFromCode(tier_code);
    if (!tier) return Fail("unknown tier code " + std::to_string(tier_code)), std::nullopt;
    if (dim < 1 || dim > limits.max_dim) {
      return Fail("dim " + std::to_string(dim) + " is outside 1 to " +
                  std::to_string(limits.max_dim)),
             std::nullopt;
    }
    if (std::string why = store::CheckDim(*tier, dim); !why.empty()) {
      return Fail(why), std::nullopt;
    }
    return tier;
  }

  void operator()(const SsmPut& r) {
    Sid(r.sid, "sid", 0);
    for (const auto& [layer, blob] : r.layers) {
      if (layer > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
        Fail("layer " + std::to_string(layer) + " is past 2147483647");
        return;
      }
    }
    if (r.layers.empty()) Fail("no layers");
  }
  void operator()(const SsmDropLayer& r) {
    Sid(r.sid, "sid", 0);
    if (r.layer > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      Fail("layer " + std::to_string(r.layer) + " is past 2147483647");
    }
  }
  void operator()(const SsmDropSession& r) { Sid(r.sid, "sid", 0); }
  void operator()(const FlushAll&) {}
  void operator()(const FlushDb&) {}
  void operator()(const SwapDb& r) {
    if (r.a >= store::Databases::kMaxCount || r.b >= store::Databases::kMaxCount) {
      Fail("database " + std::to_string(std::max(r.a, r.b)) + " is past 65535");
    }
  }
  void operator()(const KeyExpire& r) { Sid(r.key, "key", 0); }
  void operator()(const StringSet& r) {
    Sid(r.key, "key", 0);
    if ((r.flags >> StringSet::kEncodingShift) > 2) {
      Fail("string flags " + std::to_string(r.flags) + " name no encoding");
    } else if (r.value.size() > limits.memory_budget) {
      Fail("a string of " + std::to_string(r.value.size()) + " bytes is more than the " +
               std::to_string(limits.memory_budget) + " this process may use",
           /*out_of_memory=*/true);
    }
  }
  void operator()(const StringMultiSet& r) {
    if (r.entries.empty()) Fail("no keys");
    uint64_t bytes = 0;
    for (const StringSet& entry : r.entries) {
      (*this)(entry);
      bytes += entry.value.size();
    }
    if (verdict.ok && bytes > limits.memory_budget) {
      Fail(std::to_string(bytes) + " bytes of strings, more than the " +
               std::to_string(limits.memory_budget) + " this process may use",
           /*out_of_memory=*/true);
    }
  }
  void operator()(const StringDel& r) { Sid(r.key, "key", 0); }
  void Members(const Blob& members) {
    if (members.size() > limits.memory_budget) {
      Fail(std::to_string(members.size()) + " bytes of members, more than the " +
               std::to_string(limits.memory_budget) + " this process may use",
           /*out_of_memory=*/true);
    } else if (!store::ValidMembers(members.Joined().view())) {
      Fail("members that are not length-prefixed strings");
    }
  }
  void operator()(const SetValue& r) {
    if (!Sid(r.key, "key", 0)) return;
    if (r.encoding > static_cast<uint32_t>(store::SetEncoding::kHashtable)) {
      Fail("set encoding " + std::to_string(r.encoding) + " is unknown");
    } else if (r.op > SetValue::kRemove) {
      Fail("set operation " + std::to_string(r.op) + " is unknown");
    } else {
      Members(r.members);
    }
  }
  void operator()(const HashValue& r) {
    if (!Sid(r.key, "key", 0)) return;
    if (r.encoding > static_cast<uint32_t>(store::HashEncoding::kHashtable)) {
      Fail("hash encoding " + std::to_string(r.encoding) + " is unknown");
    } else if (r.op > HashValue::kDelete) {
      Fail("hash operation " + std::to_string(r.op) + " is unknown");
    } else {
      Members(r.fields);
      if (verdict.ok && r.op != HashValue::kDelete &&
          !store::ValidPairs(r.fields.Joined().view())) {
        Fail("a hash field without its value");
      }
    }
  }
  void operator()(const ListValue& r) {
    if (!Sid(r.key, "key", 0)) return;
    if (r.op > ListValue::kPopTail) {
      Fail("list operation " + std::to_string(r.op) + " is unknown");
    } else if (r.op >= ListValue::kPopHead && r.elements.size() != 0) {
      Fail("a list pop that names elements");
    } else if (r.op < ListValue::kPopHead && r.count != 0) {
      Fail("a list count outside a pop");
    } else {
      Members(r.elements);
    }
  }
  void operator()(const ZsetValue& r) {
    if (!Sid(r.key, "key", 0)) return;
    if (r.encoding > static_cast<uint32_t>(store::ZsetEncoding::kSkiplist)) {
      Fail("zset encoding " + std::to_string(r.encoding) + " is unknown");
    } else if (r.op > ZsetValue::kRemove) {
      Fail("zset operation " + std::to_string(r.op) + " is unknown");
    } else if (r.members.size() > limits.memory_budget) {
      Members(r.members);  // the budget's message
    } else if (r.op == ZsetValue::kRemove) {
      Members(r.members);
    } else if (!store::ValidZset(r.members.Joined().view())) {
      Fail("zset pairs that are not ordered (score, member) items");
    }
  }
  void operator()(const StreamValue& r) {
    if (!Sid(r.key, "key", 0)) return;
    if (r.value.size() > limits.memory_budget) {
      Fail(std::to_string(r.value.size()) + " bytes of stream, more than the " +
               std::to_string(limits.memory_budget) + " this process may use",
           /*out_of_memory=*/true);
      return;
    }
    const Bytes value = r.value.Joined();
    bool valid = false;
    switch (r.op) {
      case StreamValue::kWhole:
        valid = value.empty() || store::ValidStream(value.view());
        break;
      case StreamValue::kAppend:
        valid = store::ValidStreamEntry(value.view());
        break;
      case StreamValue::kTrim:
        valid = value.empty();
        break;
      case StreamValue::kDelete:
        valid = store::ValidStreamIds(value.view());
        break;
      case StreamValue::kGroups:
        valid = store::ValidStreamGroups(value.view());
        break;
      case StreamValue::kMeta:
        valid = store::ValidStreamMetaChange(value.view());
        break;
      default:
        Fail("stream operation " + std::to_string(r.op) + " is unknown");
        return;
    }
    if (!valid) Fail("a stream value that does not decode for its operation");
  }
  void operator()(const SnapshotEnd&) {}
  void operator()(const VCreate& r) {
    if (Sid(r.sid, "sid", 1)) Shape(r.tier, r.dim);
  }
  void operator()(const VStore& r) {
    if (!Sid(r.sid, "sid", 1)) return;
    auto tier = Shape(r.tier, r.dim);
    if (!tier) return;
    if (r.layer >= limits.max_layers) {
      Fail("layer " + std::to_string(r.layer) + " is not below the layer limit " +
           std::to_string(limits.max_layers));
      return;
    }
    if (r.rows == 0 || r.start > limits.max_tokens || r.rows > limits.max_tokens - r.start) {
      Fail("rows [" + std::to_string(r.start) + ", +" + std::to_string(r.rows) +
           ") do not end within 1 to " + std::to_string(limits.max_tokens));
      return;
    }
    const uint64_t expected = SaturatingMul(r.rows, store::RowBytes(*tier, r.dim));
    if (r.data.size() != expected) {
      Fail(std::to_string(r.data.size()) + " bytes of rows where " + std::to_string(r.rows) +
           " rows take " + std::to_string(expected));
      return;
    }
    const uint64_t cost = store::VectorStore::WriteCostEstimate(r.dim, *tier, r.start, r.rows);
    if (cost > limits.memory_budget) {
      Fail("storing rows [" + std::to_string(r.start) + ", " + std::to_string(r.start + r.rows) +
               ") would take about " + std::to_string(cost) + " bytes, more than the " +
               std::to_string(limits.memory_budget) + " this process may use",
           /*out_of_memory=*/true);
    }
  }
  void operator()(const VDrop& r) { Sid(r.sid, "sid", 1); }
  void Prefix(const PrefixFields& r) {
    if (!Sid(r.ns, "namespace", 1, 3) || !Shape(r.tier, r.kv_dim)) return;
    if (r.block_hashes.size() % 8 != 0) {
      Fail(std::to_string(r.block_hashes.size()) + " bytes of block hashes: not whole u64s");
    } else if (r.block_hashes.size() > kMaxBlockHashBytes) {
      Fail(std::to_string(r.block_hashes.size() / 8) + " block hashes: more than 16777216");
    } else if (r.block_size > kMaxBlockSize) {
      Fail("block size " + std::to_string(r.block_size) + " is past 2147483648");
    }
  }
  void operator()(const KvRegister& r) { Prefix(r); }
  void operator()(const KvPrefix& r) { Prefix(r); }
  void operator()(const KvDrop& r) { Sid(r.ns, "namespace", 1, 3); }
  template <typename R>
  void PrefixRecord(const R& r) {
    if (!Sid(r.ns, "namespace", 1)) return;
    if (Status checked = CheckPrefixRecord(r); !checked.ok()) Fail(checked.message());
  }
  void operator()(const PrefixNamespace& r) { PrefixRecord(r); }
  void operator()(const PrefixBlocks& r) {
    PrefixRecord(r);
    uint64_t bytes = 0;
    for (const auto& [layer, blob] : r.layers) bytes += blob.size();
    if (bytes > limits.memory_budget) {
      Fail(std::to_string(bytes) + " bytes of K/V, more than this process may use", true);
    }
  }
  void operator()(const PrefixCheckpoints& r) { PrefixRecord(r); }
  void operator()(const PrefixDrop& r) { PrefixRecord(r); }
  void operator()(const PrefixNamespaceDrop& r) { Sid(r.ns, "namespace", 1); }

  static constexpr uint64_t kMaxBlockHashBytes = (uint64_t{1} << 24) * 8;
  static constexpr uint64_t kMaxBlockSize = uint64_t{1} << 31;
};

store::PrefixSpec SpecOf(const PrefixFields& r) {
  store::PrefixSpec spec;
  spec.kv_dim = r.kv_dim;
  spec.tier = *store::TierFromCode(r.tier);
  spec.block_size = r.block_size;
  spec.block_hashes = r.block_hashes.Joined();
  if (r.prefill_us != PrefixFields::kNoPrefill) spec.prefill_us = r.prefill_us;
  return spec;
}

using Kind = Outcome::Kind;

Outcome Applied(bool changed) {
  return Outcome{changed ? Kind::kApplied : Kind::kUnchanged, {}, 0, {}};
}

struct Applier {
  static constexpr size_t kCompactBelow = size_t{32} << 10;
  const Stores& stores;
  const std::function<void()>& hook;

  Outcome operator()(const SsmPut& r) {
    stores.state.PutMany(r.sid, r.layers, hook);
    return Applied(true);
  }
  Outcome operator()(const SsmDropLayer& r) {
    return Applied(stores.state.Drop(r.sid, r.layer, hook) > 0);
  }
  Outcome operator()(const SsmDropSession& r) {
    return Applied(stores.state.DropSession(r.sid, hook) > 0);
  }
  Outcome operator()(const FlushDb&) { return (*this)(FlushAll{}); }
  // The exchange itself needs every database: the caller (WritePath::Apply, replay) makes it.
  Outcome operator()(const SwapDb&) {
    if (hook) hook();
    return Applied(true);
  }
  Outcome operator()(const FlushAll&) {
    // The caller keeps every other change out (the mutation gate), so the log record and the
    // clear of both stores are one step to everyone else.
    if (hook) hook();
    stores.state.Clear();
    if (stores.vectors != nullptr) stores.vectors->Clear();
    if (stores.prefixes != nullptr) stores.prefixes->Clear();
    return Applied(true);
  }
  Outcome operator()(const SnapshotEnd&) { return Applied(false); }
  Outcome operator()(const KeyExpire& r) {
    if (stores.keys == nullptr) return Applied(false);
    return Applied(stores.keys->SetExpiry(r.key, static_cast<int64_t>(r.at_ms), hook));
  }
  // The keyspace's form of a string record.
  static store::Keyspace::StringPut Put(const StringSet& r) {
    // A value read back from a file is a slice of its whole record (a slice's capacity is its
    // length): one the key keeps as its own buffer gets a compact copy, so the record's buffer is
    // freed. A value below the entry's inline size is copied into the entry; a large value keeps
    // its buffer, and a live value is already compact.
    Bytes value = r.value.Joined();
    if (value.size() >= store::KeyEntry::kInlineValueBelow && value.size() < kCompactBelow &&
        value.capacity() <= value.size()) {
      value = Bytes::CopyCompact(value.view());
    }
    return store::Keyspace::StringPut{
        r.key, std::move(value),
        static_cast<store::StringEncoding>(r.flags >> StringSet::kEncodingShift),
        (r.flags & StringSet::kKeepTtl) ? store::KeepTtl::kYes : store::KeepTtl::kNo,
        static_cast<int64_t>(r.at_ms)};
  }
  Outcome operator()(const StringSet& r) {
    if (stores.keys == nullptr) return Applied(false);
    store::Keyspace::StringPut put = Put(r);
    return Applied(stores.keys->PutString(put.key, std::move(put.value), put.encoding, put.keep_ttl,
                                          put.at_ms, hook, stores.strings_only_over_live_at_ms));
  }
  Outcome operator()(const StringMultiSet& r) {
    if (stores.keys == nullptr) return Applied(false);
    ScratchArray<store::Keyspace::StringPut, 16> puts(r.entries.size());
    for (size_t i = 0; i < r.entries.size(); ++i) puts[i] = Put(r.entries[i]);
    return Applied(stores.keys->PutStrings(puts.span(), hook, stores.strings_only_over_live_at_ms));
  }
  Outcome operator()(const StringDel& r) {
    if (stores.keys == nullptr) return Applied(false);
    return Applied(stores.keys->RemoveString(r.key, hook));
  }
  // A set or list: its whole value or an operation on the value it has, under its shard lock;
  // the key's expiry kept, no members left deletes it.
  Outcome ChangeMembers(const std::string& key, store::KeyType type, uint32_t encoding,
                        const std::function<Bytes(std::string_view)>& change) {
    if (stores.keys == nullptr) return Applied(false);
    return Applied(stores.keys->ChangeMembers(
        key, type, static_cast<store::StringEncoding>(encoding), change, hook));
  }
  Outcome operator()(const SetValue& r) {
    const Bytes members = r.members.Joined();
    const bool intset = r.encoding == static_cast<uint32_t>(store::SetEncoding::kIntset);
    return ChangeMembers(r.key, store::KeyType::kSet, r.encoding, [&](std::string_view old) {
      if (r.op == SetValue::kAdd) return store::AddMembers(old, members.view(), intset);
      if (r.op == SetValue::kRemove) return store::RemoveMembers(old, members.view());
      return Bytes::CopyCompact(members.view());
    });
  }
  Outcome operator()(const HashValue& r) {
    const Bytes fields = r.fields.Joined();
    return ChangeMembers(r.key, store::KeyType::kHash, r.encoding, [&](std::string_view old) {
      if (r.op == HashValue::kSet) return store::SetFields(old, fields.view());
      if (r.op == HashValue::kDelete) return store::RemoveFields(old, fields.view());
      return Bytes::CopyCompact(fields.view());
    });
  }
  Outcome operator()(const ListValue& r) {
    const Bytes elements = r.elements.Joined();
    return ChangeMembers(r.key, store::KeyType::kList, 0, [&](std::string_view old) {
      switch (r.op) {
        case ListValue::kPushHead:
        case ListValue::kPushTail:
          return store::PushElements(old, elements.view(), r.op == ListValue::kPushHead);
        case ListValue::kPopHead:
        case ListValue::kPopTail:
          return store::PopElements(old, r.count, r.op == ListValue::kPopHead);
        default:
          return Bytes::CopyCompact(elements.view());
      }
    });
  }
  Outcome operator()(const ZsetValue& r) {
    const Bytes members = r.members.Joined();
    return ChangeMembers(r.key, store::KeyType::kZset, r.encoding, [&](std::string_view old) {
      if (r.op == ZsetValue::kScores) return store::ZsetPutScores(old, members.view());
      if (r.op == ZsetValue::kRemove) return store::ZsetRemoveMembers(old, members.view());
      return Bytes::CopyCompact(members.view());
    });
  }
  Outcome operator()(const StreamValue& r) {
    const Bytes value = r.value.Joined();
    if (r.op == StreamValue::kWhole && value.empty()) {
      if (stores.keys == nullptr) return Applied(false);
      return Applied(stores.keys->RemoveValue(r.key, store::KeyType::kStream, hook));
    }
    // An append without a trim, and new groups, go into the value's room when it has enough (no
    // copy of the entries).
    const bool append = r.op == StreamValue::kAppend && r.count == 0;
    if ((append || r.op == StreamValue::kGroups) && stores.keys != nullptr &&
        stores.keys->EditValue(
            r.key, store::KeyType::kStream,
            [&](uint8_t* data, size_t size) {
              return append ? store::StreamAppendInPlace(data, size, value.view())
                            : store::StreamReplaceGroupsInPlace(data, size, value.view());
            },
            hook)) {
      return Applied(true);
    }
    return ChangeMembers(r.key, store::KeyType::kStream, 0, [&](std::string_view old) {
      switch (r.op) {
        case StreamValue::kAppend:
          return store::StreamAppend(old, value.view(), r.count);
        case StreamValue::kTrim:
          return store::StreamTrim(old, r.count);
        case StreamValue::kDelete:
          return store::StreamDelete(old, value.view());
        case StreamValue::kGroups:
          return store::StreamReplaceGroups(old, value.view());
        case StreamValue::kMeta:
          return store::StreamSetMeta(old, value.view());
        default:
          return store::StreamWhole(value.view());
      }
    });
  }
  Outcome operator()(const VCreate& r) {
    if (stores.vectors == nullptr) return Applied(false);
    Outcome out;
    auto result = stores.vectors->Create(r.sid, r.dim, *store::TierFromCode(r.tier), r.index,
                                         stores.max_sessions, &out.info, hook);
    if (result == store::VectorStore::CreateResult::kExists) out.kind = Kind::kUnchanged;
    if (result == store::VectorStore::CreateResult::kLimit) out.kind = Kind::kLimit;
    return out;
  }
  Outcome operator()(const VStore& r) {
    if (stores.vectors == nullptr) return Applied(false);
    // Rows of a session dropped (or created again with another shape) later in the log, with a
    // snapshot already showing that, are moot: kNoSession / kChanged, and replay goes on.
    auto result = stores.vectors->Store(r.sid, r.layer, r.start, r.rows, r.data.Joined(), r.dim,
                                        *store::TierFromCode(r.tier), hook);
    if (result == store::VectorStore::StoreResult::kNoSession)
      return Outcome{Kind::kNoSession, {}, 0, {}};
    if (result == store::VectorStore::StoreResult::kChanged)
      return Outcome{Kind::kChanged, {}, 0, {}};
    return Applied(true);
  }
  Outcome operator()(const VDrop& r) {
    if (stores.vectors == nullptr) return Applied(false);
    return Applied(stores.vectors->Drop(r.sid, hook));
  }
  Outcome operator()(const KvRegister& r) {
    if (stores.vectors == nullptr) return Applied(false);
    // SSM state under the name becomes the registration's: it leaves the key's entry first.
    stores.state.Uncompact(r.ns);
    auto result = stores.vectors->Register(r.ns, SpecOf(r), r.key_index, r.value_index,
                                           stores.max_sessions, hook);
    if (result == store::VectorStore::RegisterResult::kExists) return Applied(false);
    if (result == store::VectorStore::RegisterResult::kLimit)
      return Outcome{Kind::kLimit, {}, 0, {}};
    return Applied(true);
  }
  Outcome operator()(const KvPrefix& r) {
    if (stores.vectors == nullptr) return Applied(false);
    stores.state.Uncompact(r.ns);
    if (hook) hook();
    stores.vectors->RestorePrefix(r.ns, SpecOf(r));
    return Applied(true);
  }
  Outcome operator()(const KvDrop& r) {
    if (stores.vectors == nullptr) return Applied(false);
    return Applied(stores.vectors->DropPrefix(r.ns, hook));
  }
  template <typename R>
  requires requires(const R& r, store::PrefixStore& s) { ApplyPrefix(r, s, {}); }
  Outcome operator()(const R& r) {
    if (stores.prefixes == nullptr) return Applied(false);
    return ApplyPrefix(r, *stores.prefixes, hook);
  }
};

// Brings the keyspace's entry for each key a record touched in step with the stores: the key
// exists, with the type of the store that holds it, or it does not.
struct KeySync {
  const Stores& stores;

  void Key(std::string_view key) const {
    stores.keys->Sync(key, [&]() -> std::optional<store::KeyType> {
      // A registration first: SSM state under its name is part of the prefix (one entry).
      if (stores.vectors != nullptr && stores.vectors->Prefix(key))
        return store::KeyType::kKvPrefix;
      if (stores.state.Contains(key)) return store::KeyType::kSsmPrefix;
      if (stores.vectors != nullptr && stores.vectors->Describe(key))
        return store::KeyType::kVstore;
      return std::nullopt;
    });
  }
  void Registration(const std::string& ns) const {
    Key(ns);
    Key(store::VectorStore::KeySid(ns));
    Key(store::VectorStore::ValueSid(ns));
  }
  void operator()(const SsmPut& r) const { Key(r.sid); }
  void operator()(const SsmDropLayer& r) const { Key(r.sid); }
  void operator()(const SsmDropSession& r) const { Key(r.sid); }
  void operator()(const FlushAll&) const { stores.keys->Clear(); }
  void operator()(const FlushDb&) const { stores.keys->Clear(); }
  void operator()(const SwapDb&) const {}
  void operator()(const SnapshotEnd&) const {}
  void operator()(const KeyExpire&) const {}
  void operator()(const StringSet&) const {}  // the keyspace holds strings itself
  void operator()(const StringMultiSet&) const {}
  void operator()(const StringDel&) const {}
  void operator()(const SetValue&) const {}  // sets and lists too
  void operator()(const ListValue&) const {}
  void operator()(const HashValue&) const {}
  void operator()(const ZsetValue&) const {}
  void operator()(const StreamValue&) const {}
  void operator()(const VCreate& r) const { Key(r.sid); }
  void operator()(const VStore&) const {}
  void operator()(const VDrop& r) const { Key(r.sid); }
  void operator()(const KvRegister& r) const { Registration(r.ns); }
  void operator()(const KvPrefix& r) const { Registration(r.ns); }
  void operator()(const KvDrop& r) const { Registration(r.ns); }
  void PrefixKey(const std::string& ns) const {
    stores.keys->Sync(ns, [&]() -> std::optional<store::KeyType> {
      if (stores.prefixes != nullptr && stores.prefixes->Contains(ns)) {
        return store::KeyType::kPrefixIndex;
      }
      return std::nullopt;
    });
  }
  void operator()(const PrefixNamespace& r) const { PrefixKey(r.ns); }
  void operator()(const PrefixBlocks&) const {}
  void operator()(const PrefixCheckpoints&) const {}
  void operator()(const PrefixDrop&) const {}
  void operator()(const PrefixNamespaceDrop& r) const { PrefixKey(r.ns); }
};

// Every kind has its case in each visitor: a kind added to Mutation without one fails here,
// naming the visitor (std::visit would fail too, less legibly).
template <typename Visitor, typename... Kinds>
consteval bool HandlesEveryKind(std::variant<Kinds...>*) {
  return (std::is_invocable_v<Visitor&, const Kinds&> && ...);
}
static_assert(HandlesEveryKind<Checker>(static_cast<Mutation*>(nullptr)),
              "a kind of change has no case in Check");
static_assert(HandlesEveryKind<Applier>(static_cast<Mutation*>(nullptr)),
              "a kind of change has no case in Apply");
static_assert(HandlesEveryKind<KeySync>(static_cast<Mutation*>(nullptr)),
              "a kind of change has no case in Apply's keyspace step (KeySync)");

}  // namespace

uint64_t MemoryBudget() {
  uint64_t budget = SaturatingMul(static_cast<uint64_t>(std::max<long>(0, sysconf(_SC_PHYS_PAGES))),
                                  static_cast<uint64_t>(std::max<long>(1, sysconf(_SC_PAGE_SIZE))));
  if (budget == 0) budget = std::numeric_limits<uint64_t>::max();
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit limit{};
    if (getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      budget = std::min<uint64_t>(budget, limit.rlim_cur);
    }
  }
  return budget;
}

Limits Limits::Hard() {
  // At least the maxima of max-sid-len, vstore-max-layers, vstore-max-tokens (2^28; 2^40 in
  // earlier builds, whose logs must still replay) and vstore-max-dim.
  return Limits{uint64_t{64} << 20, 0x7fffffff, uint64_t{1} << 40, 262144, MemoryBudget()};
}

Verdict Check(const Mutation& m, const Limits& limits) {
  Checker checker{limits, {}};
  std::visit([&](const auto& r) { checker(r); }, m);
  return checker.verdict;
}

Outcome Apply(const Mutation& m, const Stores& stores, const std::function<void()>& under_lock) {
  Outcome outcome = std::visit(Applier{stores, under_lock}, m);
  if (stores.keys != nullptr) std::visit(KeySync{stores}, m);
  return outcome;
}

}  // namespace prefixd::persist