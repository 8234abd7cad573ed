// prefixd::Client's prefix-index family (docs/prefix-index.md): the hash chain, namespaces,
// blocks, checkpoints, the match and its lease. Hashes travel as raw 16-byte arguments.
#include <xxhash.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "connection.h"
#include "prefix_store_args.h"
#include "prefixd/client.h"

namespace prefixd {

using client_internal::AsChars;
using client_internal::Decimal;
using client_internal::MovedFrom;

namespace {

PrefixHash HashBytes(const PrefixHash& parent, const uint32_t* tokens, size_t n) {
  std::vector<uint8_t> buf(16 + 4 * n);
  std::memcpy(buf.data(), parent.data(), 16);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t t = tokens[i];
    for (int b = 0; b < 4; ++b) buf[16 + 4 * i + b] = static_cast<uint8_t>(t >> (8 * b));
  }
  const XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  PrefixHash out;
  for (int b = 0; b < 8; ++b) {
    out[b] = static_cast<uint8_t>(h.low64 >> (8 * b));
    out[8 + b] = static_cast<uint8_t>(h.high64 >> (8 * b));
  }
  return out;
}

std::string_view HashesView(std::span<const PrefixHash> hashes) {
  return {reinterpret_cast<const char*>(hashes.data()), hashes.size() * sizeof(PrefixHash)};
}

std::string_view HashView(const PrefixHash& h) {
  return {reinterpret_cast<const char*>(h.data()), h.size()};
}

void AddFormat(std::vector<std::string_view>& args, RowFormat format) {
  if (format == RowFormat::kF16) args.insert(args.end(), {"FMT", "F16"});
  if (format == RowFormat::kBf16) args.insert(args.end(), {"FMT", "BF16"});
}

// `<layer> <blob>` pairs; the layer texts live in `texts` (a deque: stable addresses). The blobs'
// indices in `args` join `blobs` when given.
void AddLayers(std::vector<std::string_view>& args, std::deque<Decimal>& texts,
               std::span<const LayerBlob> layers, std::vector<size_t>* blobs = nullptr) {
  for (const LayerBlob& l : layers) {
    texts.emplace_back(l.layer);
    args.push_back(texts.back().view());
    if (blobs != nullptr) blobs->push_back(args.size());
    args.push_back(AsChars(l.bytes));
  }
}

// A checkpoint's `<layer> <blob>` pairs, then TAIL and its rows.
void AddCheckpointParts(std::vector<std::string_view>& args, std::deque<Decimal>& texts,
                        const PrefixCheckpointParts& parts, std::vector<size_t>* blobs = nullptr) {
  AddLayers(args, texts, parts.states, blobs);
  if (!parts.tail.empty()) {
    args.push_back("TAIL");
    AddLayers(args, texts, parts.tail, blobs);
    AddFormat(args, parts.format);
  }
}

}  // namespace

namespace client_internal {

void BlockStoreArgs(StoreArgs& out, std::string_view ns, const PrefixHash& parent,
                    std::span<const PrefixHash> hashes, std::span<const LayerBlob> layers,
                    RowFormat format) {
  out.texts.emplace_back(hashes.size());
  out.argv = {"KV.PREFIX.BSTORE", ns, HashView(parent), out.texts.back().view(),
              HashesView(hashes)};
  AddLayers(out.argv, out.texts, layers, &out.blobs);
  AddFormat(out.argv, format);
}

void CheckpointStoreArgs(StoreArgs& out, std::string_view ns, const PrefixHash& anchor,
                         uint64_t length, const PrefixHash& position,
                         const PrefixCheckpointParts& parts) {
  out.texts.emplace_back(length);
  out.argv = {"SSM.PREFIX.CKPT.STORE", ns, HashView(anchor), out.texts.back().view(),
              HashView(position)};
  AddCheckpointParts(out.argv, out.texts, parts, &out.blobs);
}

}  // namespace client_internal

PrefixHash PrefixHashBlock(const PrefixHash& parent, std::span<const uint32_t> tokens) {
  return HashBytes(parent, tokens.data(), tokens.size());
}

