// prefixd::Client's SSM.PREFIX.* family: per-layer recurrent-state blobs (STORE, FETCH and its
// RANGE form, the pipelined FetchInto, DROP, MSTORE, MFETCH, LAYERS).
#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include "connection.h"
#include "prefixd/client.h"

namespace prefixd {

using client_internal::AsChars;
using client_internal::BulkRead;
using client_internal::CheckLayer;
using client_internal::Decimal;
using client_internal::MovedFrom;

namespace {

constexpr std::string_view kFetchRange = "SSM.PREFIX.FETCH RANGE";

void AddRange(Client::Impl& c, std::string_view sid, uint32_t layer, uint64_t offset,
              uint64_t length) {
  const Decimal layer_text(layer);
  const Decimal offset_text(offset);
  const Decimal length_text(length);
  const std::array<std::string_view, 6> args{
      "SSM.PREFIX.FETCH", sid, layer_text.view(), "RANGE", offset_text.view(), length_text.view()};
  c.Add(args);
}

}  // namespace

Status Client::Store(std::string_view sid, uint32_t layer, std::span<const uint8_t> blob) {
  return Store(sid, layer, AsChars(blob));
}

Status Client::Store(std::string_view sid, uint32_t layer, std::string_view blob) {
  if (!impl_) return MovedFrom();
  PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
  const Decimal layer_text(layer);
  const std::array<std::string_view, 4> args{"SSM.PREFIX.STORE", sid, layer_text.view(), blob};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("OK", "SSM.PREFIX.STORE");
}

Result<std::optional<Blob>> Client::Fetch(std::string_view sid, uint32_t layer) {
  if (!impl_) return MovedFrom();
  PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
  const Decimal layer_text(layer);
  const std::array<std::string_view, 3> args{"SSM.PREFIX.FETCH", sid, layer_text.view()};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadBulk("SSM.PREFIX.FETCH", /*in_array=*/false);
}

Result<std::optional<size_t>> Client::FetchRange(std::string_view sid, uint32_t layer,
                                                 uint64_t offset, uint64_t length,
                                                 std::span<uint8_t> out) {
  if (!impl_) return MovedFrom();
  Impl& c = *impl_;
  PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
  if (out.size() < length) {
    return Status::InvalidArgument("FetchRange: the buffer has " + std::to_string(out.size()) +
                                   " bytes, the range " + std::to_string(length));
  }
  PREFIXD_RETURN_IF_ERROR(c.Usable());
  AddRange(c, sid, layer, offset, length);
  PREFIXD_RETURN_IF_ERROR(c.Flush());
  PREFIXD_ASSIGN_OR_RETURN(BulkRead read, c.reader().ReadBulkInto(out.first(length), kFetchRange));
  if (read.nil) return std::optional<size_t>();
  if (read.length > length) {
    return c.Fail(Status::ProtocolError("SSM.PREFIX.FETCH RANGE asked for " +
                                        std::to_string(length) + " bytes and got " +
                                        std::to_string(read.length)));
  }
  return std::optional<size_t>(read.length);
}

Result<std::optional<size_t>> Client::FetchInto(std::string_view sid, uint32_t layer,
                                                std::span<uint8_t> out, size_t chunk_bytes,
                                                int depth) {
  if (!impl_) return MovedFrom();
  Impl& c = *impl_;
  PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
  PREFIXD_RETURN_IF_ERROR(c.Usable());
  const uint64_t chunk = std::max<uint64_t>(chunk_bytes, 1);
  const size_t max_in_flight = static_cast<size_t>(std::clamp(depth, 1, 1024));
  // The last request reaches one byte past `out`: that byte coming back means the blob does not
  // fit, and its absence proves it does without a separate size query.
  const uint64_t limit = uint64_t{out.size()} + 1;

  struct Pending {
    uint64_t offset;
    uint64_t length;
  };
  std::deque<Pending> pending;
  uint64_t next = 0;
  bool issuing = true;
  bool first = true;
  bool absent = false;
  std::optional<uint64_t> end;  // the blob's size, once a short chunk shows it
  Status deferred;              // a non-fatal error, returned once the pipeline has drained

  for (;;) {
    while (issuing && pending.size() < max_in_flight && next < limit) {
      const uint64_t length = std::min(chunk, limit - next);
      AddRange(c, sid, layer, next, length);
      pending.push_back({next, length});
      next += length;
    }
    if (c.has_queued()) PREFIXD_RETURN_IF_ERROR(c.Flush());
    if (pending.empty()) break;
    const Pending p = pending.front();
    pending.pop_front();
    const bool was_first = std::exchange(first, false);

    const size_t start = static_cast<size_t>(std::min<uint64_t>(p.offset, out.size()));
    const size_t room = static_cast<size_t>(std::min<uint64_t>(p.length, out.size() - start));
    auto read = c.reader().ReadBulkInto(out.subspan(start, room), kFetchRange);
    if (!read.ok()) {
      if (!c.connected()) return read.status();
      if (deferred.ok()) deferred = read.status();
      issuing = false;
      continue;
    }
    if (read->nil) {
      if (was_first) {
        absent = true;
      } else if (!absent && deferred.ok()) {
        deferred =
            Status::Aborted("layer " + std::to_string(layer) +
                            " was dropped during FetchInto, at offset " + std::to_string(p.offset));
      }
      issuing = false;
      continue;
    }
    if (absent) continue;  // created during the transfer: the first reply decides
    if (read->length > p.length) {
      return c.Fail(Status::ProtocolError("SSM.PREFIX.FETCH RANGE asked for " +
                                          std::to_string(p.length) + " bytes and got " +
                                          std::to_string(read->length)));
    }
    if (read->length > room) {
      if (deferred.ok()) {
        deferred = Status::OutOfRange("layer " + std::to_string(layer) + " is larger than the " +
                                      std::to_string(out.size()) + "-byte buffer");
      }
      issuing = false;
      continue;
    }
    if (end.has_value()) {
      if (read->length > 0 && deferred.ok()) {
        deferred =
            Status::Aborted("layer " + std::to_string(layer) +
                            " grew during FetchInto, past its end at " + std::to_string(*end));
      }
      continue;
    }
    if (read->length < p.length) {
      end = p.offset + read->length;
      issuing = false;
    }
  }
  if (!deferred.ok()) return deferred;
  if (absent) return std::optional<size_t>();
  if (!end.has_value()) return Status::Internal("FetchInto finished without finding the end");
  return std::optional<size_t>(static_cast<size_t>(*end));
}

Status Client::Drop(std::string_view sid) {
  if (!impl_) return MovedFrom();
  const std::array<std::string_view, 2> args{"SSM.PREFIX.DROP", sid};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("OK", "SSM.PREFIX.DROP");
}

Status Client::Drop(std::string_view sid, uint32_t layer) {
  if (!impl_) return MovedFrom();
  PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
  const Decimal layer_text(layer);
  const std::array<std::string_view, 3> args{"SSM.PREFIX.DROP", sid, layer_text.view()};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("OK", "SSM.PREFIX.DROP");
}

Status Client::MStore(std::string_view sid, std::span<const LayerBlob> layers) {
  if (!impl_) return MovedFrom();
  if (layers.empty()) return Status::InvalidArgument("MStore needs at least one layer");
  std::vector<Decimal> layer_texts;
  layer_texts.reserve(layers.size());
  std::vector<std::string_view> args;
  args.reserve(2 + 2 * layers.size());
  args.push_back("SSM.PREFIX.MSTORE");
  args.push_back(sid);
  for (const LayerBlob& entry : layers) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(entry.layer));
    layer_texts.emplace_back(entry.layer);
    args.push_back(layer_texts.back().view());
    args.push_back(AsChars(entry.bytes));
  }
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("OK", "SSM.PREFIX.MSTORE");
}

