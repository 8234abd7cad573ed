#include "store/prefix_index.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <tuple>

#include "common/scratch_array.h"

namespace prefixd::store {
namespace {

// A lease's nodes in the lease map and the expiry set, beyond the LeaseEntry itself.
constexpr uint64_t kLeaseNodeBytes = 96;

uint64_t SumSizes(const std::vector<Bytes>& v) {
  uint64_t total = 0;
  for (const Bytes& b : v) total += b.size();
  return total;
}

// A lease's tail rows of `layer` (K for half 0, V for 1). Only for a run past the lease's whole
// blocks: a lease without a tail has no tail vectors at all.
const Bytes& TailOf(const LeaseView& view, int half, uint32_t layer) {
  return half == 0 ? view.tail_k[layer] : view.tail_v[layer];
}

}  // namespace

std::vector<Hash128> ReadHashes(std::string_view raw) {
  std::vector<Hash128> out(raw.size() / kHashBytes);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = Hash128::Read(reinterpret_cast<const uint8_t*>(raw.data()) + i * kHashBytes);
  }
  return out;
}

std::string PrefixShape::Describe() const {
  return "BLOCK " + std::to_string(block) + " ATTN " + std::to_string(attn) + " KVDIM " +
         std::to_string(kv_dim) + " RECURRENT " + std::to_string(recurrent) + " VQUANT " +
         std::string(TierName(tier));
}

uint64_t CheckpointBatch::TailRows(uint32_t block) const {
  if (positions.empty()) return 0;
  const uint64_t base = first_length / block * block;
  return first_length + positions.size() - 1 - base;
}

PrefixIndex::PrefixIndex(PrefixShape shape)
    : shape_(shape), records_(sizeof(Block)), pages_(shape.page_bytes()) {}

uint32_t PrefixIndex::FindBlock(const Hash128& h) const {
  const uint32_t id = blocks_.Find(h, [&](uint32_t i) -> const Hash128& { return Rec(i).hash; });
  return id == HashSlots::kEmpty ? kNone : id;
}

uint32_t PrefixIndex::FindCheckpoint(const Hash128& h) const {
  const uint32_t id =
      checkpoints_.Find(h, [&](uint32_t i) -> const Hash128& { return ckpt_rec_[i].position; });
  return id == HashSlots::kEmpty ? kNone : id;
}

uint32_t PrefixIndex::Tick() {
  if (clock_ >= kClockLimit) RenumberClock();
  return ++clock_;
}

void PrefixIndex::RenumberClock() {
  // Every live entry's last use becomes its rank: the order is kept, the numbers start over.
  std::vector<std::tuple<uint32_t, bool, uint32_t>> order;  // (last use, is a block, id)
  for (uint32_t id = 0; id < records_.slots(); ++id) {
    if (Rec(id).live) order.emplace_back(Rec(id).last_use, true, id);
  }
  for (uint32_t id = 0; id < ckpt_rec_.size(); ++id) {
    if (ckpt_rec_[id].live) order.emplace_back(ckpt_rec_[id].last_use, false, id);
  }
  std::sort(order.begin(), order.end());
  uint32_t rank = 0;
  for (const auto& [use, is_block, id] : order) {
    rank += 1;
    if (is_block) {
      Rec(id).last_use = rank;
    } else {
      ckpt_rec_[id].last_use = rank;
    }
  }
  clock_ = rank;
}

void PrefixIndex::LinkChild(uint32_t parent, uint32_t id) {
  uint32_t& head = FirstChild(parent);
  Block& b = Rec(id);
  b.prev_sibling = kNone;
  b.next_sibling = head;
  if (head != kNone) Rec(head).prev_sibling = id;
  head = id;
}

void PrefixIndex::UnlinkChild(uint32_t id) {
  Block& b = Rec(id);
  if (b.prev_sibling != kNone) {
    Rec(b.prev_sibling).next_sibling = b.next_sibling;
  } else {
    FirstChild(b.parent) = b.next_sibling;
  }
  if (b.next_sibling != kNone) Rec(b.next_sibling).prev_sibling = b.prev_sibling;
  b.prev_sibling = b.next_sibling = kNone;
}

