// prefixd::Client's V-store family (V.CREATE, V.STOREBATCH, V.FETCH ... RANGE, V.DROP):
// attention K/V rows, sent from and fetched into the caller's memory without staging copies.
#include <array>
#include <vector>

#include "connection.h"
#include "prefixd/client.h"

namespace prefixd {

using client_internal::AsChars;
using client_internal::BulkRead;
using client_internal::CheckLayer;
using client_internal::Decimal;
using client_internal::MovedFrom;

namespace {

// V.FETCH ... RANGE [FMT NATIVE] into `out`; the byte count, nullopt when the layer is empty.
Result<std::optional<size_t>> FetchRows(Client::Impl& c, std::string_view sid, uint32_t layer,
                                        uint64_t start, uint64_t end, bool native,
                                        std::span<uint8_t> out) {
  PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
  if (end <= start) {
    return Status::InvalidArgument("VFetchRange: end " + std::to_string(end) +
                                   " must exceed start " + std::to_string(start));
  }
  const Decimal layer_text(layer), start_text(start), end_text(end);
  std::vector<std::string_view> args{
      "V.FETCH", sid, layer_text.view(), "RANGE", start_text.view(), end_text.view()};
  if (native) args.insert(args.end(), {"FMT", "NATIVE"});
  PREFIXD_RETURN_IF_ERROR(c.Send(args));
  PREFIXD_ASSIGN_OR_RETURN(BulkRead read, c.reader().ReadBulkInto(out, "V.FETCH RANGE"));
  if (read.nil) return std::optional<size_t>();
  if (read.length > out.size()) {
    return Status::OutOfRange("V.FETCH RANGE returned " + std::to_string(read.length) +
                              " bytes; the buffer holds " + std::to_string(out.size()));
  }
  return std::optional<size_t>(static_cast<size_t>(read.length));
}

}  // namespace

Result<int64_t> Client::VCreate(std::string_view sid, uint32_t dim, std::string_view vquant) {
  if (!impl_) return MovedFrom();
  const Decimal dim_text(dim);
  std::vector<std::string_view> args{"V.CREATE", sid, dim_text.view()};
  if (!vquant.empty()) args.insert(args.end(), {"VQUANT", vquant});
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadInteger("V.CREATE");
}

Status Client::VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                           RowFormat format, std::span<const uint8_t> rows) {
  if (!impl_) return MovedFrom();
  PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
  if (count == 0) return Status::InvalidArgument("VStoreBatch needs at least one row");
  const std::string_view element_bytes = format == RowFormat::kF32 ? "4" : "2";
  if (rows.size() % (format == RowFormat::kF32 ? 4 : 2) != 0 || rows.size() % count != 0) {
    return Status::InvalidArgument("VStoreBatch: " + std::to_string(rows.size()) +
                                   " bytes are not " + std::to_string(count) + " rows of " +
                                   std::string(element_bytes) + "-byte values");
  }
  const Decimal layer_text(layer), start_text(start), count_text(count);
  std::vector<std::string_view> args{
      "V.STOREBATCH", sid, layer_text.view(), start_text.view(), count_text.view(), AsChars(rows)};
  if (format == RowFormat::kF16) args.insert(args.end(), {"FMT", "F16"});
  if (format == RowFormat::kBf16) args.insert(args.end(), {"FMT", "BF16"});
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("OK", "V.STOREBATCH");
}

Status Client::VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                           std::span<const float> rows) {
  return VStoreBatch(
      sid, layer, start, count, RowFormat::kF32,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(rows.data()), rows.size_bytes()));
}

Status Client::VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                           RowFormat format, std::span<const uint16_t> rows) {
  if (format == RowFormat::kF32) {
    return Status::InvalidArgument("VStoreBatch: 16-bit values need RowFormat kF16 or kBf16");
  }
  return VStoreBatch(
      sid, layer, start, count, format,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(rows.data()), rows.size_bytes()));
}

Result<std::optional<size_t>> Client::VFetchRange(std::string_view sid, uint32_t layer,
                                                  uint64_t start, uint64_t end,
                                                  std::span<float> out) {
  if (!impl_) return MovedFrom();
  std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(out.data()), out.size_bytes());
  PREFIXD_ASSIGN_OR_RETURN(std::optional<size_t> got,
                           FetchRows(*impl_, sid, layer, start, end, /*native=*/false, bytes));
  if (!got) return got;
  return std::optional<size_t>(*got / sizeof(float));
}

Result<std::optional<size_t>> Client::VFetchRangeNative(std::string_view sid, uint32_t layer,
                                                        uint64_t start, uint64_t end,
                                                        std::span<uint8_t> out) {
  if (!impl_) return MovedFrom();
  return FetchRows(*impl_, sid, layer, start, end, /*native=*/true, out);
}

Result<bool> Client::VDrop(std::string_view sid) {
  if (!impl_) return MovedFrom();
  const std::array<std::string_view, 2> args{"V.DROP", sid};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  PREFIXD_ASSIGN_OR_RETURN(int64_t n, impl_->reader().ReadInteger("V.DROP"));
  return n != 0;
}

}  // namespace prefixd
