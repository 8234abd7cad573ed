#include "engine/errors.h"

#include <string>
#include <string_view>

#include "common/ascii.h"

namespace prefixd::commands::errors {
namespace {

// Text as C's "%.*s" prints it: up to the first NUL.
std::string_view CString(std::string_view s) {
  auto nul = s.find('\0');
  return nul == std::string_view::npos ? s : s.substr(0, nul);
}

// prefixd's texts for an argument it quotes: "ERR invalid <what> <quoted>: <why>".
std::string InvalidQuoted(std::string_view what, std::string_view quoted, std::string_view why) {
  return "ERR invalid " + std::string(what) + " " + std::string(quoted) + ": " + std::string(why);
}

}  // namespace

std::string HelloSyntax(std::string_view option) {
  return "ERR Syntax error in HELLO option '" + std::string(option) + "'";
}
std::string UnrecognizedOption(std::string_view option) {
  return "ERR Unrecognized option '" + std::string(option) + "'";
}
std::string LibField(bool name) {
  return std::string("ERR ") + (name ? "lib-name" : "lib-ver") +
         " cannot contain spaces, newlines or special characters.";
}
std::string UnknownClientType(std::string_view type) {
  return "ERR Unknown client type '" + std::string(type) + "'";
}
std::string NoSuchUser(std::string_view user) {
  return "ERR No such user '" + std::string(user) + "'";
}
std::string ConfigSetUnknown(std::string_view name) {
  return "ERR Unknown option or number of arguments for CONFIG SET - '" + std::string(name) + "'";
}
std::string ConfigSetFailed(std::string_view name, std::string_view why) {
  return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - " +
         std::string(why);
}

std::string Because(std::string_view why) { return "ERR " + std::string(why); }
std::string WrongArity(std::string_view full_name) {
  return "ERR wrong number of arguments for '" + std::string(full_name) + "' command";
}

std::string UnknownCommand(const protocol::Request& request) {
  std::string args;
  for (size_t i = 1; i < request.size() && args.size() < 128; ++i) {
    std::string_view arg = CString(request[i]).substr(0, 128 - args.size());
    args += '\'';
    args += arg;
    args += "' ";
  }
  std::string_view name = CString(request[0]).substr(0, 128);
  return "ERR unknown command '" + std::string(name) + "', with args beginning with: " + args;
}

std::string UnknownSubcommand(std::string_view subcommand, std::string_view command) {
  return "ERR unknown subcommand '" + std::string(CString(subcommand).substr(0, 128)) + "'. Try " +
         AsciiUpper(command) + " HELP.";
}

std::string MigrateUnsupportedType(std::string_view command_upper, std::string_view type_name) {
  return "ERR " + std::string(command_upper) + " of a " + std::string(type_name) +
         " key is not supported (strings, sets, lists, hashes, sorted sets, streams and ssm-prefix "
         "sessions are)";
}
std::string UnbalancedStreams(std::string_view command_lower) {
  return "ERR Unbalanced '" + std::string(command_lower) +
         "' list of streams: for each stream key an ID or '$' must be specified.";
}
std::string NoGroup(std::string_view key, std::string_view group) {
  return "NOGROUP No such consumer group '" + std::string(group) + "' for key name '" +
         std::string(key) + "'";
}
std::string NoKeyOrGroup(std::string_view key, std::string_view group) {
  return "NOGROUP No such key '" + std::string(key) + "' or consumer group '" + std::string(group) +
         "'";
}
std::string NoKeyOrGroupInXReadGroup(std::string_view key, std::string_view group) {
  return NoKeyOrGroup(key, group) + " in XREADGROUP with GROUP option";
}
std::string InvalidMinIdle(std::string_view command) {
  return "ERR Invalid min-idle-time argument for " + std::string(command);
}
std::string InvalidXClaimArgument(std::string_view option) {
  return "ERR Invalid " + std::string(option) + " option argument for XCLAIM";
}
std::string UnrecognizedXClaimOption(std::string_view option) {
  return "ERR Unrecognized XCLAIM option '" + std::string(option) + "'";
}
std::string DebugUnknownSubcommand(std::string_view subcommand) {
  return "ERR unknown subcommand or wrong number of arguments for '" +
         std::string(subcommand.substr(0, 128)) + "'. Try DEBUG HELP.";
}
std::string Refused(bool out_of_memory, std::string_view what, std::string_view why) {
  return (out_of_memory ? "OOM " : "ERR ") + std::string(what) + " refused: " + std::string(why);
}
std::string TargetReplied(std::string_view target_error) {
  return "ERR Target instance replied with error: " + std::string(target_error);
}

std::string ExecAbortBecause(std::string_view error) {
  return "EXECABORT Transaction discarded because of: " + std::string(error);
}
std::string NotEnoughMemoryToRun(std::string_view command) {
  return "OOM not enough memory to run '" + std::string(command) + "'";
}
std::string InternalError(std::string_view command, std::string_view what) {
  return "ERR internal error running '" + std::string(command) + "': " + std::string(what);
}
std::string AofWriteFailed(std::string_view why) {
  return "MISCONF Errors writing to the AOF file: " + std::string(why);
}

std::string ReplconfIpTooLong(size_t bytes) {
  return "ERR REPLCONF ip-address provided by replica instance is too long: " +
         std::to_string(bytes) + " bytes";
}
std::string UnrecognizedReplconf(std::string_view option) {
  return "ERR Unrecognized REPLCONF option: " + std::string(option);
}

std::string StartSlotAfterEnd(int64_t first, int64_t last) {
  return "ERR start slot number " + std::to_string(first) + " is greater than end slot number " +
         std::to_string(last);
}
std::string SlotBusy(int slot) { return "ERR Slot " + std::to_string(slot) + " is already busy"; }
std::string SlotUnassigned(int slot) {
  return "ERR Slot " + std::to_string(slot) + " is already unassigned";
}
std::string SlotRepeated(int slot) {
  return "ERR Slot " + std::to_string(slot) + " specified multiple times";
}
std::string NotSlotOwner(int slot) {
  return "ERR I'm not the owner of hash slot " + std::to_string(slot);
}
std::string AlreadySlotOwner(int slot) {
  return "ERR I'm already the owner of hash slot " + std::to_string(slot);
}
std::string DontKnowNode(std::string_view node_id) {
  return "ERR I don't know about node " + std::string(node_id);
}
std::string UnknownNode(std::string_view node_id) {
  return "ERR Unknown node " + std::string(node_id);
}
std::string SlotHasKeys(int slot) {
  return "ERR Can't assign hashslot " + std::to_string(slot) +
         " to a different node while I still hold keys for this hash slot.";
}
std::string InvalidConfigEpoch(int64_t epoch) {
  return "ERR Invalid config epoch specified: " + std::to_string(epoch);
}
std::string ClusterConfigSave(std::string_view why) {
  return "ERR error saving the cluster node config: " + std::string(why);
}
std::string ClusterUnsupported(std::string_view subcommand_upper) {
  return "ERR CLUSTER " + std::string(subcommand_upper) +
         " is not supported: prefixd nodes have no cluster bus and no replicas; list every node in "
         "each node's nodes.conf (docs/cluster.md)";
}

std::string InvalidSid(std::string_view what, size_t most, size_t limit, size_t got) {
  return "ERR invalid " + std::string(what) + ": must be 1 to " + std::to_string(most) +
         " bytes (max-sid-len " + std::to_string(limit) + "), got " + std::to_string(got);
}
std::string SessionLimit(std::string_view command, uint64_t limit) {
  return "ERR " + std::string(command) + ": session limit reached (vstore-max-sessions " +
         std::to_string(limit) +
         "); drop sessions with V.DROP or KV.PREFIX.DROP, or raise the limit with CONFIG SET";
}
std::string UnknownTier(std::string_view command, std::string_view what, std::string_view shown,
                        bool pion_codec, std::string_view tier_names) {
  const std::string want = " (want " + std::string(tier_names) + ")";
  if (pion_codec) {
    return "ERR " + std::string(command) + ": " + std::string(what) + " '" + std::string(shown) +
           "' is a Pion codec prefixd does not implement" + want;
  }
  return "ERR " + std::string(command) + ": unknown " + std::string(what) + " '" +
         std::string(shown) + "'" + want;
}
std::string OutputLimit(std::string_view command, uint64_t reply_bytes, uint64_t limit,
                        std::string_view advice) {
  return "ERR " + std::string(command) + ": a reply of " + std::to_string(reply_bytes) +
         " bytes would exceed client-output-buffer-limit (" + std::to_string(limit) + "); " +
         std::string(advice);
}
std::string CommandFailed(std::string_view command, std::string_view why) {
  return "ERR " + std::string(command) + ": " + std::string(why);
}
std::string InvalidValueDim(uint64_t max_dim) {
  return "ERR invalid value_dim (must be 1-" + std::to_string(max_dim) + ")";
}
std::string InvalidVInteger(std::string_view name, std::string_view shown, uint64_t min,
                            uint64_t max) {
  return "ERR invalid layer_id/start_id/count: " + std::string(name) + " '" + std::string(shown) +
         "' must be an integer from " + std::to_string(min) + " to " + std::to_string(max);
}
std::string LayerOverMax(uint64_t layer, uint64_t max_layers) {
  return "ERR V.STOREBATCH: layer_id " + std::to_string(layer) + " exceeds vstore-max-layers (" +
         std::to_string(max_layers) + ": ids 0-" + std::to_string(max_layers - 1) + ")";
}
std::string EndOverMaxTokens(uint64_t end, uint64_t max_tokens) {
  return "ERR V.STOREBATCH: end " + std::to_string(end) +
         " (start + count) exceeds vstore-max-tokens (" + std::to_string(max_tokens) + ")";
}
std::string VBlobSize(size_t got, uint64_t expected, uint64_t count, uint64_t dim, size_t element,
                      std::string_view format) {
  return "ERR V.STOREBATCH: blob size " + std::to_string(got) + " != expected " +
         std::to_string(expected) + " (count " + std::to_string(count) + " x dim " +
         std::to_string(dim) + " x " + std::to_string(element) + " bytes " + std::string(format) +
         ")";
}
std::string VFetchUnknownOption(std::string_view shown) {
  return "ERR V.FETCH: unknown option '" + std::string(shown) + "' (expected FMT NATIVE)";
}
std::string RangeOverMaxTokens(uint64_t end, uint64_t max_tokens) {
  return "ERR invalid RANGE: end " + std::to_string(end) + " exceeds vstore-max-tokens (" +
         std::to_string(max_tokens) + ")";
}
std::string VFetchBatchLayerCount(std::string_view shown, uint64_t max_layers) {
  return "ERR V.FETCH BATCH: invalid layer count '" + std::string(shown) + "' (must be 1-" +
         std::to_string(max_layers) + ")";
}
std::string VFetchInvalidTokenId(std::string_view shown) {
  return "ERR V.FETCH: invalid token id '" + std::string(shown) + "'";
}
std::string VFetchTooManyIds(size_t most, size_t got) {
  return "ERR V.FETCH: at most " + std::to_string(most) + " ids per call (got " +
         std::to_string(got) + ")";
}
std::string InvalidPrefillMs(std::string_view command, std::string_view shown) {
  return "ERR " + std::string(command) + ": invalid PREFILL_MS '" + std::string(shown) +
         "' (milliseconds, 0 to 86400000)";
}
std::string KvNamespaceNeedsHashTag(std::string_view ns) {
  return "ERR KV.PREFIX.REGISTER: in cluster mode the namespace needs a hash tag, e.g. '{" +
         std::string(ns) + "}', so that its _pk and _pv sessions live on its node";
}
std::string KvInvalidKvDim(uint64_t max_dim) {
  return "ERR KV.PREFIX.REGISTER: invalid kv_dim (must be 1-" + std::to_string(max_dim) + ")";
}
std::string KvInvalidBlocks(uint64_t max_block_size, uint64_t max_blocks) {
  return "ERR KV.PREFIX.REGISTER: invalid BLOCKS (block size 1-" + std::to_string(max_block_size) +
         ", count 0-" + std::to_string(max_blocks) + ")";
}
std::string KvBlobSize(std::string_view what, size_t got, uint64_t n) {
  return "ERR " + std::string(what) + " blob size " + std::to_string(got) + " != expected " +
         std::to_string(n * 8) + " (" + std::to_string(n) + " x u64 little-endian)";
}
std::string KvUnknownOption(std::string_view command, std::string_view shown,
                            std::string_view expected) {
  return "ERR " + std::string(command) + ": unknown option '" + std::string(shown) +
         "' (expected " + std::string(expected) + ")";
}
std::string KvInvalidTokens(std::string_view shown) {
  return "ERR KV.PREFIX.LOOKUP: invalid TOKENS '" + std::string(shown) + "'";
}
std::string KvInvalidProbeCount(uint64_t max_blocks) {
  return "ERR KV.PREFIX.MEMBERSHIP: invalid probe count (0-" + std::to_string(max_blocks) + ")";
}
std::string NeedsAttentionEngine(std::string_view command_upper) {
  return "ERR " + std::string(command_upper) +
         " needs Pion's Metal attention engine, which prefixd does not have: fetch the K/V with "
         "V.FETCH <sid> <layer> RANGE <start> <end> and attend on the client";
}

std::string Quoted(std::string_view shown) { return "'" + std::string(shown.substr(0, 64)) + "'"; }
std::string NotInRange(std::string_view what, std::string_view quoted, uint64_t min, uint64_t max) {
  return InvalidQuoted(
      what, quoted,
      "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
}

std::string SidTooLong(size_t bytes, int64_t limit) {
  return "ERR invalid sid: " + std::to_string(bytes) + " bytes is longer than max-sid-len (" +
         std::to_string(limit) + ")";
}
std::string NotNonNegative(std::string_view what, std::string_view quoted) {
  return InvalidQuoted(what, quoted, "must be a non-negative integer");
}

std::string NoSuchLayers(std::string_view what, std::string_view quoted) {
  return InvalidQuoted(what, quoted, "the namespace has no such layers");
}
std::string ListSize(std::string_view what, uint64_t n, uint64_t item_bytes, size_t got) {
  return "ERR " + std::string(what) + " must be " + std::to_string(n) + " x " +
         std::to_string(item_bytes) + " = " + std::to_string(n * item_bytes) + " bytes, got " +
         std::to_string(got);
}
std::string NoSuchNamespace(std::string_view quoted) {
  return "ERR no such prefix namespace " + std::string(quoted);
}
std::string InvalidVquant(std::string_view quoted, std::string_view tier_names) {
  return InvalidQuoted("VQUANT", quoted, "expected " + std::string(tier_names));
}
std::string InvalidFmt(std::string_view quoted) {
  return InvalidQuoted("FMT", quoted, "expected F32, F16 or BF16");
}
std::string LayerRowsSize(uint64_t layer, uint64_t want, uint64_t rows, uint64_t kv_dim,
                          std::string_view format, size_t got) {
  return "ERR layer " + std::to_string(layer) + " rows: expected " + std::to_string(want) +
         " bytes (" + std::to_string(rows) + " rows of " + std::to_string(kv_dim) + " " +
         std::string(format) + "), got " + std::to_string(got);
}
std::string LayerFailed(uint64_t layer, std::string_view why) {
  return "ERR layer " + std::to_string(layer) + ": " + std::string(why);
}
std::string NamespaceMaxMemory(uint64_t incoming, uint64_t max_bytes) {
  return "OOM the write of " + std::to_string(incoming) +
         " bytes is larger than the namespace's MAXMEMORY " + std::to_string(max_bytes);
}
std::string LayersMissing(std::string_view what_needs, uint64_t want, std::string_view kind,
                          size_t got) {
  return "ERR " + std::string(what_needs) + " all " + std::to_string(want) + " " +
         std::string(kind) + " layers, got " + std::to_string(got);
}
std::string LeaseRange(uint64_t start, uint64_t stop, uint64_t length) {
  return "ERR RANGE [" + std::to_string(start) + ", " + std::to_string(stop) +
         ") is outside the lease's [0, " + std::to_string(length) + ")";
}

std::string ShmUidRefused(uint32_t uid) {
  return "ERR uid " + std::to_string(uid) + " may not map the shared arenas (shm-allow-uids)";
}

std::string ShmTooManyLeases(int64_t cap) {
  return "ERR this connection holds " + std::to_string(cap) +
         " SHM leases (shm-max-leases): SHM.RELEASE some first";
}

std::string ShmRowsDecoded(std::string_view command, std::string_view holder, std::string_view tier,
                           std::string_view socket_command) {
  return "ERR " + std::string(command) + " shares rows only as stored: this " +
         std::string(holder) + "'s " + std::string(tier) + " rows are decoded to fp32 (use " +
         std::string(socket_command) + ", or FMT NATIVE for fp16/bf16)";
}

std::string ShmNoDescriptor(std::string_view command) {
  return "ERR " + std::string(command) +
         " needs a file descriptor passed with the request (SCM_RIGHTS on its bytes)";
}

std::string ShmNotAFile(std::string_view command) {
  return "ERR " + std::string(command) +
         ": the passed descriptor is not a regular file (pass a memfd)";
}

std::string ShmPastEnd(std::string_view command, uint64_t offset, uint64_t length,
                       uint64_t file_size) {
  return "ERR " + std::string(command) + ": offset " + std::to_string(offset) + " + length " +
         std::to_string(length) + " is past the end of the passed file (" +
         std::to_string(file_size) + " bytes)";
}

std::string ShmReadFailed(std::string_view command, std::string_view why) {
  return "ERR " + std::string(command) + ": cannot read the passed file: " + std::string(why);
}

std::string ShmCallIndex(int64_t index, size_t last) {
  return "ERR SHM.CALL: argument index " + std::to_string(index) +
         " is not an argument of the carried command (1 to " + std::to_string(last) + ")";
}

std::string ShmCallRepeated(int64_t index) {
  return "ERR SHM.CALL: argument index " + std::to_string(index) + " is given twice";
}

std::string ShmCallTooLong(int64_t index, int64_t length, int64_t max) {
  return "ERR SHM.CALL: argument " + std::to_string(index) + "'s " + std::to_string(length) +
         " bytes exceed proto-max-bulk-len (" + std::to_string(max) + ")";
}

std::string ShmCallCannotCarry(std::string_view carrier, std::string_view carried) {
  return "ERR " + AsciiUpper(carrier) + " cannot carry " + AsciiUpper(carried) +
         ": it deals in passed descriptors itself";
}

std::string ShmCallKeyInFile(size_t index) {
  return "ERR argument " + std::to_string(index) +
         " of the carried command is a key that lies in the file SHM.CALL passes: COMMAND "
         "GETKEYS cannot read it";
}

}  // namespace prefixd::commands::errors