void PrefixIndex::LinkAnchored(uint32_t anchor, uint32_t id, bool boundary) {
  Checkpoint& c = ckpt_rec_[id];
  uint32_t& head = FirstAnchored(anchor);
  if (!boundary && anchor != kNone && Rec(anchor).boundary) {
    // After the checkpoint at the block's end, which stays first: the match finds it from the
    // block record alone.
    Checkpoint& first = ckpt_rec_[head];
    c.prev_anchored = head;
    c.next_anchored = first.next_anchored;
    if (first.next_anchored != kNone) ckpt_rec_[first.next_anchored].prev_anchored = id;
    first.next_anchored = id;
    return;
  }
  if (boundary) Rec(anchor).boundary = 1;
  c.prev_anchored = kNone;
  c.next_anchored = head;
  if (head != kNone) ckpt_rec_[head].prev_anchored = id;
  head = id;
}

void PrefixIndex::UnlinkAnchored(uint32_t id) {
  Checkpoint& c = ckpt_rec_[id];
  const bool was_first = c.prev_anchored == kNone;
  if (!was_first) {
    ckpt_rec_[c.prev_anchored].next_anchored = c.next_anchored;
  } else {
    FirstAnchored(c.anchor) = c.next_anchored;
  }
  if (c.next_anchored != kNone) ckpt_rec_[c.next_anchored].prev_anchored = c.prev_anchored;
  c.prev_anchored = c.next_anchored = kNone;
  if (!was_first || c.anchor == kNone || !Rec(c.anchor).boundary) return;
  // The checkpoint at the block's end went. Another one there (a client may store two under
  // different positions) takes its place first in the list, where the match looks.
  Rec(c.anchor).boundary = 0;
  const uint64_t end = uint64_t{Rec(c.anchor).depth} * shape_.block;
  for (uint32_t o = FirstAnchored(c.anchor); o != kNone; o = ckpt_rec_[o].next_anchored) {
    if (ckpt_rec_[o].length == end) {
      UnlinkAnchored(o);
      LinkAnchored(c.anchor, o, true);
      return;
    }
  }
}

uint32_t PrefixIndex::NewBlock(bool* reused) {
  *reused = !free_blocks_.empty();
  if (*reused) {
    const uint32_t id = free_blocks_.back();
    free_blocks_.pop_back();
    return id;
  }
  const uint32_t id = records_.slots();
  records_.Add(id);
  pages_.Add(id);
  new (records_.Mutable(id)) Block();
  return id;
}

uint32_t PrefixIndex::NewCheckpoint() {
  if (!free_ckpts_.empty()) {
    uint32_t id = free_ckpts_.back();
    free_ckpts_.pop_back();
    return id;
  }
  ckpt_rec_.emplace_back();
  return static_cast<uint32_t>(ckpt_rec_.size() - 1);
}

std::string PrefixIndex::StoreBlocks(const BlockBatch& batch, uint64_t* stored) {
  *stored = 0;
  uint32_t parent = kNone;
  if (!batch.parent.IsRoot()) {
    parent = FindBlock(batch.parent);
    if (parent == kNone) return "parent block is not stored";
  }
  const size_t half = static_cast<size_t>(shape_.block) * shape_.row_bytes();
  const size_t n = batch.hashes.size();
  size_t missing = 0;
  for (const Hash128& h : batch.hashes) missing += FindBlock(h) == kNone ? 1 : 0;
  if (missing > free_blocks_.size()) {
    records_.Reserve(records_.slots() + missing - free_blocks_.size());
    pages_.Reserve(pages_.slots() + missing - free_blocks_.size());
  }
  blocks_.Reserve(blocks_.size() + missing,
                  [&](uint32_t j) -> const Hash128& { return Rec(j).hash; });
  for (size_t i = 0; i < n; ++i) {
    const Hash128& h = batch.hashes[i];
    const uint32_t found = FindBlock(h);
    if (found != kNone) {
      parent = found;
      continue;
    }
    bool reused = false;
    const uint32_t id = NewBlock(&reused);
    if (shape_.page_bytes() > 0) {
      uint8_t* page = reused ? pages_.Rewrite(id) : pages_.Mutable(id);
      for (uint32_t layer = 0; layer < shape_.attn; ++layer) {
        const uint8_t* rows = batch.layers[layer].data();
        uint8_t* out = page + size_t{2} * half * layer;
        std::memcpy(out, rows + i * half, half);
        std::memcpy(out + half, rows + n * half + i * half, half);
      }
    }
    Block& b = Rec(id);
    b = Block();
    b.hash = h;
    b.parent = parent;
    b.depth = parent == kNone ? 1 : Rec(parent).depth + 1;
    b.live = 1;
    b.last_use = Tick();
    LinkChild(parent, id);
    blocks_.Insert(h, id, [&](uint32_t j) -> const Hash128& { return Rec(j).hash; });
    kv_bytes_ += shape_.page_bytes();
    parent = id;
    *stored += 1;
  }
  return {};
}