std::vector<PrefixHash> PrefixBlockHashes(std::span<const uint32_t> tokens, uint32_t block_size) {
  std::vector<PrefixHash> out;
  if (block_size == 0) return out;
  PrefixHash prev = kPrefixRoot;
  for (size_t i = 0; i + block_size <= tokens.size(); i += block_size) {
    prev = HashBytes(prev, tokens.data() + i, block_size);
    out.push_back(prev);
  }
  return out;
}

PrefixHash PrefixPositionHash(std::span<const uint32_t> tokens, uint64_t length,
                              uint32_t block_size, std::span<const PrefixHash> blocks) {
  const uint64_t depth = length / block_size;
  const PrefixHash anchor = depth == 0 ? kPrefixRoot : blocks[depth - 1];
  const uint64_t r = length - depth * block_size;
  if (r == 0) return anchor;
  return HashBytes(anchor, tokens.data() + depth * block_size, r);
}

Status Client::PrefixNamespaceCreate(std::string_view ns, const PrefixShape& shape) {
  if (!impl_) return MovedFrom();
  const Decimal bs(shape.block_size), attn(shape.attention_layers), dim(shape.kv_dim),
      rec(shape.recurrent_layers), max(shape.max_bytes);
  std::vector<std::string_view> args{
      "KV.PREFIX.NAMESPACE", ns,      "BLOCK",    bs.view(),   "ATTN",
      attn.view(),           "KVDIM", dim.view(), "RECURRENT", rec.view()};
  if (!shape.vquant.empty()) args.insert(args.end(), {"VQUANT", shape.vquant});
  if (shape.max_bytes != 0) args.insert(args.end(), {"MAXMEMORY", max.view()});
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("OK", "KV.PREFIX.NAMESPACE");
}

Result<std::optional<std::string>> Client::PrefixNamespaceInfo(std::string_view ns) {
  if (!impl_) return MovedFrom();
  const std::array<std::string_view, 2> args{"KV.PREFIX.NSINFO", ns};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  PREFIXD_ASSIGN_OR_RETURN(std::optional<Blob> blob,
                           impl_->reader().ReadBulk("KV.PREFIX.NSINFO", false));
  if (!blob) return std::optional<std::string>();
  return std::optional<std::string>(std::string(blob->begin(), blob->end()));
}

Result<int64_t> Client::PrefixStoreBlocks(std::string_view ns, const PrefixHash& parent,
                                          std::span<const PrefixHash> hashes,
                                          std::span<const LayerBlob> layers, RowFormat format) {
  if (!impl_) return MovedFrom();
  if (hashes.empty()) return Status::InvalidArgument("PrefixStoreBlocks needs a block");
  client_internal::StoreArgs args;
  client_internal::BlockStoreArgs(args, ns, parent, hashes, layers, format);
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args.argv));
  return impl_->reader().ReadInteger("KV.PREFIX.BSTORE");
}

Result<int64_t> Client::PrefixDropBlocks(std::string_view ns, std::span<const PrefixHash> hashes) {
  if (!impl_) return MovedFrom();
  const Decimal n(hashes.size());
  const std::array<std::string_view, 4> args{"KV.PREFIX.BDROP", ns, n.view(), HashesView(hashes)};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadInteger("KV.PREFIX.BDROP");
}

Result<std::optional<size_t>> Client::PrefixFetchBlocks(std::string_view ns,
                                                        std::span<const PrefixHash> hashes,
                                                        uint32_t layer, std::span<float> out) {
  if (!impl_) return MovedFrom();
  const Decimal n(hashes.size()), layer_text(layer);
  const std::array<std::string_view, 5> args{"KV.PREFIX.BFETCH", ns, n.view(), HashesView(hashes),
                                             layer_text.view()};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(out.data()), out.size_bytes());
  PREFIXD_ASSIGN_OR_RETURN(client_internal::BulkRead read,
                           impl_->reader().ReadBulkInto(bytes, "KV.PREFIX.BFETCH"));
  if (read.nil) return std::optional<size_t>();
  if (read.length > bytes.size()) {
    return Status::OutOfRange("KV.PREFIX.BFETCH returned " + std::to_string(read.length) +
                              " bytes; the buffer holds " + std::to_string(bytes.size()));
  }
  return std::optional<size_t>(static_cast<size_t>(read.length / sizeof(float)));
}

