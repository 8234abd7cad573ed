#include "persist/key_records.h"

#include <optional>
#include <stdexcept>
#include <utility>

#include "store/stream.h"

namespace prefixd::persist {

void WriteVectorSession(const std::string& sid, const store::VectorSessionInfo& info,
                        const std::vector<store::LayerRead>& layers, const RecordSink& write) {
  const auto tier = static_cast<uint32_t>(info.tier);
  write(VCreate{sid, info.index, info.dim, tier});
  for (const store::LayerRead& layer : layers) {
    for (const store::RowRun& run : layer.runs) {
      write(VStore{sid, layer.layer, run.start, run.rows.rows, info.dim, tier,
                   Blob{run.rows.pieces}});
    }
  }
}

KvPrefix KvPrefixRecord(const std::string& ns, const store::PrefixSpec& spec) {
  KvPrefix record;
  record.ns = ns;
  record.kv_dim = spec.kv_dim;
  record.tier = static_cast<uint32_t>(spec.tier);
  record.block_size = spec.block_size;
  if (spec.prefill_us) record.prefill_us = *spec.prefill_us;
  if (!spec.block_hashes.empty()) record.block_hashes.pieces.push_back(spec.block_hashes);
  return record;
}

void WritePrefixNamespace(const std::string& ns, const store::PrefixIndex& index,
                          const RecordSink& write) {
  // Blocks parents first: replay keeps the index prefix-closed.
  const store::PrefixShape& shape = index.shape();
  write(PrefixNamespace{ns, shape.block, shape.attn, shape.kv_dim, shape.recurrent,
                        static_cast<uint32_t>(shape.tier), shape.max_bytes});
  index.ForEachBlock([&](const store::BlockBatch& batch) {
    PrefixBlocks record{ns, batch.parent.Raw(), {}, {}};
    record.hashes.pieces.push_back(Bytes::CopyOf(batch.hashes[0].Raw()));
    for (uint32_t layer = 0; layer < batch.layers.size(); ++layer) {
      record.layers.emplace_back(layer, batch.layers[layer]);
    }
    write(record);
  });
  index.ForEachCheckpoint([&](const store::CheckpointBatch& batch) {
    PrefixCheckpoints record{ns, batch.anchor.Raw(), batch.first_length, {}, {}, {}};
    record.positions.pieces.push_back(Bytes::CopyOf(batch.positions[0].Raw()));
    for (uint32_t layer = 0; layer < batch.states.size(); ++layer) {
      record.states.emplace_back(layer, batch.states[layer]);
    }
    for (uint32_t layer = 0; layer < batch.tails.size(); ++layer) {
      record.tails.emplace_back(layer, batch.tails[layer]);
    }
    write(record);
  });
}

StringSet StringRecord(const std::string& key, const store::KeyInfo& info) {
  const uint32_t flags = static_cast<uint32_t>(info.encoding) << StringSet::kEncodingShift;
  Bytes value = info.value;
  if (info.cold && info.place.file != nullptr) {
    std::string error;
    if (!info.place.file->Read(info.place.offset, info.place.length, value, error)) {
      throw std::runtime_error("reading cold string " + key + " failed: " + error);
    }
  }
  return StringSet{key, flags, static_cast<uint64_t>(info.expire_at_ms), Blob{{std::move(value)}}};
}

Mutation MembersRecord(const std::string& key, const store::KeyInfo& info) {
  if (info.type == store::KeyType::kSet) {
    return SetValue{key, static_cast<uint32_t>(info.encoding), SetValue::kWhole,
                    Blob{{info.value}}};
  }
  if (info.type == store::KeyType::kHash) {
    return HashValue{key, static_cast<uint32_t>(info.encoding), HashValue::kWhole,
                     Blob{{info.value}}};
  }
  if (info.type == store::KeyType::kZset) {
    return ZsetValue{key, static_cast<uint32_t>(info.encoding), ZsetValue::kWhole,
                     Blob{{info.value}}};
  }
  if (info.type == store::KeyType::kStream) {
    // The bytes in use, without the room for appends (a slice: nothing is copied).
    return StreamValue{key, StreamValue::kWhole, 0,
                       Blob{{info.value.Slice(0, store::StreamUsedBytes(info.value.view()))}}};
  }
  return ListValue{key, ListValue::kWhole, 0, Blob{{info.value}}};
}

namespace {

bool SsmSession(const store::StateStore& state, const std::string& sid,
                std::vector<Mutation>& out) {
  auto layers = state.ReadSession(sid);
  if (!layers) return false;
  out.push_back(SsmPut{sid, std::move(*layers)});
  return true;
}

bool VectorSession(const store::VectorStore& vectors, const std::string& sid,
                   std::vector<Mutation>& out) {
  auto session = vectors.ReadSessionRuns(sid);
  if (!session) return false;
  WriteVectorSession(sid, session->first, session->second,
                     [&](const Mutation& m) { out.push_back(m); });
  return true;
}

}  // namespace

bool KeyRecords(const KeyStores& stores, const std::string& key, const store::KeyInfo& info,
                std::vector<Mutation>& out) {
  const auto sink = [&](const Mutation& m) { out.push_back(m); };
  switch (info.type) {
    case store::KeyType::kString: {
      StringSet record = StringRecord(key, info);
      record.at_ms = 0;
      out.push_back(std::move(record));
      return true;
    }
    case store::KeyType::kSsmPrefix:
      return SsmSession(stores.state, key, out);
    case store::KeyType::kVstore:
      return VectorSession(stores.vectors, key, out);
    case store::KeyType::kKvPrefix: {
      auto spec = stores.vectors.Prefix(key);
      if (!spec) return false;
      out.push_back(KvPrefixRecord(key, *spec));
      SsmSession(stores.state, key, out);
      VectorSession(stores.vectors, store::VectorStore::KeySid(key), out);
      VectorSession(stores.vectors, store::VectorStore::ValueSid(key), out);
      return true;
    }
    case store::KeyType::kSet:
    case store::KeyType::kList:
    case store::KeyType::kHash:
    case store::KeyType::kZset:
    case store::KeyType::kStream:
      out.push_back(MembersRecord(key, info));
      return true;
    case store::KeyType::kPrefixIndex:
      return stores.prefixes.With(
          key, [&](const store::PrefixIndex& index) { WritePrefixNamespace(key, index, sink); });
  }
  return false;
}

}  // namespace prefixd::persist