void PrefixIndex::FreeBlock(uint32_t id) {
  Rec(id) = Block();
  free_blocks_.push_back(id);
}

void PrefixIndex::FreeCheckpoint(uint32_t id) {
  Checkpoint& c = ckpt_rec_[id];
  checkpoint_handles_ -= c.states.size() + c.tail_k.size() + c.tail_v.size();
  c.states = {};
  c.tail_k = {};
  c.tail_v = {};
  free_ckpts_.push_back(id);
}

void PrefixIndex::ReleaseIfEmpty() {
  if (free_blocks_.size() == records_.slots() && records_.slots() != 0) {
    records_.Clear();
    pages_.Clear();
    std::vector<uint32_t>().swap(free_blocks_);
    blocks_.Clear();
  }
  if (free_ckpts_.size() == ckpt_rec_.size() && !ckpt_rec_.empty()) {
    std::vector<Checkpoint>().swap(ckpt_rec_);
    std::vector<uint32_t>().swap(free_ckpts_);
    checkpoints_.Clear();
  }
}

uint64_t PrefixIndex::CheckpointBytes(const Checkpoint& c) const {
  return SumSizes(c.states) + SumSizes(c.tail_k) + SumSizes(c.tail_v);
}

void PrefixIndex::RemoveCheckpoint(uint32_t id, bool evicted) {
  Checkpoint& c = ckpt_rec_[id];
  if (!c.live) return;
  c.live = false;
  checkpoints_.Erase(c.position,
                     [&](uint32_t i) -> const Hash128& { return ckpt_rec_[i].position; });
  UnlinkAnchored(id);
  state_bytes_ -= SumSizes(c.states);
  kv_bytes_ -= SumSizes(c.tail_k) + SumSizes(c.tail_v);
  (evicted ? evicted_ckpts_ : dropped_ckpts_) += 1;
  // A leased checkpoint's slot is reused only when its lease ends (the lease names it).
  if (c.pins == 0) FreeCheckpoint(id);
}

void PrefixIndex::RemoveBlockTree(uint32_t root, bool evicted) {
  // Depth-first, children before their parent, so the index stays prefix-closed at every step.
  std::vector<std::pair<uint32_t, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [id, expanded] = stack.back();
    if (!expanded) {
      stack.back().second = true;
      for (uint32_t child = Rec(id).first_child; child != kNone; child = Rec(child).next_sibling) {
        stack.push_back({child, false});
      }
      continue;
    }
    stack.pop_back();
    while (Rec(id).first_anchored != kNone) RemoveCheckpoint(Rec(id).first_anchored, evicted);
    Block& b = Rec(id);
    b.live = 0;
    blocks_.Erase(b.hash, [&](uint32_t i) -> const Hash128& { return Rec(i).hash; });
    UnlinkChild(id);
    b.first_child = kNone;
    kv_bytes_ -= shape_.page_bytes();
    (evicted ? evicted_blocks_ : dropped_blocks_) += 1;
    // A leased block keeps its record and page (the lease reads it) until the lease ends.
    if (b.pins == 0) FreeBlock(id);
  }
}

uint64_t PrefixIndex::DropBlocks(std::span<const Hash128> hashes, bool evicted) {
  uint64_t dropped = 0;
  for (const Hash128& h : hashes) {
    const uint32_t id = FindBlock(h);
    if (id == kNone) continue;
    RemoveBlockTree(id, evicted);
    dropped += 1;
  }
  ReleaseIfEmpty();
  return dropped;
}