Status Client::PrefixStoreCheckpoint(std::string_view ns, const PrefixHash& anchor, uint64_t length,
                                     const PrefixHash& position,
                                     const PrefixCheckpointParts& parts) {
  if (!impl_) return MovedFrom();
  client_internal::StoreArgs args;
  client_internal::CheckpointStoreArgs(args, ns, anchor, length, position, parts);
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args.argv));
  return impl_->reader().ReadStatus("OK", "SSM.PREFIX.CKPT.STORE");
}

Result<int64_t> Client::PrefixStoreCheckpoints(std::string_view ns, const PrefixHash& anchor,
                                               uint64_t first_length,
                                               std::span<const PrefixHash> positions,
                                               const PrefixCheckpointParts& parts) {
  if (!impl_) return MovedFrom();
  const Decimal l(first_length), k(positions.size());
  std::deque<Decimal> texts;
  std::vector<std::string_view> args{
      "SSM.PREFIX.CKPT.MSTORE", ns, HashView(anchor), l.view(), k.view(), HashesView(positions)};
  AddCheckpointParts(args, texts, parts);
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadInteger("SSM.PREFIX.CKPT.MSTORE");
}

Result<int64_t> Client::PrefixDropCheckpoints(std::string_view ns,
                                              std::span<const PrefixHash> positions) {
  if (!impl_) return MovedFrom();
  const Decimal n(positions.size());
  const std::array<std::string_view, 4> args{"SSM.PREFIX.CKPT.DROP", ns, n.view(),
                                             HashesView(positions)};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadInteger("SSM.PREFIX.CKPT.DROP");
}

namespace {

// An array of bulk blobs (nil array: nullopt).
Result<std::optional<std::vector<Blob>>> ReadBlobArray(Client::Impl& c, std::string_view command) {
  PREFIXD_ASSIGN_OR_RETURN(client_internal::ReplyHead head, c.reader().Head());
  if (head.type == '-') return Status::ServerError(std::string(head.text));
  if (head.type != '*') return c.reader().Unexpected(head, command, "an array");
  auto count = client_internal::ParseInteger(head.text);
  if (!count) return c.Fail(Status::ProtocolError(std::string(command) + ": bad array length"));
  if (*count < 0) return std::optional<std::vector<Blob>>();
  std::vector<Blob> blobs;
  for (int64_t i = 0; i < *count; ++i) {
    PREFIXD_ASSIGN_OR_RETURN(std::optional<Blob> blob, c.reader().ReadBulk(command, true));
    blobs.push_back(blob ? std::move(*blob) : Blob());
  }
  return std::optional<std::vector<Blob>>(std::move(blobs));
}

void AddLayerList(std::vector<std::string_view>& args, std::deque<Decimal>& texts,
                  std::span<const uint32_t> layers) {
  if (layers.empty()) return;
  args.push_back("LAYERS");
  for (uint32_t l : layers) {
    texts.emplace_back(l);
    args.push_back(texts.back().view());
  }
}

}  // namespace

Result<std::optional<std::vector<Blob>>> Client::PrefixFetchCheckpoint(
    std::string_view ns, const PrefixHash& position, std::span<const uint32_t> layers) {
  if (!impl_) return MovedFrom();
  std::deque<Decimal> texts;
  std::vector<std::string_view> args{"SSM.PREFIX.CKPT.FETCH", ns, HashView(position)};
  AddLayerList(args, texts, layers);
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return ReadBlobArray(*impl_, "SSM.PREFIX.CKPT.FETCH");
}

