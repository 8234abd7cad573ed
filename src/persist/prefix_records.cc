#include "persist/prefix_records.h"

#include <set>

namespace prefixd::persist {
namespace {

using Kind = Outcome::Kind;

Outcome Refused(Kind kind, std::string why) {
  Outcome out;
  out.kind = kind;
  out.why = std::move(why);
  return out;
}

Outcome Counted(uint64_t count) {
  Outcome out;
  out.kind = count > 0 ? Kind::kApplied : Kind::kUnchanged;
  out.count = count;
  return out;
}

std::string NoNamespace(const std::string& ns) { return "no such prefix namespace '" + ns + "'"; }

// Layer blobs that name every layer of [0, count) once, each `bytes` long; sorted into `out`.
Status EveryLayerOnce(const LayerBlobs& layers, uint32_t count, uint64_t bytes,
                      std::string_view what, std::vector<Bytes>* out) {
  if (layers.size() != count) {
    return Status::InvalidArgument("needs all " + std::to_string(count) + " " + std::string(what) +
                                   " layers, got " + std::to_string(layers.size()));
  }
  out->assign(count, Bytes());
  std::vector<bool> seen(count, false);
  for (const auto& [layer, blob] : layers) {
    if (layer >= count) {
      return Status::InvalidArgument(std::string(what) + " layer " + std::to_string(layer) +
                                     " is not below " + std::to_string(count));
    }
    if (seen[layer])
      return Status::InvalidArgument(std::string(what) + " layer " + std::to_string(layer) +
                                     " twice");
    seen[layer] = true;
    if (bytes != 0 && blob.size() != bytes) {
      return Status::InvalidArgument(std::string(what) + " layer " + std::to_string(layer) +
                                     " has " + std::to_string(blob.size()) + " bytes where " +
                                     std::to_string(bytes) + " fit");
    }
    (*out)[layer] = blob;
  }
  return {};
}

Status CheckHashes(const Blob& hashes, std::string_view what, bool allow_empty) {
  if (hashes.size() % store::kHashBytes != 0) {
    return Status::InvalidArgument(std::string(what) + " of " + std::to_string(hashes.size()) +
                                   " bytes: not whole 16-byte hashes");
  }
  if (!allow_empty && hashes.size() == 0) return Status::InvalidArgument("no " + std::string(what));
  return {};
}

// A record's one 16-byte hash it hangs from (`from`, its `from_name` hash) and its list of 1 to
// 65536 whole hashes (`what`; `count_name` in the error when there are more).
Status CheckChain(const std::string& from, std::string_view from_name, const Blob& hashes,
                  std::string_view what, std::string_view count_name) {
  if (from.size() != store::kHashBytes) {
    return Status::InvalidArgument("the " + std::string(from_name) + " hash is not 16 bytes");
  }
  PREFIXD_RETURN_IF_ERROR(CheckHashes(hashes, what, false));
  if (hashes.size() / store::kHashBytes > 65536) {
    return Status::InvalidArgument("more than 65536 " + std::string(count_name));
  }
  return {};
}

}  // namespace

store::PrefixShape ShapeOf(const PrefixNamespace& r) {
  store::PrefixShape shape;
  shape.block = r.block;
  shape.attn = r.attn;
  shape.kv_dim = r.kv_dim;
  shape.recurrent = r.recurrent;
  shape.tier = store::TierFromCode(r.tier).value_or(store::Tier::kFp32);
  shape.max_bytes = r.max_bytes;
  return shape;
}

Status ToBatch(const store::PrefixShape& shape, const PrefixBlocks& r, store::BlockBatch* out) {
  out->parent = store::Hash128::Read(reinterpret_cast<const uint8_t*>(r.parent.data()));
  const Bytes hashes = r.hashes.Joined();
  out->hashes = store::ReadHashes(hashes.view());
  const uint64_t bytes = uint64_t{2} * out->hashes.size() * shape.block * shape.row_bytes();
  return EveryLayerOnce(r.layers, shape.attn, bytes, "attention", &out->layers);
}

Status ToBatch(const store::PrefixShape& shape, const PrefixCheckpoints& r,
               store::CheckpointBatch* out) {
  out->anchor = store::Hash128::Read(reinterpret_cast<const uint8_t*>(r.anchor.data()));
  out->first_length = r.first_length;
  const Bytes positions = r.positions.Joined();
  out->positions = store::ReadHashes(positions.view());
  const uint64_t k = out->positions.size();
  const uint64_t depth = r.first_length / shape.block;
  if ((r.first_length + k - 1) / shape.block != depth) {
    return Status::InvalidArgument(
        "the window crosses a block boundary (store the block first and split the window)");
  }
  PREFIXD_RETURN_IF_ERROR(EveryLayerOnce(r.states, shape.recurrent, 0, "recurrent", &out->states));
  for (size_t i = 0; i < out->states.size(); ++i) {
    if (out->states[i].size() % k != 0) {
      return Status::InvalidArgument(
          "recurrent layer " + std::to_string(i) + "'s " + std::to_string(out->states[i].size()) +
          " bytes do not split into " + std::to_string(k) + " equal states");
    }
  }
  const uint64_t rows = out->TailRows(shape.block);
  if (rows == 0) {
    if (!r.tails.empty())
      return Status::InvalidArgument("TAIL given at a block boundary (there is no partial block)");
    out->tails.clear();
    return {};
  }
  return EveryLayerOnce(r.tails, shape.attn, 2 * rows * shape.row_bytes(), "TAIL attention",
                        &out->tails);
}

Outcome ApplyPrefix(const PrefixNamespace& r, store::PrefixStore& s,
                    const std::function<void()>& hook) {
  store::PrefixShape existing;
  switch (s.Create(r.ns, ShapeOf(r), &existing, hook)) {
    case store::PrefixStore::CreateResult::kCreated:
      return Counted(1);
    case store::PrefixStore::CreateResult::kExists:
      return Counted(0);
    case store::PrefixStore::CreateResult::kOtherShape:
      return Refused(Kind::kChanged, "namespace " + r.ns + " exists with " + existing.Describe());
  }
  return Counted(0);
}

Outcome ApplyPrefix(const PrefixBlocks& r, store::PrefixStore& s,
                    const std::function<void()>& hook) {
  Outcome out = Refused(Kind::kNoSession, NoNamespace(r.ns));
  s.With(r.ns, [&](store::PrefixIndex& index) {
    store::BlockBatch batch;
    if (Status fits = ToBatch(index.shape(), r, &batch); !fits.ok()) {
      out = Refused(Kind::kChanged, fits.message());
      return;
    }
    if (!batch.parent.IsRoot() && !index.HasBlock(batch.parent)) {
      out = Refused(Kind::kChanged, "parent block is not stored");
      return;
    }
    if (hook) hook();
    uint64_t stored = 0;
    index.StoreBlocks(batch, &stored);
    out = Counted(stored);
    out.kind = Kind::kApplied;
  });
  return out;
}

Outcome ApplyPrefix(const PrefixCheckpoints& r, store::PrefixStore& s,
                    const std::function<void()>& hook) {
  Outcome out = Refused(Kind::kNoSession, NoNamespace(r.ns));
  s.With(r.ns, [&](store::PrefixIndex& index) {
    store::CheckpointBatch batch;
    if (Status fits = ToBatch(index.shape(), r, &batch); !fits.ok()) {
      out = Refused(Kind::kChanged, fits.message());
      return;
    }
    const uint64_t depth = batch.first_length / index.shape().block;
    if (depth > 0 && index.BlockDepth(batch.anchor) != depth) {
      out = Refused(Kind::kChanged, "anchor block is not stored");
      return;
    }
    if (hook) hook();
    uint64_t stored = 0;
    index.StoreCheckpoints(batch, &stored);
    out = Counted(stored);
    out.kind = Kind::kApplied;
  });
  return out;
}

Outcome ApplyPrefix(const PrefixDrop& r, store::PrefixStore& s, const std::function<void()>& hook) {
  Outcome out = Refused(Kind::kNoSession, NoNamespace(r.ns));
  s.With(r.ns, [&](store::PrefixIndex& index) {
    if (hook) hook();
    const Bytes blocks = r.blocks.Joined(), ckpts = r.checkpoints.Joined();
    const auto block_hashes = store::ReadHashes(blocks.view());
    const auto positions = store::ReadHashes(ckpts.view());
    uint64_t dropped = index.DropCheckpoints(positions, r.evicted != 0);
    dropped += index.DropBlocks(block_hashes, r.evicted != 0);
    out = Counted(dropped);
    out.kind = Kind::kApplied;
  });
  return out;
}

Outcome ApplyPrefix(const PrefixNamespaceDrop& r, store::PrefixStore& s,
                    const std::function<void()>& hook) {
  return Counted(s.Drop(r.ns, hook) ? 1 : 0);
}

Status CheckPrefixRecord(const PrefixNamespace& r) {
  if (r.block < 1 || r.block > 4096)
    return Status::InvalidArgument("BLOCK " + std::to_string(r.block) + " is outside 1 to 4096");
  if (r.attn > 4096)
    return Status::InvalidArgument("ATTN " + std::to_string(r.attn) + " is outside 0 to 4096");
  if (r.recurrent > 4096)
    return Status::InvalidArgument("RECURRENT " + std::to_string(r.recurrent) +
                                   " is outside 0 to 4096");
  if (r.attn == 0 && r.recurrent == 0)
    return Status::InvalidArgument("ATTN and RECURRENT are both 0");
  if (r.kv_dim < 1 || r.kv_dim > 65536)
    return Status::InvalidArgument("KVDIM " + std::to_string(r.kv_dim) + " is outside 1 to 65536");
  auto tier = store::TierFromCode(r.tier);
  if (!tier) return Status::InvalidArgument("unknown tier code " + std::to_string(r.tier));
  if (std::string why = store::CheckDim(*tier, r.kv_dim); !why.empty()) {
    return Status::InvalidArgument(why);
  }
  return {};
}

Status CheckPrefixRecord(const PrefixBlocks& r) {
  return CheckChain(r.parent, "parent", r.hashes, "block hashes", "blocks");
}

Status CheckPrefixRecord(const PrefixCheckpoints& r) {
  PREFIXD_RETURN_IF_ERROR(CheckChain(r.anchor, "anchor", r.positions, "positions", "positions"));
  if (r.first_length == 0) return Status::InvalidArgument("a checkpoint at position 0");
  if (r.first_length > (uint64_t{1} << 40)) return Status::InvalidArgument("position past 2^40");
  return {};
}

Status CheckPrefixRecord(const PrefixDrop& r) {
  PREFIXD_RETURN_IF_ERROR(CheckHashes(r.blocks, "block hashes", true));
  return CheckHashes(r.checkpoints, "positions", true);
}

}  // namespace prefixd::persist