std::string PrefixIndex::StoreCheckpoints(const CheckpointBatch& batch, uint64_t* stored) {
  *stored = 0;
  const uint64_t depth = batch.first_length / shape_.block;
  uint32_t anchor = kNone;
  if (depth > 0) {
    anchor = FindBlock(batch.anchor);
    if (anchor == kNone || Rec(anchor).depth != depth) return "anchor block is not stored";
  }
  const size_t k = batch.positions.size();
  const uint64_t base = depth * shape_.block;
  const uint64_t tail_rows = batch.TailRows(shape_.block);
  const size_t row = shape_.row_bytes();
  for (size_t j = 0; j < k; ++j) {
    const Hash128& pos = batch.positions[j];
    if (FindCheckpoint(pos) != kNone) continue;
    const uint32_t id = NewCheckpoint();
    Checkpoint& c = ckpt_rec_[id];
    c.position = pos;
    c.length = batch.first_length + j;
    c.anchor = anchor;
    c.pins = 0;
    c.live = true;
    c.last_use = Tick();
    c.states.reserve(batch.states.size());
    for (const Bytes& s : batch.states) {
      const size_t each = s.size() / k;
      c.states.push_back(s.Slice(j * each, each));
    }
    const uint64_t r = c.length - base;
    if (r > 0) {
      c.tail_k.reserve(batch.tails.size());
      c.tail_v.reserve(batch.tails.size());
      for (const Bytes& t : batch.tails) {
        c.tail_k.push_back(t.Slice(0, r * row));
        c.tail_v.push_back(t.Slice(tail_rows * row, r * row));
      }
    }
    LinkAnchored(anchor, id, r == 0 && anchor != kNone);
    checkpoints_.Insert(pos, id,
                        [&](uint32_t i) -> const Hash128& { return ckpt_rec_[i].position; });
    state_bytes_ += SumSizes(c.states);
    kv_bytes_ += SumSizes(c.tail_k) + SumSizes(c.tail_v);
    checkpoint_handles_ += c.states.size() + c.tail_k.size() + c.tail_v.size();
    *stored += 1;
  }
  return {};
}

uint64_t PrefixIndex::DropCheckpoints(std::span<const Hash128> positions, bool evicted) {
  uint64_t dropped = 0;
  for (const Hash128& p : positions) {
    const uint32_t id = FindCheckpoint(p);
    if (id == kNone) continue;
    RemoveCheckpoint(id, evicted);
    dropped += 1;
  }
  ReleaseIfEmpty();
  return dropped;
}

std::optional<std::vector<Bytes>> PrefixIndex::CheckpointStates(const Hash128& position) {
  const uint32_t id = FindCheckpoint(position);
  if (id == kNone) return std::nullopt;
  Checkpoint& c = ckpt_rec_[id];
  c.last_use = Tick();
  return c.states;
}