Result<PrefixMatchResult> Client::PrefixMatch(std::string_view ns,
                                              std::span<const PrefixHash> blocks,
                                              std::span<const PrefixCandidate> candidates,
                                              std::optional<uint32_t> lease_ms) {
  if (!impl_) return MovedFrom();
  const Decimal n(blocks.size()), k(candidates.size()), ms(lease_ms.value_or(0));
  std::vector<std::string_view> args{"KV.PREFIX.MATCH", ns, n.view(), HashesView(blocks)};
  std::string lengths, positions;
  if (!candidates.empty()) {
    for (const PrefixCandidate& c : candidates) {
      for (int b = 0; b < 8; ++b) lengths.push_back(static_cast<char>(c.length >> (8 * b)));
      positions.append(HashView(c.position));
    }
    args.insert(args.end(), {"AT", k.view(), lengths, positions});
  }
  if (lease_ms && *lease_ms == 0) args.push_back("NOLEASE");
  if (lease_ms && *lease_ms > 0) args.insert(args.end(), {"LEASE", ms.view()});
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  client_internal::ReplyReader& reader = impl_->reader();
  PREFIXD_ASSIGN_OR_RETURN(int64_t count, reader.ReadArrayHead("KV.PREFIX.MATCH"));
  if (count != 6) {
    return impl_->Fail(Status::ProtocolError("KV.PREFIX.MATCH replied with " +
                                             std::to_string(count) + " elements, not 6"));
  }
  PrefixMatchResult r;
  PREFIXD_ASSIGN_OR_RETURN(int64_t length, reader.ReadIntegerInArray("KV.PREFIX.MATCH"));
  PREFIXD_ASSIGN_OR_RETURN(int64_t lease, reader.ReadIntegerInArray("KV.PREFIX.MATCH"));
  PREFIXD_ASSIGN_OR_RETURN(int64_t matched, reader.ReadIntegerInArray("KV.PREFIX.MATCH"));
  PREFIXD_ASSIGN_OR_RETURN(std::optional<Blob> pos, reader.ReadBulk("KV.PREFIX.MATCH", true));
  PREFIXD_ASSIGN_OR_RETURN(int64_t kv, reader.ReadIntegerInArray("KV.PREFIX.MATCH"));
  PREFIXD_ASSIGN_OR_RETURN(int64_t state, reader.ReadIntegerInArray("KV.PREFIX.MATCH"));
  if (!pos || pos->size() != r.position.size()) {
    return impl_->Fail(Status::ProtocolError("KV.PREFIX.MATCH: the position is not 16 bytes"));
  }
  std::memcpy(r.position.data(), pos->data(), r.position.size());
  r.length = static_cast<uint64_t>(length), r.lease = static_cast<uint64_t>(lease);
  r.matched_blocks = static_cast<uint64_t>(matched), r.kv_bytes = static_cast<uint64_t>(kv);
  r.state_bytes = static_cast<uint64_t>(state);
  return r;
}

Result<size_t> Client::PrefixLeaseFetchAttention(std::string_view ns, uint64_t lease,
                                                 uint32_t layer, uint64_t start, uint64_t end,
                                                 std::span<float> out, bool release) {
  if (!impl_) return MovedFrom();
  const Decimal lease_text(lease), layer_text(layer), s(start), e(end);
  std::vector<std::string_view> args{"KV.PREFIX.LFETCH", ns,      lease_text.view(), "ATTN",
                                     layer_text.view(),  "RANGE", s.view(),          e.view()};
  if (release) args.push_back("RELEASE");
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(out.data()), out.size_bytes());
  PREFIXD_ASSIGN_OR_RETURN(client_internal::BulkRead read,
                           impl_->reader().ReadBulkInto(bytes, "KV.PREFIX.LFETCH"));
  if (read.nil) return impl_->Fail(Status::ProtocolError("KV.PREFIX.LFETCH replied nil"));
  if (read.length > bytes.size()) {
    return Status::OutOfRange("KV.PREFIX.LFETCH returned " + std::to_string(read.length) +
                              " bytes; the buffer holds " + std::to_string(bytes.size()));
  }
  return static_cast<size_t>(read.length / sizeof(float));
}

Result<std::vector<Blob>> Client::PrefixLeaseFetchState(std::string_view ns, uint64_t lease,
                                                        std::span<const uint32_t> layers,
                                                        bool release) {
  if (!impl_) return MovedFrom();
  const Decimal lease_text(lease);
  std::deque<Decimal> texts;
  std::vector<std::string_view> args{"KV.PREFIX.LFETCH", ns, lease_text.view(), "STATE"};
  AddLayerList(args, texts, layers);
  if (release) args.push_back("RELEASE");
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  PREFIXD_ASSIGN_OR_RETURN(std::optional<std::vector<Blob>> blobs,
                           ReadBlobArray(*impl_, "KV.PREFIX.LFETCH"));
  return blobs ? std::move(*blobs) : std::vector<Blob>();
}