Result<std::vector<std::optional<Blob>>> Client::MFetch(std::string_view sid,
                                                        std::span<const uint32_t> layers) {
  if (!impl_) return MovedFrom();
  if (layers.empty()) return Status::InvalidArgument("MFetch needs at least one layer");
  std::vector<Decimal> layer_texts;
  layer_texts.reserve(layers.size());
  std::vector<std::string_view> args;
  args.reserve(2 + layers.size());
  args.push_back("SSM.PREFIX.MFETCH");
  args.push_back(sid);
  for (uint32_t layer : layers) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
    layer_texts.emplace_back(layer);
    args.push_back(layer_texts.back().view());
  }
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  client_internal::ReplyReader& reader = impl_->reader();
  PREFIXD_ASSIGN_OR_RETURN(int64_t count, reader.ReadArrayHead("SSM.PREFIX.MFETCH"));
  if (count != static_cast<int64_t>(layers.size())) {
    return impl_->Fail(Status::ProtocolError("SSM.PREFIX.MFETCH asked for " +
                                             std::to_string(layers.size()) + " layers and got " +
                                             std::to_string(count) + " replies"));
  }
  std::vector<std::optional<Blob>> blobs;
  blobs.reserve(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    PREFIXD_ASSIGN_OR_RETURN(std::optional<Blob> blob,
                             reader.ReadBulk("SSM.PREFIX.MFETCH", /*in_array=*/true));
    blobs.push_back(std::move(blob));
  }
  return blobs;
}

Result<std::vector<LayerInfo>> Client::Layers(std::string_view sid) {
  if (!impl_) return MovedFrom();
  const std::array<std::string_view, 2> args{"SSM.PREFIX.LAYERS", sid};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  client_internal::ReplyReader& reader = impl_->reader();
  PREFIXD_ASSIGN_OR_RETURN(int64_t count, reader.ReadArrayHead("SSM.PREFIX.LAYERS"));
  if (count < 0 || count % 2 != 0) {
    return impl_->Fail(Status::ProtocolError("SSM.PREFIX.LAYERS replied with " +
                                             std::to_string(count) +
                                             " elements, not layer/size pairs"));
  }
  std::vector<LayerInfo> infos;
  infos.reserve(static_cast<size_t>(count / 2));
  for (int64_t i = 0; i < count; i += 2) {
    PREFIXD_ASSIGN_OR_RETURN(int64_t layer, reader.ReadIntegerInArray("SSM.PREFIX.LAYERS"));
    PREFIXD_ASSIGN_OR_RETURN(int64_t size, reader.ReadIntegerInArray("SSM.PREFIX.LAYERS"));
    if (layer < 0 || layer > kMaxLayer || size < 0) {
      return impl_->Fail(Status::ProtocolError("SSM.PREFIX.LAYERS replied with layer " +
                                               std::to_string(layer) + " of size " +
                                               std::to_string(size)));
    }
    infos.push_back({static_cast<uint32_t>(layer), static_cast<uint64_t>(size)});
  }
  return infos;
}

}  // namespace prefixd