std::optional<MatchResult> PrefixIndex::Match(
    std::span<const Hash128> chain, std::span<const std::pair<uint64_t, Hash128>> candidates,
    uint64_t lease_ms, int64_t now_ms, size_t max_leases) {
  const uint32_t tick = Tick();
  // Prefix closure makes presence along the chain monotone: binary search for the deepest
  // stored block (checking its depth, so a hash stored elsewhere in the tree cannot count).
  auto stored_at = [&](size_t depth) -> uint32_t {
    const uint32_t id = FindBlock(chain[depth - 1]);
    return id == kNone || Rec(id).depth != depth ? kNone : id;
  };
  size_t lo = 0, hi = chain.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (stored_at(mid) != kNone) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const size_t matched = lo;
  const uint64_t bs = shape_.block;

  // The best checkpoint: a listed position whose anchor is this prompt's block, or a checkpoint
  // at a block boundary of the matched chain (its position is the block's hash).
  uint32_t best = kNone;
  uint64_t best_length = 0;
  for (const auto& [length, pos] : candidates) {
    if (length <= best_length || length == 0) continue;
    const uint64_t depth = length / bs;
    if (depth > matched) continue;
    const uint32_t id = FindCheckpoint(pos);
    if (id == kNone) continue;
    const Checkpoint& c = ckpt_rec_[id];
    const Hash128 want_anchor = depth == 0 ? Hash128{} : chain[depth - 1];
    const Hash128 have_anchor = c.anchor == kNone ? Hash128{} : Rec(c.anchor).hash;
    if (c.length != length || !(have_anchor == want_anchor)) continue;
    best = id;
    best_length = length;
  }
  // Up the parent links from the deepest matched block: no hashing, one record per block.
  const uint32_t deepest = matched == 0 ? kNone : stored_at(matched);
  for (uint32_t id = deepest; id != kNone; id = Rec(id).parent) {
    const Block& b = Rec(id);
    if (uint64_t{b.depth} * bs <= best_length) break;
    if (!b.boundary) continue;
    best = b.first_anchored;
    best_length = uint64_t{b.depth} * bs;
    break;
  }
  // A namespace without recurrent layers resumes at any block boundary: no checkpoint needed.
  const bool attention_only = shape_.recurrent == 0;
  if (attention_only && matched * bs > best_length) {
    best = kNone;
    best_length = matched * bs;
  }

  MatchResult result;
  result.matched_blocks = matched;
  if (best_length == 0) return result;
  result.length = best_length;
  const uint64_t depth = best_length / bs;
  // The chain the answer restores: the checkpoint's anchor and its ancestors (what its state was
  // computed on), or the deepest matched block when no checkpoint is needed.
  const uint32_t anchor = best != kNone ? ckpt_rec_[best].anchor : deepest;
  result.kv_bytes = best_length * shape_.row_bytes() * 2 * shape_.attn;
  if (best != kNone) {
    Checkpoint& c = ckpt_rec_[best];
    c.last_use = tick;
    result.position = c.position;
    result.state_bytes = SumSizes(c.states);
  } else {
    result.position = chain[depth - 1];
  }
  if (anchor != kNone) Rec(anchor).last_use = tick;
  if (lease_ms == 0) return result;

  ExpireLeases(now_ms);
  if (leases_.size() >= max_leases) return std::nullopt;
  LeaseEntry lease;
  lease.view.length = best_length;
  // The lease pins every block of its chain: a drop then leaves their pages in place.
  lease.view.pages.resize(depth);
  for (uint32_t id = anchor, d = static_cast<uint32_t>(depth); id != kNone; id = Rec(id).parent) {
    lease.view.pages[--d] = id;
    Rec(id).pins += 1;
  }
  lease_pages_ += depth;
  if (best != kNone) {
    Checkpoint& c = ckpt_rec_[best];
    lease.view.states = c.states;
    lease.view.tail_k = c.tail_k;
    lease.view.tail_v = c.tail_v;
    c.pins += 1;
    lease.checkpoint = best;
  }
  lease.expires_ms = now_ms + static_cast<int64_t>(lease_ms);
  result.lease = next_lease_++;
  lease_expiry_.emplace(lease.expires_ms, result.lease);
  leases_.emplace(result.lease, std::move(lease));
  return result;
}

void PrefixIndex::EndLease(std::map<uint64_t, LeaseEntry>::iterator it) {
  const LeaseEntry& lease = it->second;
  if (lease.checkpoint != kNone) {
    Checkpoint& c = ckpt_rec_[lease.checkpoint];
    if (--c.pins == 0 && !c.live) FreeCheckpoint(lease.checkpoint);
  }
  for (uint32_t id : lease.view.pages) {
    Block& b = Rec(id);
    b.pins -= 1;
    if (b.pins == 0 && !b.live) FreeBlock(id);
  }
  lease_pages_ -= lease.view.pages.size();
  lease_expiry_.erase({lease.expires_ms, it->first});
  leases_.erase(it);
  ReleaseIfEmpty();
}

const LeaseView* PrefixIndex::Lease(uint64_t id, int64_t now_ms) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return nullptr;
  if (it->second.expires_ms <= now_ms) {
    EndLease(it);
    return nullptr;
  }
  return &it->second.view;
}

bool PrefixIndex::Release(uint64_t id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  EndLease(it);
  return true;
}

void PrefixIndex::ExpireLeases(int64_t now_ms) {
  while (!lease_expiry_.empty() && lease_expiry_.begin()->first <= now_ms) {
    EndLease(leases_.find(lease_expiry_.begin()->second));
  }
}

template <typename Run>
void PrefixIndex::ForEachLeaseRun(const LeaseView& view, uint32_t layer, uint64_t start,
                                  uint64_t end, Run&& run) const {
  const size_t row = shape_.row_bytes();
  const uint64_t bs = shape_.block;
  const uint64_t boundary = view.pages.size() * bs;
  for (int half = 0; half < 2; ++half) {
    for (uint64_t t = start; t < end;) {
      if (t < boundary) {
        const uint64_t in_block = t % bs;
        const uint64_t take = std::min<uint64_t>(bs - in_block, end - t);
        run(half, view.pages[t / bs], (2 * layer + half) * bs * row + in_block * row, take * row);
        t += take;
      } else {
        run(half, kNone, (t - boundary) * row, (end - t) * row);
        t = end;
      }
    }
  }
}