Status Client::PrefixLeaseFetchAll(std::string_view ns, uint64_t lease,
                                   std::span<const PrefixLeaseRows> attention,
                                   std::span<const PrefixLeaseBlob> state, bool release) {
  if (!impl_) return MovedFrom();
  PREFIXD_RETURN_IF_ERROR(impl_->Usable());
  const Decimal lease_text(lease);
  std::deque<Decimal> layers;
  for (const PrefixLeaseRows& a : attention) {
    layers.emplace_back(a.layer);
    const std::array<std::string_view, 7> args{
        "KV.PREFIX.LFETCH", ns, lease_text.view(), "ATTN", layers.back().view(), "FMT", "NATIVE"};
    impl_->Add(args);
  }
  std::vector<std::string_view> state_args{"KV.PREFIX.LFETCH", ns, lease_text.view(), "STATE"};
  if (release) state_args.push_back("RELEASE");
  impl_->Add(state_args);
  PREFIXD_RETURN_IF_ERROR(impl_->Flush());

  // Every reply is read even after an error reply, so that the stream stays in step.
  Status first = Status::Ok();
  auto mismatch = [&](std::string what, uint64_t got, uint64_t want) {
    if (first.ok()) {
      first = Status::OutOfRange("KV.PREFIX.LFETCH of " + what + " returned " +
                                 std::to_string(got) + " bytes, expected " + std::to_string(want));
    }
  };
  for (const PrefixLeaseRows& a : attention) {
    const std::array<std::span<uint8_t>, 2> pieces{a.k_rows, a.v_rows};
    Result<client_internal::BulkRead> read =
        impl_->reader().ReadBulkScatter(pieces, "KV.PREFIX.LFETCH", /*in_array=*/false);
    if (!read.ok()) {
      if (read.status().code() != StatusCode::kServerError) return read.status();
      if (first.ok()) first = read.status();
      continue;
    }
    const uint64_t want = a.k_rows.size() + a.v_rows.size();
    if (read->nil || read->length != want)
      mismatch("layer " + std::to_string(a.layer), read->length, want);
  }
  Result<int64_t> count = impl_->reader().ReadArrayHead("KV.PREFIX.LFETCH");
  if (!count.ok()) {
    if (count.status().code() != StatusCode::kServerError) return count.status();
    return first.ok() ? count.status() : first;
  }
  if (*count != static_cast<int64_t>(state.size())) {
    // The blobs are still read (and dropped) to keep the stream in step.
    mismatch("STATE (blobs)", static_cast<uint64_t>(*count), state.size());
  }
  for (int64_t i = 0; i < *count; ++i) {
    const bool wanted = static_cast<size_t>(i) < state.size();
    const std::array<std::span<uint8_t>, 2> pieces =
        wanted ? std::array<std::span<uint8_t>, 2>{state[i].first, state[i].second}
               : std::array<std::span<uint8_t>, 2>{};
    PREFIXD_ASSIGN_OR_RETURN(
        client_internal::BulkRead read,
        impl_->reader().ReadBulkScatter(pieces, "KV.PREFIX.LFETCH", /*in_array=*/true));
    const uint64_t want = pieces[0].size() + pieces[1].size();
    if (wanted && (read.nil || read.length != want)) {
      mismatch("recurrent layer " + std::to_string(i), read.length, want);
    }
  }
  return first;
}

Result<bool> Client::PrefixRelease(std::string_view ns, uint64_t lease) {
  if (!impl_) return MovedFrom();
  const Decimal lease_text(lease);
  const std::array<std::string_view, 3> args{"KV.PREFIX.RELEASE", ns, lease_text.view()};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  PREFIXD_ASSIGN_OR_RETURN(int64_t n, impl_->reader().ReadInteger("KV.PREFIX.RELEASE"));
  return n != 0;
}

}  // namespace prefixd
