// VectorStore's methods. Over 900 lines by choice: rows, chunks, the disk tier and recovery of
// cold rows share the session lock and the private layer helpers (a layer's rows, chunks, places
// and cold accounting); split, they would share them through a private header.
#include "store/vector_store.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <tuple>

namespace prefixd::store {
namespace {

// Chunks aim at this many bytes: big enough that a 32K-token fetch is a few hundred iovecs,
// small enough that rewriting one row copy-on-write copies little.
constexpr uint64_t kChunkTargetBytes = 256 * 1024;
constexpr uint64_t kMaxChunkRows = 4096;
// A chunk's first allocation holds at least this many rows (or the whole chunk if smaller), then
// doubles, so token-by-token appends cost amortised O(1).
constexpr uint64_t kMinChunkRows = 16;
constexpr size_t kZeroBytes = 1024 * 1024;
// Rough bookkeeping costs for memory accounting.
constexpr int64_t kSessionOverhead = 256;
constexpr int64_t kLayerOverhead = 96;
constexpr int64_t kChunkHandleOverhead = 32;
// A chunk table entry beyond its handle: the std::map node (links, colour, key).
constexpr uint64_t kMapNodeBytes = 48;
// Cold rows closer than this in one file are read with one pread (the bytes between discarded).
constexpr uint64_t kMaxReadGap = 4096;

uint64_t ChunkRows(size_t row_bytes) {
  const uint64_t rows = std::max<uint64_t>(1, kChunkTargetBytes / std::max<size_t>(1, row_bytes));
  return std::min(kMaxChunkRows, std::bit_floor(rows));
}

// Shared all-zero bytes that gap rows and rows past a layer's end are read from.
const Bytes& Zeros() {
  static const Bytes zeros = [] {
    Bytes b = Bytes::Allocate(kZeroBytes);
    std::memset(b.mutable_data(), 0, kZeroBytes);
    return b;
  }();
  return zeros;
}

// Appends `rows` zero rows as whole-row pieces.
void AppendZeroRows(std::vector<Bytes>& pieces, uint64_t rows, size_t row_bytes) {
  if (rows == 0 || row_bytes == 0) return;
  const uint64_t per_piece = kZeroBytes / row_bytes;
  if (per_piece == 0) {  // a row wider than the shared zeros: one zeroed buffer per row
    for (uint64_t r = 0; r < rows; ++r) {
      Bytes b = Bytes::Allocate(row_bytes);
      std::memset(b.mutable_data(), 0, row_bytes);
      pieces.push_back(std::move(b));
    }
    return;
  }
  while (rows > 0) {
    const uint64_t n = std::min(rows, per_piece);
    pieces.push_back(Zeros().Slice(0, n * row_bytes));
    rows -= n;
  }
}

bool AllZero(const uint8_t* p, size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

template <typename Locks>
void LockShards(Locks& locks, std::vector<size_t> indices, auto& shards) {
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  for (size_t i : indices) locks.emplace_back(shards[i].mu);
}

}  // namespace

uint64_t RowSpan::bytes() const {
  uint64_t total = 0;
  for (const Bytes& p : pieces) total += p.size();
  return total;
}

size_t VectorStore::StringHash::operator()(std::string_view s) const {
  return static_cast<size_t>(XXH3_64bits(s.data(), s.size()));
}

VectorStore::VectorStore(size_t shard_count)
    : shards_(std::make_unique<Shard[]>(shard_count)), shard_count_(shard_count) {}

VectorStore::HashedSid VectorStore::Hash(std::string_view sid) {
  return HashedSid{sid, StringHash{}(sid)};
}

VectorStore::SessionPtr VectorStore::Find(std::string_view sid) const {
  const HashedSid hashed = Hash(sid);
  Shard& shard = shards_[ShardOfHash(hashed.hash)];
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(hashed);
  return it == shard.sessions.end() ? nullptr : it->second;
}

VectorStore::SessionPtr VectorStore::NewSession(std::string_view sid, uint32_t dim, Tier tier,
                                                uint64_t index) {
  auto s = std::make_shared<Session>();
  s->sid.assign(sid);
  s->info.index = index;
  s->info.dim = dim;
  s->info.tier = tier;
  s->info.row_bytes = RowBytes(tier, dim);
  s->chunk_rows = ChunkRows(s->info.row_bytes);
  // Replayed records carry their indices: later reservations must not hand them out again.
  uint64_t next = next_index_.load();
  while (next <= index && !next_index_.compare_exchange_weak(next, index + 1)) {
  }
  return s;
}

uint64_t VectorStore::WriteCostEstimate(uint32_t dim, Tier tier, uint64_t start, uint64_t count) {
  if (count == 0) return 0;
  const size_t row_bytes = RowBytes(tier, dim);
  const uint64_t r = ChunkRows(row_bytes);
  // The chunk table is sparse: only the chunks the write touches are allocated, the first from
  // its base row (a chunk grows from row 0), so at most R - 1 rows more than the write itself.
  if (count - 1 > ~uint64_t{0} - start) return ~uint64_t{0};  // ends past any row id
  const uint64_t first_chunk = start / r;
  const uint64_t touched = (start + (count - 1)) / r - first_chunk + 1;
  const long double rows = static_cast<long double>(start % r) + static_cast<long double>(count);
  const long double cost =
      rows * static_cast<long double>(row_bytes) +
      static_cast<long double>(touched) *
          (sizeof(Bytes) + kChunkHandleOverhead + kMapNodeBytes + Bytes::kMaxRoundingBelow1MiB);
  return cost >= 1.8e19L ? ~uint64_t{0} : static_cast<uint64_t>(cost);
}

void VectorStore::Insert(Shard& shard, SessionPtr session) {
  overhead_bytes_ += kSessionOverhead + static_cast<int64_t>(session->sid.size());
  std::string key = session->sid;
  shard.sessions.emplace(std::move(key), std::move(session));
}

bool VectorStore::ReserveSession(uint64_t max_sessions, uint64_t count) {
  const int64_t before = sessions_.fetch_add(static_cast<int64_t>(count));
  if (max_sessions != 0 && static_cast<uint64_t>(before) + count > max_sessions) {
    sessions_ -= static_cast<int64_t>(count);
    return false;
  }
  return true;
}

void VectorStore::Retire(Session& s) {
  std::lock_guard lock(s.mu);
  s.dropped = true;
  sessions_ -= 1;
  layers_ -= static_cast<int64_t>(s.layers.size());
  tokens_ -= static_cast<int64_t>(s.tokens);
  payload_bytes_ -= static_cast<int64_t>(s.tokens * s.info.row_bytes);
  allocated_bytes_ -= static_cast<int64_t>(s.allocated);
  int64_t overhead = kSessionOverhead + static_cast<int64_t>(s.sid.size());
  for (const auto& [id, layer] : s.layers) {
    overhead += kLayerOverhead + kChunkHandleOverhead * static_cast<int64_t>(layer.chunks.size()) +
                static_cast<int64_t>(layer.places.MemoryBytes());
    if (layer.cold) AccountCold(layer, -1);
  }
  overhead_bytes_ -= overhead;
}

void VectorStore::AccountCold(const Layer& layer, int64_t sign) {
  cold_layers_ += sign;
  cold_bytes_ += sign * static_cast<int64_t>(layer.cold_bytes);
}

VectorStore::CreateResult VectorStore::Create(std::string_view sid, uint32_t dim, Tier tier,
                                              uint64_t index, uint64_t max_sessions,
                                              VectorSessionInfo* info, const Hook& under_lock) {
  Shard& shard = shards_[ShardIndex(sid)];
  SessionPtr created;
  {
    std::lock_guard lock(shard.mu);
    auto it = shard.sessions.find(sid);
    if (it != shard.sessions.end()) {
      if (info != nullptr) *info = it->second->info;
      return CreateResult::kExists;
    }
    if (!ReserveSession(max_sessions, 1)) return CreateResult::kLimit;
    if (under_lock) under_lock();
    created = NewSession(sid, dim, tier, index);
    if (info != nullptr) *info = created->info;
    Insert(shard, created);
  }
  return CreateResult::kCreated;
}

std::optional<VectorSessionInfo> VectorStore::Describe(std::string_view sid) const {
  SessionPtr s = Find(sid);
  if (s == nullptr) return std::nullopt;
  return s->info;  // immutable after creation
}

std::optional<SessionDetail> VectorStore::Detail(std::string_view sid) const {
  SessionPtr s = Find(sid);
  if (s == nullptr) return std::nullopt;
  std::lock_guard lock(s->mu);
  if (s->dropped) return std::nullopt;
  SessionDetail d;
  d.info = s->info;
  for (const auto& [id, layer] : s->layers) d.layer_lengths.emplace_back(id, layer.length);
  d.payload_bytes = s->tokens * s->info.row_bytes;
  d.allocated_bytes = s->allocated;
  return d;
}

void VectorStore::WriteRows(Session& s, Layer& layer, uint64_t start, uint64_t count,
                            const uint8_t* rows) {
  const size_t row_bytes = s.info.row_bytes;
  const uint64_t r = s.chunk_rows;
  const uint64_t end = start + count;
  const uint64_t last_chunk = (end - 1) / r;
  for (uint64_t c = start / r; c <= last_chunk; ++c) {
    const uint64_t base = c * r;
    const uint64_t lo = std::max(start, base) - base;
    const uint64_t hi = std::min(end, base + r) - base;
    const uint8_t* source = rows + (base + lo - start) * row_bytes;
    auto found = layer.chunks.find(c);
    if (found == layer.chunks.end()) {
      // An absent chunk already reads as zeros: zero rows (a replayed gap) cost nothing.
      if (AllZero(source, (hi - lo) * row_bytes)) continue;
      found = layer.chunks.emplace(c, Bytes()).first;
      overhead_bytes_ += kChunkHandleOverhead;
    }
    Bytes& chunk = found->second;
    const uint64_t capacity = chunk.size() / row_bytes;
    // In place only where no reader can have looked: rows at or past the layer's length.
    const bool unseen = base + lo >= layer.length;
    if (!unseen || hi > capacity) {
      uint64_t rows_wanted = capacity;
      if (hi > capacity) {
        rows_wanted = std::min(r, std::max({hi, 2 * capacity, std::min(r, kMinChunkRows)}));
      }
      Bytes fresh = Bytes::Allocate(rows_wanted * row_bytes);
      const size_t kept = capacity * row_bytes;
      if (kept > 0) std::memcpy(fresh.mutable_data(), chunk.data(), kept);
      std::memset(fresh.mutable_data() + kept, 0, fresh.size() - kept);
      const int64_t grown = static_cast<int64_t>(fresh.capacity()) -
                            static_cast<int64_t>(chunk.empty() ? 0 : chunk.capacity());
      s.allocated += grown;
      allocated_bytes_ += grown;
      chunk = std::move(fresh);
    }
    std::memcpy(chunk.mutable_data() + lo * row_bytes, source, (hi - lo) * row_bytes);
  }
  if (end > layer.length) {
    const uint64_t added = end - layer.length;
    layer.length = end;
    s.tokens += added;
    tokens_ += static_cast<int64_t>(added);
    payload_bytes_ += static_cast<int64_t>(added * row_bytes);
  }
}

VectorStore::StoreResult VectorStore::Store(std::string_view sid, uint32_t layer, uint64_t start,
                                            uint64_t count, const Bytes& rows, uint32_t dim,
                                            Tier tier, const Hook& under_lock) {
  SessionPtr s = Find(sid);
  if (s == nullptr) return StoreResult::kNoSession;
  std::lock_guard lock(s->mu);
  if (s->dropped) return StoreResult::kNoSession;
  if (s->info.dim != dim || s->info.tier != tier) return StoreResult::kChanged;
  if (count == 0 || rows.size() < count * s->info.row_bytes) return StoreResult::kChanged;
  // A write to a cold layer (the command promotes first; replay may not) reads it back first:
  // a read error throws before anything is logged.
  if (auto found = s->layers.find(layer); found != s->layers.end() && found->second.cold) {
    LoadColdLayer(*s, found->second);
  }
  if (under_lock) under_lock();
  auto [it, inserted] = s->layers.try_emplace(layer);
  if (inserted) {
    layers_ += 1;
    overhead_bytes_ += kLayerOverhead;
  }
  WriteRows(*s, it->second, start, count, rows.data());
  it->second.version += 1;
  it->second.unplaced += 1;
  return StoreResult::kOk;
}

bool VectorStore::IsSharedZeros(const Bytes& piece) { return piece.SharesStorage(Zeros()); }

RowSpan VectorStore::Rows(const Session& s, const Layer& layer, uint64_t start,
                          uint64_t end) const {
  RowSpan span;
  span.rows = end - start;
  const size_t row_bytes = s.info.row_bytes;
  const uint64_t r = s.chunk_rows;
  const uint64_t stored_end = std::min(end, layer.length);
  uint64_t zeros = 0;  // zero rows not yet appended, so runs of them become few pieces
  uint64_t row = start;
  // Only the chunks present in [start, stored_end) are visited: a gap of any length is one run
  // of zeros.
  for (auto it = layer.chunks.lower_bound(start / r);
       row < stored_end && it != layer.chunks.end() && it->first * r < stored_end; ++it) {
    const uint64_t base = it->first * r;
    const uint64_t hi = std::min(stored_end, base + r);
    const uint64_t from = std::max(row, base);
    const uint64_t data_end = std::min(hi, base + it->second.size() / row_bytes);
    zeros += from - row;
    if (from < data_end) {
      AppendZeroRows(span.pieces, zeros, row_bytes);
      zeros = 0;
      span.pieces.push_back(
          it->second.Slice((from - base) * row_bytes, (data_end - from) * row_bytes));
      zeros += hi - data_end;
    } else {
      zeros += hi - from;
    }
    row = hi;
  }
  zeros += end - row;  // the gap after the last chunk, and rows past the layer's length
  AppendZeroRows(span.pieces, zeros, row_bytes);
  return span;
}

std::vector<RowRun> VectorStore::StoredRuns(const Session& s, const Layer& layer) const {
  std::vector<RowRun> runs;
  const size_t row_bytes = s.info.row_bytes;
  for (const auto& [c, chunk] : layer.chunks) {
    const uint64_t base = c * s.chunk_rows;
    const uint64_t end = std::min(layer.length, base + chunk.size() / row_bytes);
    if (end <= base) continue;
    if (runs.empty() || runs.back().start + runs.back().rows.rows != base) {
      runs.push_back(RowRun{base, {}});
    }
    runs.back().rows.rows += end - base;
    runs.back().rows.pieces.push_back(chunk.Slice(0, (end - base) * row_bytes));
  }
  // Rows past the last stored one still count towards the length.
  if (layer.length > 0 &&
      (runs.empty() || runs.back().start + runs.back().rows.rows < layer.length)) {
    RowRun last{layer.length - 1, {}};
    last.rows.rows = 1;
    AppendZeroRows(last.rows.pieces, 1, row_bytes);
    runs.push_back(std::move(last));
  }
  return runs;
}

std::optional<std::pair<VectorSessionInfo, LayerRead>> VectorStore::ReadRange(
    std::string_view sid, uint32_t layer, uint64_t start, uint64_t end,
    uint64_t stream_from) const {
  SessionPtr s = Find(sid);
  if (s == nullptr) return std::nullopt;
  LayerRead read;
  read.layer = layer;
  std::vector<ColdPiece> cold;
  {
    std::lock_guard lock(s->mu);
    if (s->dropped) return std::nullopt;
    auto it = s->layers.find(layer);
    if (it != s->layers.end() && it->second.length > 0) {
      read.length = it->second.length;
      if (it->second.cold) {
        cold = ColdPieces(it->second, s->info.row_bytes, start, end);
      } else {
        read.rows = Rows(*s, it->second, start, end);
      }
    }
  }
  // The places copied point at immutable file bytes: the read is the layer as it was then.
  if (!cold.empty()) {
    cold_reads_.fetch_add(1, std::memory_order_relaxed);
    ReadOrLeave(std::move(cold), s->info.row_bytes, stream_from, read);
  }
  return std::make_pair(s->info, std::move(read));
}

std::optional<std::pair<VectorSessionInfo, LayerRead>> VectorStore::ReadIds(
    std::string_view sid, uint32_t layer, std::span<const uint64_t> ids) const {
  SessionPtr s = Find(sid);
  if (s == nullptr) return std::nullopt;
  LayerRead read;
  read.layer = layer;
  std::vector<ColdPiece> cold;
  {
    std::lock_guard lock(s->mu);
    if (s->dropped) return std::nullopt;
    auto it = s->layers.find(layer);
    if (it != s->layers.end() && it->second.length > 0) {
      read.length = it->second.length;
      read.rows.rows = ids.size();
      for (uint64_t id : ids) {
        if (it->second.cold) {
          for (ColdPiece& p : ColdPieces(it->second, s->info.row_bytes, id, id + 1)) {
            cold.push_back(std::move(p));
          }
          continue;
        }
        RowSpan one = Rows(*s, it->second, id, id + 1);
        for (Bytes& p : one.pieces) read.rows.pieces.push_back(std::move(p));
      }
    }
  }
  if (!cold.empty()) {
    cold_reads_.fetch_add(1, std::memory_order_relaxed);
    read.rows.pieces = ReadCold(cold, s->info.row_bytes).pieces;
  }
  return std::make_pair(s->info, std::move(read));
}

uint64_t VectorStore::LongestLayer(const Session& s) {
  uint64_t longest = 0;
  for (const auto& [id, layer] : s.layers) longest = std::max(longest, layer.length);
  return longest;
}

std::optional<std::pair<VectorSessionInfo, std::vector<LayerRead>>> VectorStore::ReadBatch(
    std::string_view sid, uint64_t start, uint64_t end, std::optional<uint32_t> layers,
    uint64_t stream_from) const {
  SessionPtr s = Find(sid);
  if (s == nullptr) return std::nullopt;
  std::vector<LayerRead> out;
  std::vector<std::pair<uint32_t, std::vector<ColdPiece>>> cold;
  {
    std::lock_guard lock(s->mu);
    if (s->dropped) return std::nullopt;
    uint32_t count = layers.value_or(s->layers.empty() ? 0 : s->layers.rbegin()->first + 1);
    out.resize(count);
    for (uint32_t i = 0; i < count; ++i) out[i].layer = i;
    for (auto it = s->layers.begin(); it != s->layers.end() && it->first < count; ++it) {
      LayerRead& read = out[it->first];
      read.length = it->second.length;
      if (read.length == 0) continue;
      if (it->second.cold) {
        cold.emplace_back(it->first, ColdPieces(it->second, s->info.row_bytes, start, end));
      } else {
        read.rows = Rows(*s, it->second, start, end);
      }
    }
  }
  // Every layer's places were copied under one lock: one state of the session.
  if (!cold.empty()) cold_reads_.fetch_add(1, std::memory_order_relaxed);
  for (auto& [layer, pieces] : cold) {
    ReadOrLeave(std::move(pieces), s->info.row_bytes, stream_from, out[layer]);
  }
  return std::make_pair(s->info, std::move(out));
}

bool VectorStore::Drop(std::string_view sid, const Hook& under_lock) {
  Shard& shard = shards_[ShardIndex(sid)];
  SessionPtr released;  // freed after the lock: large buffers take time to unmap
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return false;
  if (under_lock) under_lock();
  Retire(*it->second);
  released = std::move(it->second);
  shard.sessions.erase(it);
  return true;
}

void VectorStore::Clear() {
  std::lock_guard prefixes_lock(prefixes_mu_);
  for (size_t i = 0; i < shard_count_; ++i) {
    decltype(Shard::sessions) released;  // freed after the lock
    std::lock_guard lock(shards_[i].mu);
    for (auto& [sid, session] : shards_[i].sessions) Retire(*session);
    released.swap(shards_[i].sessions);
  }
  prefixes_.clear();
}

VectorStore::RegisterResult VectorStore::Register(std::string_view ns, const PrefixSpec& spec,
                                                  uint64_t key_index, uint64_t value_index,
                                                  uint64_t max_sessions, const Hook& under_lock) {
  const std::string key_sid = KeySid(ns), value_sid = ValueSid(ns);
  std::lock_guard prefixes_lock(prefixes_mu_);
  const size_t key_shard = ShardIndex(key_sid), value_shard = ShardIndex(value_sid);
  std::vector<std::unique_lock<std::mutex>> locks;
  LockShards(locks, {key_shard, value_shard}, shards_);
  auto prefix = prefixes_.find(ns);
  const bool key_exists = shards_[key_shard].sessions.contains(key_sid);
  const bool value_exists = shards_[value_shard].sessions.contains(value_sid);
  if (prefix != prefixes_.end() && key_exists && value_exists) return RegisterResult::kExists;
  const uint64_t missing = (key_exists ? 0 : 1) + (value_exists ? 0 : 1);
  if (missing > 0 && !ReserveSession(max_sessions, missing)) return RegisterResult::kLimit;
  if (under_lock) under_lock();
  // Missing sessions take the registration's shape: the original one's when re-registering.
  const PrefixSpec& shape = prefix != prefixes_.end() ? prefix->second.spec : spec;
  if (!key_exists) {
    Insert(shards_[key_shard], NewSession(key_sid, shape.kv_dim, shape.tier, key_index));
  }
  if (!value_exists) {
    Insert(shards_[value_shard], NewSession(value_sid, shape.kv_dim, shape.tier, value_index));
  }
  if (prefix == prefixes_.end()) AddPrefix(ns, spec);
  return RegisterResult::kCreated;
}

void VectorStore::AddPrefix(std::string_view ns, const PrefixSpec& spec) {
  PrefixEntry p;
  p.spec = spec;
  const uint8_t* h = spec.block_hashes.data();
  for (size_t i = 0; i + 8 <= spec.block_hashes.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, h + i, 8);
    p.sorted_hashes.push_back(v);
  }
  std::sort(p.sorted_hashes.begin(), p.sorted_hashes.end());
  overhead_bytes_ += kSessionOverhead + static_cast<int64_t>(ns.size()) +
                     static_cast<int64_t>(spec.block_hashes.size() * 2);
  prefixes_.emplace(std::string(ns), std::move(p));
}

void VectorStore::RestorePrefix(std::string_view ns, const PrefixSpec& spec) {
  std::lock_guard lock(prefixes_mu_);
  if (!prefixes_.contains(ns)) AddPrefix(ns, spec);
}

std::optional<PrefixSpec> VectorStore::Prefix(std::string_view ns) const {
  std::lock_guard lock(prefixes_mu_);
  auto it = prefixes_.find(ns);
  if (it == prefixes_.end()) return std::nullopt;
  return it->second.spec;
}

PrefixView VectorStore::ViewPrefix(std::string_view ns) const {
  PrefixView view;
  {
    std::lock_guard lock(prefixes_mu_);
    auto it = prefixes_.find(ns);
    if (it != prefixes_.end()) {
      view.registered = true;
      view.prefill_us = it->second.spec.prefill_us;
    }
  }
  auto inspect = [](const SessionPtr& s, bool& exists, uint64_t& tokens, uint64_t& bytes) {
    if (s == nullptr) return;
    std::lock_guard lock(s->mu);
    if (s->dropped) return;
    exists = true;
    tokens = LongestLayer(*s);
    bytes += s->tokens * s->info.row_bytes;
  };
  inspect(Find(KeySid(ns)), view.key_exists, view.key_tokens, view.bytes);
  inspect(Find(ValueSid(ns)), view.value_exists, view.value_tokens, view.bytes);
  return view;
}

std::optional<std::vector<bool>> VectorStore::Membership(std::string_view ns,
                                                         std::span<const uint64_t> probes) const {
  std::lock_guard lock(prefixes_mu_);
  auto it = prefixes_.find(ns);
  if (it == prefixes_.end() || it->second.spec.block_size == 0) return std::nullopt;
  const auto& sorted = it->second.sorted_hashes;
  std::vector<bool> present(probes.size());
  for (size_t i = 0; i < probes.size(); ++i) {
    present[i] = std::binary_search(sorted.begin(), sorted.end(), probes[i]);
  }
  return present;
}

bool VectorStore::DropPrefix(std::string_view ns, const Hook& under_lock) {
  const std::string key_sid = KeySid(ns), value_sid = ValueSid(ns);
  std::vector<SessionPtr> released;
  std::lock_guard prefixes_lock(prefixes_mu_);
  const size_t key_shard = ShardIndex(key_sid), value_shard = ShardIndex(value_sid);
  std::vector<std::unique_lock<std::mutex>> locks;
  LockShards(locks, {key_shard, value_shard}, shards_);
  auto prefix = prefixes_.find(ns);
  auto& keys = shards_[key_shard].sessions;
  auto& values = shards_[value_shard].sessions;
  auto key = keys.find(key_sid);
  auto value = values.find(value_sid);
  if (prefix == prefixes_.end() && key == keys.end() && value == values.end()) return false;
  if (under_lock) under_lock();
  if (key != keys.end()) {
    Retire(*key->second);
    released.push_back(std::move(key->second));
    keys.erase(key);
  }
  if (value != values.end()) {
    Retire(*value->second);
    released.push_back(std::move(value->second));
    values.erase(value);
  }
  if (prefix != prefixes_.end()) {
    overhead_bytes_ -= kSessionOverhead + static_cast<int64_t>(ns.size()) +
                       static_cast<int64_t>(prefix->second.spec.block_hashes.size() * 2);
    prefixes_.erase(prefix);
  }
  return true;
}

std::pair<uint64_t, uint64_t> VectorStore::PrefixTotals() const {
  std::vector<std::string> names;
  {
    std::lock_guard lock(prefixes_mu_);
    names.reserve(prefixes_.size());
    for (const auto& [ns, p] : prefixes_) names.push_back(ns);
  }
  uint64_t tokens = 0;
  for (const auto& ns : names) {
    if (SessionPtr s = Find(KeySid(ns))) {
      std::lock_guard lock(s->mu);
      if (!s->dropped) tokens += LongestLayer(*s);
    }
  }
  return {names.size(), tokens};
}

void VectorStore::ForEachSession(
    const std::function<void(const std::string&, const VectorSessionInfo&,
                             const std::vector<LayerRead>&)>& visit,
    bool read_cold) const {
  struct Copied {
    std::string sid;
    VectorSessionInfo info;
    CopiedRuns runs;
  };
  std::vector<Copied> copied;
  for (size_t i = 0; i < shard_count_; ++i) {
    copied.clear();
    {
      std::lock_guard lock(shards_[i].mu);
      copied.reserve(shards_[i].sessions.size());
      for (const auto& [sid, s] : shards_[i].sessions) {
        std::lock_guard session_lock(s->mu);
        copied.push_back(Copied{sid, s->info, AllRuns(*s)});
      }
    }
    // Cold layers are read one session at a time, with no lock held.
    for (Copied& c : copied) {
      if (read_cold) {
        ReadColdRuns(c.runs, c.info.row_bytes);
      } else {
        for (auto& [index, extents] : c.runs.cold_places) {
          c.runs.layers[index].cold_extents = std::move(extents);
        }
      }
      visit(c.sid, c.info, c.runs.layers);
      c.runs = CopiedRuns{};
    }
  }
}

VectorStore::CopiedRuns VectorStore::AllRuns(const Session& s) const {
  CopiedRuns out;
  for (const auto& [id, layer] : s.layers) {
    LayerRead read;
    read.layer = id;
    read.length = layer.length;
    read.version = layer.version;
    read.cold = layer.cold;
    if (layer.cold) {
      out.cold_places.emplace_back(out.layers.size(), layer.places.Extents());
    } else {
      read.runs = StoredRuns(s, layer);
    }
    out.layers.push_back(std::move(read));
  }
  return out;
}

void VectorStore::ReadColdRuns(CopiedRuns& copied, size_t row_bytes) const {
  if (!copied.cold_places.empty()) cold_reads_.fetch_add(1, std::memory_order_relaxed);
  for (const auto& [index, places] : copied.cold_places) {
    LayerRead& read = copied.layers[index];
    for (const auto& [start, extent] : places) {
      RowSpan span = ReadCold({extent}, row_bytes);
      if (read.runs.empty() || read.runs.back().start + read.runs.back().rows.rows != start) {
        read.runs.push_back(RowRun{start, {}});
      }
      RowSpan& run = read.runs.back().rows;
      run.rows += span.rows;
      for (Bytes& piece : span.pieces) run.pieces.push_back(std::move(piece));
    }
    // As StoredRuns: rows past the last stored one still count towards the length.
    if (read.length > 0 &&
        (read.runs.empty() || read.runs.back().start + read.runs.back().rows.rows < read.length)) {
      RowRun last{read.length - 1, {}};
      last.rows.rows = 1;
      AppendZeroRows(last.rows.pieces, 1, row_bytes);
      read.runs.push_back(std::move(last));
    }
  }
  copied.cold_places.clear();
}

std::optional<std::pair<VectorSessionInfo, std::vector<LayerRead>>> VectorStore::ReadSessionRuns(
    std::string_view sid) const {
  SessionPtr s = Find(sid);
  if (s == nullptr) return std::nullopt;
  CopiedRuns copied;
  {
    std::lock_guard lock(s->mu);
    if (s->dropped) return std::nullopt;
    copied = AllRuns(*s);
  }
  ReadColdRuns(copied, s->info.row_bytes);
  return std::make_pair(s->info, std::move(copied.layers));
}

// ---- The disk tier ----

void VectorStore::InsertPlace(Layer& layer, size_t row_bytes, uint64_t start, uint64_t rows,
                              std::shared_ptr<const ColdFile> file, uint64_t offset) {
  const auto before = static_cast<int64_t>(layer.places.MemoryBytes());
  layer.places.Insert(start, rows, std::move(file), offset, row_bytes);
  overhead_bytes_ += static_cast<int64_t>(layer.places.MemoryBytes()) - before;
}

void VectorStore::Place(std::string_view sid, uint64_t index, uint32_t layer, uint64_t start,
                        uint64_t rows, std::shared_ptr<const ColdFile> file, uint64_t offset) {
  SessionPtr s = Find(sid);
  if (s == nullptr) return;
  std::lock_guard lock(s->mu);
  if (s->dropped || (index != kAnyIndex && s->info.index != index)) return;
  auto it = s->layers.find(layer);
  if (it == s->layers.end()) return;
  Layer& l = it->second;
  if (l.unplaced > 0) l.unplaced -= 1;
  if (file == nullptr) {
    l.unplaceable = true;
    return;
  }
  InsertPlace(l, s->info.row_bytes, start, rows, std::move(file), offset);
}

void VectorStore::Repoint(std::string_view sid, uint64_t index, uint32_t layer, uint64_t version,
                          const std::vector<PlacedRun>& runs,
                          std::shared_ptr<const ColdFile> file) {
  SessionPtr s = Find(sid);
  if (s == nullptr) return;
  RowPlaces released;  // file handles dropped after the lock
  std::lock_guard lock(s->mu);
  if (s->dropped || s->info.index != index) return;
  auto it = s->layers.find(layer);
  if (it == s->layers.end() || it->second.version != version) return;
  Layer& l = it->second;
  if (l.cold) AccountCold(l, -1);
  overhead_bytes_ -= static_cast<int64_t>(l.places.MemoryBytes());
  released = std::move(l.places);
  l.places = RowPlaces();
  l.cold_bytes = 0;
  l.unplaceable = false;  // every row is in the snapshot now
  for (const PlacedRun& run : runs) {
    InsertPlace(l, s->info.row_bytes, run.start, run.rows, file, run.offset);
    l.cold_bytes += run.rows * s->info.row_bytes;
  }
  if (l.cold) AccountCold(l, 1);
}

bool VectorStore::PutColdRows(std::string_view sid, uint32_t layer, uint64_t start, uint64_t rows,
                              uint32_t dim, Tier tier, std::shared_ptr<const ColdFile> file,
                              uint64_t offset) {
  SessionPtr s = Find(sid);
  if (s == nullptr || rows == 0 || file == nullptr) return false;
  std::lock_guard lock(s->mu);
  if (s->dropped || s->info.dim != dim || s->info.tier != tier) return false;
  auto [it, inserted] = s->layers.try_emplace(layer);
  Layer& l = it->second;
  if (inserted) {
    layers_ += 1;
    overhead_bytes_ += kLayerOverhead;
    l.cold = true;
  } else if (!l.cold) {
    return false;
  } else {
    AccountCold(l, -1);
  }
  InsertPlace(l, s->info.row_bytes, start, rows, std::move(file), offset);
  l.cold_bytes += rows * s->info.row_bytes;
  AccountCold(l, 1);
  if (start + rows > l.length) {
    const uint64_t added = start + rows - l.length;
    l.length = start + rows;
    s->tokens += added;
    tokens_ += static_cast<int64_t>(added);
    payload_bytes_ += static_cast<int64_t>(added * s->info.row_bytes);
  }
  return true;
}

VectorColdOutcome VectorStore::MakeCold(std::string_view sid) {
  VectorColdOutcome out;
  SessionPtr s = Find(sid);
  if (s == nullptr) return out;
  std::vector<Bytes> released;  // freed after the lock
  std::lock_guard lock(s->mu);
  if (s->dropped) return out;
  out.existed = true;
  const size_t row_bytes = s->info.row_bytes;
  for (const auto& [id, l] : s->layers) {
    if (l.cold) continue;
    if (l.unplaceable || l.unplaced > 0 || !l.places.Durable(row_bytes)) return out;
  }
  for (auto& [id, l] : s->layers) {
    if (l.cold) continue;
    int64_t freed = 0;
    for (auto& [c, chunk] : l.chunks) {
      freed += static_cast<int64_t>(chunk.capacity());
      out.freed += chunk.size();
      released.push_back(std::move(chunk));
    }
    s->allocated -= static_cast<uint64_t>(freed);
    allocated_bytes_ -= freed;
    overhead_bytes_ -= kChunkHandleOverhead * static_cast<int64_t>(l.chunks.size());
    l.chunks.clear();
    l.cold = true;
    l.cold_bytes = l.places.DiskBytes(row_bytes);
    AccountCold(l, 1);
  }
  out.ok = true;
  return out;
}

uint64_t VectorStore::ColdBytes(std::string_view sid) const {
  SessionPtr s = Find(sid);
  if (s == nullptr) return 0;
  std::lock_guard lock(s->mu);
  if (s->dropped) return 0;
  uint64_t total = 0;
  for (const auto& [id, l] : s->layers) total += l.cold ? std::max<uint64_t>(l.cold_bytes, 1) : 0;
  return total;
}

RowSpan VectorStore::ReadCold(const std::vector<ColdPiece>& pieces, size_t row_bytes) const {
  RowSpan span;
  for (size_t first = 0; first < pieces.size();) {
    const ColdPiece& head = pieces[first];
    span.rows += head.rows;
    if (head.file == nullptr) {
      AppendZeroRows(span.pieces, head.rows, row_bytes);
      ++first;
      continue;
    }
    // Pieces that follow each other closely in one file are one read.
    uint64_t end = head.offset + head.rows * row_bytes;
    size_t last = first + 1;
    while (last < pieces.size() && pieces[last].file == head.file && pieces[last].offset >= end &&
           pieces[last].offset - end <= kMaxReadGap) {
      end = pieces[last].offset + pieces[last].rows * row_bytes;
      span.rows += pieces[last].rows;
      ++last;
    }
    Bytes read;
    std::string error;
    if (!head.file->Read(head.offset, end - head.offset, read, error)) {
      throw std::runtime_error("reading a stored value from disk failed: " + error);
    }
    cold_bytes_read_.fetch_add(end - head.offset, std::memory_order_relaxed);
    for (size_t k = first; k < last; ++k) {
      span.pieces.push_back(read.Slice(pieces[k].offset - head.offset, pieces[k].rows * row_bytes));
    }
    first = last;
  }
  return span;
}

void VectorStore::ReadOrLeave(std::vector<ColdPiece> pieces, size_t row_bytes, uint64_t stream_from,
                              LayerRead& read) const {
  uint64_t rows = 0, on_disk = 0;
  for (const ColdPiece& p : pieces) {
    rows += p.rows;
    if (p.file != nullptr) on_disk += p.rows * row_bytes;
  }
  if (rows * row_bytes < stream_from) {
    read.rows = ReadCold(pieces, row_bytes);
    return;
  }
  cold_bytes_read_.fetch_add(on_disk, std::memory_order_relaxed);
  read.rows = RowSpan{rows, {}};
  read.unread = std::move(pieces);
}

void VectorStore::Refill(Session& s, Layer& layer, const RowSpan& span) {
  AccountCold(layer, -1);
  layer.cold = false;
  layer.cold_bytes = 0;
  // No reader holds a chunk of a cold layer: with the length at 0 WriteRows fills them in place
  // (growing each by doubling) and skips all-zero ones; the token count it adds is taken back.
  const uint64_t length = layer.length, tokens = s.tokens;
  layer.length = 0;
  uint64_t row = 0;
  for (const Bytes& piece : span.pieces) {
    const uint64_t rows = piece.size() / s.info.row_bytes;
    if (rows > 0) WriteRows(s, layer, row, rows, piece.data());
    row += rows;
  }
  const uint64_t added = s.tokens - tokens;
  s.tokens = tokens;
  tokens_ -= static_cast<int64_t>(added);
  payload_bytes_ -= static_cast<int64_t>(added * s.info.row_bytes);
  layer.length = length;
}

void VectorStore::LoadColdLayer(Session& s, Layer& layer) {
  Refill(s, layer,
         ReadCold(ColdPieces(layer, s.info.row_bytes, 0, layer.length), s.info.row_bytes));
}

bool VectorStore::Promote(std::string_view sid) {
  SessionPtr s = Find(sid);
  if (s == nullptr) return false;
  std::vector<std::tuple<uint32_t, uint64_t, std::vector<ColdPiece>>> cold;
  {
    std::lock_guard lock(s->mu);
    if (s->dropped) return false;
    for (const auto& [id, l] : s->layers) {
      if (l.cold) cold.emplace_back(id, l.version, ColdPieces(l, s->info.row_bytes, 0, l.length));
    }
  }
  if (cold.empty()) return true;
  // A fetch that promotes reads the cold rows here, not in its own read: it counts as one.
  cold_reads_.fetch_add(1, std::memory_order_relaxed);
  std::vector<RowSpan> read;
  read.reserve(cold.size());
  for (const auto& [id, version, pieces] : cold)
    read.push_back(ReadCold(pieces, s->info.row_bytes));
  std::lock_guard lock(s->mu);
  if (s->dropped) return false;
  for (size_t i = 0; i < cold.size(); ++i) {
    auto it = s->layers.find(std::get<0>(cold[i]));
    // Only the state that was read: a layer written or moved meanwhile keeps its own.
    if (it == s->layers.end() || !it->second.cold || it->second.version != std::get<1>(cold[i]))
      continue;
    Refill(*s, it->second, read[i]);
  }
  for (const auto& [id, l] : s->layers) {
    if (l.cold) return false;
  }
  promotions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void VectorStore::ForEachPrefix(
    const std::function<void(const std::string&, const PrefixSpec&)>& visit) const {
  std::vector<std::pair<std::string, PrefixSpec>> copied;
  {
    std::lock_guard lock(prefixes_mu_);
    for (const auto& [ns, p] : prefixes_) copied.emplace_back(ns, p.spec);
  }
  for (const auto& [ns, spec] : copied) visit(ns, spec);
}

VectorStoreStats VectorStore::Stats() const {
  VectorStoreStats s;
  auto get = [](const std::atomic<int64_t>& v) {
    return static_cast<uint64_t>(std::max<int64_t>(0, v.load()));
  };
  s.sessions = get(sessions_);
  s.layers = get(layers_);
  s.tokens = get(tokens_);
  s.payload_bytes = get(payload_bytes_);
  s.allocated_bytes = get(allocated_bytes_);
  s.overhead_bytes = get(overhead_bytes_);
  s.cold_layers = get(cold_layers_);
  s.cold_bytes = get(cold_bytes_);
  s.cold_reads = cold_reads_.load();
  s.cold_bytes_read = cold_bytes_read_.load();
  s.promotions = promotions_.load();
  {
    std::lock_guard lock(prefixes_mu_);
    s.prefixes = prefixes_.size();
  }
  return s;
}

}  // namespace prefixd::store