Bytes PrefixIndex::GatherRows(const LeaseView& view, uint32_t layer, uint64_t start,
                              uint64_t end) const {
  Bytes out = Bytes::Allocate(2 * (end - start) * shape_.row_bytes());
  uint8_t* dst = out.mutable_data();
  ForEachLeaseRun(
      view, layer, start, end, [&](int half, uint32_t page, size_t offset, size_t length) {
        const uint8_t* src = page == kNone ? TailOf(view, half, layer).data() : pages_.Data(page);
        std::memcpy(dst, src + offset, length);
        dst += length;
      });
  return out;
}

std::vector<Bytes> PrefixIndex::SharedLeaseRows(const LeaseView& view, uint32_t layer,
                                                uint64_t start, uint64_t end) const {
  std::vector<Bytes> pieces;
  ForEachLeaseRun(
      view, layer, start, end, [&](int half, uint32_t page, size_t offset, size_t length) {
        const Bytes whole = page == kNone ? TailOf(view, half, layer) : pages_.Share(page);
        pieces.push_back(whole.Slice(offset, length));
      });
  return pieces;
}

std::optional<Bytes> PrefixIndex::BlockRows(std::span<const Hash128> hashes, uint32_t layer) const {
  ScratchArray<uint32_t, 64> ids(hashes.size());
  if (!FindBlocks(hashes, ids.span())) return std::nullopt;
  Bytes out = Bytes::Allocate(BlockRowsSize(hashes.size()));
  CopyRows(ids.span(), layer, out.mutable_data());
  return out;
}

bool PrefixIndex::CopyBlockRows(std::span<const Hash128> hashes, uint32_t layer,
                                uint8_t* out) const {
  ScratchArray<uint32_t, 64> ids(hashes.size());
  if (!FindBlocks(hashes, ids.span())) return false;
  CopyRows(ids.span(), layer, out);
  return true;
}

std::optional<std::vector<Bytes>> PrefixIndex::SharedBlockRows(std::span<const Hash128> hashes,
                                                               uint32_t layer) const {
  ScratchArray<uint32_t, 64> ids(hashes.size());
  if (!FindBlocks(hashes, ids.span())) return std::nullopt;
  std::vector<Bytes> pieces(2 * hashes.size());
  if (shape_.page_bytes() == 0) return pieces;
  const size_t half = static_cast<size_t>(shape_.block) * shape_.row_bytes();
  for (size_t i = 0; i < hashes.size(); ++i) {
    const Bytes page = pages_.Share(ids[i]);
    pieces[i] = page.Slice(2 * half * layer, half);
    pieces[hashes.size() + i] = page.Slice(2 * half * layer + half, half);
  }
  return pieces;
}

bool PrefixIndex::FindBlocks(std::span<const Hash128> hashes, std::span<uint32_t> ids) const {
  for (size_t i = 0; i < hashes.size(); ++i) {
    ids[i] = FindBlock(hashes[i]);
    if (ids[i] == kNone) return false;
  }
  return true;
}

void PrefixIndex::CopyRows(std::span<const uint32_t> ids, uint32_t layer, uint8_t* out) const {
  // Every block's K rows, then every block's V rows.
  const size_t half = static_cast<size_t>(shape_.block) * shape_.row_bytes();
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint8_t* page = pages_.Data(ids[i]) + 2 * half * layer;
    std::memcpy(out + i * half, page, half);
    std::memcpy(out + (ids.size() + i) * half, page + half, half);
  }
}

