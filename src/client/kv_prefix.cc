// prefixd::Client's KV.PREFIX.* family (REGISTER, LOOKUP, DROP): attention-K/V namespaces in
// Pion's commands, one exact prefix per namespace.
#include <array>
#include <string>
#include <vector>

#include "connection.h"
#include "prefixd/client.h"

namespace prefixd {

using client_internal::Decimal;
using client_internal::MillisText;
using client_internal::MovedFrom;

Status Client::KvPrefixRegister(std::string_view ns, uint32_t kv_dim, std::string_view vquant,
                                const KvPrefixOptions& options) {
  if (!impl_) return MovedFrom();
  if ((options.block_size == 0) != options.block_hashes.empty()) {
    return Status::InvalidArgument(
        "KvPrefixRegister: BLOCKS needs both a block size and the block hashes");
  }
  const Decimal dim_text(kv_dim), block_text(options.block_size),
      count_text(options.block_hashes.size());
  std::vector<std::string_view> args{"KV.PREFIX.REGISTER", ns, dim_text.view(), vquant};
  if (options.block_size != 0) {
    const std::string_view hashes(reinterpret_cast<const char*>(options.block_hashes.data()),
                                  options.block_hashes.size_bytes());
    args.insert(args.end(), {"BLOCKS", block_text.view(), count_text.view(), hashes});
  }
  std::string ms;
  if (options.prefill_ms) {
    ms = MillisText(*options.prefill_ms);
    args.insert(args.end(), {"PREFILL_MS", ms});
  }
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("OK", "KV.PREFIX.REGISTER");
}

Result<bool> Client::KvPrefixLookup(std::string_view ns, std::optional<uint64_t> tokens,
                                    std::optional<double> prefill_ms) {
  if (!impl_) return MovedFrom();
  const Decimal tokens_text(tokens.value_or(0));
  std::string ms;
  std::vector<std::string_view> args{"KV.PREFIX.LOOKUP", ns};
  if (tokens) args.insert(args.end(), {"TOKENS", tokens_text.view()});
  if (prefill_ms) {
    ms = MillisText(*prefill_ms);
    args.insert(args.end(), {"PREFILL_MS", ms});
  }
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  client_internal::ReplyReader& reader = impl_->reader();
  PREFIXD_ASSIGN_OR_RETURN(client_internal::ReplyHead head, reader.Head());
  if (head.type == '-') return Status::ServerError(std::string(head.text));
  if (head.type == '+' && head.text == "HIT") return true;
  if (head.type == '+' && head.text == "MISS") return false;
  return reader.Unexpected(head, "KV.PREFIX.LOOKUP", "+HIT or +MISS");
}

Result<int64_t> Client::KvPrefixDrop(std::span<const std::string_view> namespaces) {
  if (!impl_) return MovedFrom();
  if (namespaces.empty()) return Status::InvalidArgument("KvPrefixDrop needs a namespace");
  std::vector<std::string_view> args{"KV.PREFIX.DROP"};
  args.insert(args.end(), namespaces.begin(), namespaces.end());
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadInteger("KV.PREFIX.DROP");
}

}  // namespace prefixd