void PrefixIndex::PlanEviction(uint64_t target, const Hash128& keep, std::vector<Hash128>* blocks,
                               std::vector<Hash128>* checkpoints) const {
  uint64_t bytes = payload_bytes();
  if (bytes <= target) return;
  // (last use, is a block, id): leaves only. A leaf block takes its anchored checkpoints.
  std::vector<std::tuple<uint32_t, bool, uint32_t>> order;
  for (uint32_t id = 0; id < ckpt_rec_.size(); ++id) {
    const Checkpoint& c = ckpt_rec_[id];
    if (c.live && c.pins == 0) order.emplace_back(c.last_use, false, id);
  }
  for (uint32_t id = 0; id < records_.slots(); ++id) {
    const Block& b = Rec(id);
    if (b.live && b.pins == 0 && b.first_child == kNone && !(b.hash == keep)) {
      order.emplace_back(b.last_use, true, id);
    }
  }
  std::sort(order.begin(), order.end());
  std::vector<bool> ckpt_gone(ckpt_rec_.size(), false);
  for (const auto& [use, is_block, id] : order) {
    if (bytes <= target) break;
    if (!is_block) {
      if (ckpt_gone[id]) continue;
      ckpt_gone[id] = true;
      bytes -= CheckpointBytes(ckpt_rec_[id]);
      checkpoints->push_back(ckpt_rec_[id].position);
      continue;
    }
    const Block& b = Rec(id);
    bool pinned = false;
    for (uint32_t c = b.first_anchored; c != kNone; c = ckpt_rec_[c].next_anchored) {
      pinned = pinned || ckpt_rec_[c].pins > 0;
    }
    if (pinned) continue;
    for (uint32_t c = b.first_anchored; c != kNone; c = ckpt_rec_[c].next_anchored) {
      if (!ckpt_gone[c]) bytes -= CheckpointBytes(ckpt_rec_[c]);
      ckpt_gone[c] = true;
    }
    bytes -= shape_.page_bytes();
    blocks->push_back(b.hash);
  }
}

PrefixStats PrefixIndex::Stats() const {
  PrefixStats s;
  s.blocks = blocks_.size();
  s.checkpoints = checkpoints_.size();
  s.kv_bytes = kv_bytes_;
  s.state_bytes = state_bytes_;
  // Everything held beyond the payload: records, tables, free lists, the page slab's unused and
  // leased-but-dropped slots, checkpoint records with their handles, and the leases.
  const uint64_t live_pages = uint64_t{s.blocks} * shape_.page_bytes();
  s.index_bytes = sizeof(PrefixIndex) + records_.memory_bytes() + pages_.memory_bytes() -
                  live_pages + blocks_.memory_bytes() + checkpoints_.memory_bytes() +
                  (free_blocks_.capacity() + free_ckpts_.capacity()) * sizeof(uint32_t) +
                  ckpt_rec_.capacity() * sizeof(Checkpoint) + checkpoint_handles_ * sizeof(Bytes) +
                  leases_.size() * (sizeof(LeaseEntry) + kLeaseNodeBytes) +
                  lease_pages_ * sizeof(uint32_t);
  s.leases = leases_.size();
  s.evicted_blocks = evicted_blocks_;
  s.evicted_checkpoints = evicted_ckpts_;
  s.dropped_blocks = dropped_blocks_;
  s.dropped_checkpoints = dropped_ckpts_;
  return s;
}

void PrefixIndex::ForEachBlock(const std::function<void(const BlockBatch&)>& visit) const {
  const size_t half = static_cast<size_t>(shape_.block) * shape_.row_bytes();
  std::vector<uint32_t> stack;
  for (uint32_t id = root_children_; id != kNone; id = Rec(id).next_sibling) stack.push_back(id);
  while (!stack.empty()) {
    const uint32_t id = stack.back();
    stack.pop_back();
    const Block& b = Rec(id);
    BlockBatch batch;
    batch.parent = b.parent == kNone ? Hash128{} : Rec(b.parent).hash;
    batch.hashes.push_back(b.hash);
    if (shape_.page_bytes() > 0) {
      // A reference of its own: the record may be written after the lock is released (DUMP).
      const Bytes page = pages_.Share(id);
      for (uint32_t layer = 0; layer < shape_.attn; ++layer) {
        batch.layers.push_back(page.Slice(2 * half * layer, 2 * half));
      }
    }
    visit(batch);
    for (uint32_t child = b.first_child; child != kNone; child = Rec(child).next_sibling) {
      stack.push_back(child);
    }
  }
}

void PrefixIndex::ForEachCheckpoint(
    const std::function<void(const CheckpointBatch&)>& visit) const {
  for (const Checkpoint& c : ckpt_rec_) {
    if (!c.live) continue;
    CheckpointBatch batch;
    batch.anchor = c.anchor == kNone ? Hash128{} : Rec(c.anchor).hash;
    batch.first_length = c.length;
    batch.positions.push_back(c.position);
    batch.states = c.states;
    for (size_t l = 0; l < c.tail_k.size(); ++l) {
      Bytes joined = Bytes::Allocate(c.tail_k[l].size() + c.tail_v[l].size());
      std::memcpy(joined.mutable_data(), c.tail_k[l].data(), c.tail_k[l].size());
      std::memcpy(joined.mutable_data() + c.tail_k[l].size(), c.tail_v[l].data(),
                  c.tail_v[l].size());
      batch.tails.push_back(joined);
    }
    visit(batch);
  }
}

// --- PrefixStore ---

std::shared_ptr<PrefixStore::Entry> PrefixStore::Find(std::string_view ns) const {
  std::lock_guard lock(mu_);
  auto it = namespaces_.find(ns);
  return it == namespaces_.end() ? nullptr : it->second;
}

PrefixStore::CreateResult PrefixStore::Create(const std::string& ns, const PrefixShape& shape,
                                              PrefixShape* existing,
                                              const std::function<void()>& under_lock) {
  std::lock_guard lock(mu_);
  auto it = namespaces_.find(ns);
  if (it != namespaces_.end()) {
    std::lock_guard entry_lock(it->second->mu);
    *existing = it->second->index.shape();
    if (!existing->SameModel(shape)) return CreateResult::kOtherShape;
    if (existing->max_bytes == shape.max_bytes) return CreateResult::kExists;
    if (under_lock) under_lock();
    it->second->index.set_max_bytes(shape.max_bytes);
    return CreateResult::kExists;
  }
  if (under_lock) under_lock();
  auto entry = std::make_shared<Entry>(shape);
  bytes_ += BytesOf(ns, entry->index);
  namespaces_.emplace(ns, std::move(entry));
  return CreateResult::kCreated;
}

bool PrefixStore::Drop(const std::string& ns, const std::function<void()>& under_lock) {
  std::shared_ptr<Entry> gone;
  {
    std::lock_guard lock(mu_);
    auto it = namespaces_.find(ns);
    if (it == namespaces_.end()) return false;
    std::lock_guard entry_lock(it->second->mu);
    if (under_lock) under_lock();
    bytes_ -= BytesOf(ns, it->second->index);
    gone = std::move(it->second);
    namespaces_.erase(it);
  }
  return true;  // `gone` is freed here, outside the store's lock
}

void PrefixStore::Clear() {
  std::map<std::string, std::shared_ptr<Entry>, std::less<>> gone;
  std::lock_guard lock(mu_);
  gone.swap(namespaces_);
  bytes_ = 0;
}

bool PrefixStore::Contains(std::string_view ns) const { return Find(ns) != nullptr; }

std::optional<PrefixShape> PrefixStore::Shape(std::string_view ns) const {
  auto entry = Find(ns);
  if (!entry) return std::nullopt;
  std::lock_guard lock(entry->mu);
  return entry->index.shape();
}

bool PrefixStore::With(std::string_view ns, const std::function<void(PrefixIndex&)>& fn) {
  auto entry = Find(ns);
  if (!entry) return false;
  std::lock_guard lock(entry->mu);
  const int64_t before = BytesOf(ns, entry->index);
  fn(entry->index);
  bytes_ += BytesOf(ns, entry->index) - before;
  return true;
}

bool PrefixStore::With(std::string_view ns,
                       const std::function<void(const PrefixIndex&)>& fn) const {
  auto entry = Find(ns);
  if (!entry) return false;
  std::lock_guard lock(entry->mu);
  fn(entry->index);
  return true;
}

void PrefixStore::ForEach(
    const std::function<void(const std::string&, const PrefixIndex&)>& visit) const {
  std::vector<std::pair<std::string, std::shared_ptr<Entry>>> all;
  {
    std::lock_guard lock(mu_);
    all.assign(namespaces_.begin(), namespaces_.end());
  }
  for (const auto& [ns, entry] : all) {
    std::lock_guard lock(entry->mu);
    visit(ns, entry->index);
  }
}

int64_t PrefixStore::BytesOf(const std::string_view ns, const PrefixIndex& index) {
  const PrefixStats s = index.Stats();
  return static_cast<int64_t>(ns.size() + sizeof(Entry) + s.kv_bytes + s.state_bytes +
                              s.index_bytes);
}

}  // namespace prefixd::store
