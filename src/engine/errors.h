// Every error reply the engine and the command families send, worded exactly as Redis 7 words them
// where Redis has the same case (the parity tests and scripts/redis-suite.sh hold them); grouped by
// theme, prefixd's own texts last. Pure functions and constants, for any thread.
#pragma once

#include <string>
#include <string_view>

#include "protocol/request.h"

namespace prefixd::commands::errors {

inline constexpr std::string_view kSyntax = "ERR syntax error";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kNoAuth = "NOAUTH Authentication required.";
inline constexpr std::string_view kWrongPass =
    "WRONGPASS invalid username-password pair or user is disabled.";
inline constexpr std::string_view kInvalidCommandSpecified = "ERR Invalid command specified";
inline constexpr std::string_view kNoKeyArguments = "ERR The command has no key arguments";
inline constexpr std::string_view kInvalidArgumentCount =
    "ERR Invalid number of arguments specified for command";
inline constexpr std::string_view kInvalidArguments = "ERR Invalid arguments specified for command";
inline constexpr std::string_view kOom = "OOM command not allowed when used memory > 'maxmemory'.";

// Redis 7.0.15's reply to a client refused by protected mode, word for word (its typo included).
inline constexpr std::string_view kProtectedMode =
    "DENIED Redis is running in protected mode because protected mode is enabled and "
    "no password is set for the default user. In this mode connections are only "
    "accepted from the loopback interface. If you want to connect from external "
    "computers to Redis you may adopt one of the following solutions: 1) Just "
    "disable protected mode sending the command 'CONFIG SET protected-mode no' from "
    "the loopback interface by connecting to Redis from the same host the server is "
    "running, however MAKE SURE Redis is not publicly accessible from internet if "
    "you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively "
    "you can just disable the protected mode by editing the Redis configuration "
    "file, and setting the protected mode option to 'no', and then restarting the "
    "server. 3) If you started the server manually just for testing, restart it with "
    "the '--protected-mode no' option. 4) Setup a an authentication password for the "
    "default user. NOTE: You only need to do one of the above things in order for "
    "the server to start accepting connections from the outside.";
// CONFIG SET and DEBUG refused by enable-protected-configs / enable-debug-command.
inline constexpr std::string_view kDebugNotAllowed =
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you "
    "can run it from a local connection, otherwise you need to set this option in the "
    "configuration file, and then restart the server.";
// Connection and server commands.
inline constexpr std::string_view kProtocolVersionNotInteger =
    "ERR Protocol version is not an integer or out of range";
inline constexpr std::string_view kNoProto = "NOPROTO unsupported protocol version";
inline constexpr std::string_view kDbIndexOutOfRange = "ERR DB index is out of range";
inline constexpr std::string_view kDbIndexNotInt32 =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
inline constexpr std::string_view kClientName =
    "ERR Client names cannot contain spaces, newlines or special characters.";
inline constexpr std::string_view kInvalidClientId = "ERR Invalid client ID";
inline constexpr std::string_view kNoSuchClient = "ERR No such client";
inline constexpr std::string_view kClientIdNotPositive = "ERR client-id should be greater than 0";
inline constexpr std::string_view kNoShutdownInProgress = "ERR No shutdown in progress.";
inline constexpr std::string_view kShutdownFailed = "ERR Errors trying to SHUTDOWN. Check logs.";
inline constexpr std::string_view kBgsaveInProgress = "ERR Background save already in progress";
// Key commands.
inline constexpr std::string_view kWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr std::string_view kInvalidCursor = "ERR invalid cursor";
inline constexpr std::string_view kNotFloat = "ERR value is not a valid float";
inline constexpr std::string_view kLfuNotSelected =
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
    "that when switching between policies at runtime LRU and LFU data will take some time to "
    "adjust.";
inline constexpr std::string_view kLfuSelected =
    "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
    "switching between policies at runtime LRU and LFU data will take some time to adjust.";
// Cluster mode (Redis's cluster.c).
inline constexpr std::string_view kClusterDisabled =
    "ERR This instance has cluster support disabled";
inline constexpr std::string_view kCrossSlot =
    "CROSSSLOT Keys in request don't hash to the same slot";
inline constexpr std::string_view kTryAgain =
    "TRYAGAIN Multiple keys request during rehashing of slot";
inline constexpr std::string_view kClusterDown = "CLUSTERDOWN The cluster is down";
inline constexpr std::string_view kSlotNotServed = "CLUSTERDOWN Hash slot not served";
inline constexpr std::string_view kSelectInCluster = "ERR SELECT is not allowed in cluster mode";
inline constexpr std::string_view kInvalidSlot = "ERR Invalid or out of range slot";
inline constexpr std::string_view kInvalidSetslot =
    "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP";

// Numbers and ranges shared by several families.
inline constexpr std::string_view kOutOfRange = "ERR value is out of range";
inline constexpr std::string_view kNotPositive = "ERR value is out of range, must be positive";
inline constexpr std::string_view kCountOutOfRange =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
inline constexpr std::string_view kIncrOverflow = "ERR increment or decrement would overflow";
inline constexpr std::string_view kDecrOverflow = "ERR decrement would overflow";
inline constexpr std::string_view kIncrNaN = "ERR increment would produce NaN or Infinity";
inline constexpr std::string_view kNoSuchKey = "ERR no such key";
inline constexpr std::string_view kIndexOutOfRange = "ERR index out of range";
inline constexpr std::string_view kSameObject = "ERR source and destination objects are the same";
inline constexpr std::string_view kInvalidFirstDb = "ERR invalid first DB index";
inline constexpr std::string_view kInvalidSecondDb = "ERR invalid second DB index";
// Strings.
inline constexpr std::string_view kStringTooLong =
    "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
inline constexpr std::string_view kOffsetOutOfRange = "ERR offset is out of range";
inline constexpr std::string_view kBitOffset = "ERR bit offset is not an integer or out of range";
inline constexpr std::string_view kBitValue = "ERR bit is not an integer or out of range";
inline constexpr std::string_view kLcsNotStrings =
    "ERR The specified keys must contain string values";
inline constexpr std::string_view kLcsLenAndIdx =
    "ERR If you want both the length and indexes, please just use IDX.";
inline constexpr std::string_view kLcsTooLong = "ERR String too long for LCS";
inline constexpr std::string_view kLcsTooMuchMemory =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
// Hashes.
inline constexpr std::string_view kHashNotInteger = "ERR hash value is not an integer";
inline constexpr std::string_view kHashNotFloat = "ERR hash value is not a float";
inline constexpr std::string_view kNaNOrInfinity = "ERR value is NaN or Infinity";
// Sorted sets.
inline constexpr std::string_view kNotFloatRange = "ERR min or max is not a float";
inline constexpr std::string_view kNotLexRange = "ERR min or max not valid string range item";
inline constexpr std::string_view kNaNScore = "ERR resulting score is not a number (NaN)";
inline constexpr std::string_view kZaddIncrPairs =
    "ERR INCR option supports a single increment-element pair";
inline constexpr std::string_view kXxAndNx =
    "ERR XX and NX options at the same time are not compatible";
inline constexpr std::string_view kGtLtNx =
    "ERR GT, LT, and/or NX options at the same time are not compatible";
inline constexpr std::string_view kLimitNeedsByScoreOrLex =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
inline constexpr std::string_view kWithScoresByLex =
    "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
inline constexpr std::string_view kNumKeysNotPositive = "ERR numkeys should be greater than 0";
inline constexpr std::string_view kCountNotPositive = "ERR count should be greater than 0";
// Streams.
inline constexpr std::string_view kInvalidStreamId =
    "ERR Invalid stream ID specified as stream command argument";
inline constexpr std::string_view kXAddIdTooSmall =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
inline constexpr std::string_view kXAddIdZero =
    "ERR The ID specified in XADD must be greater than 0-0";
inline constexpr std::string_view kStreamIdExhausted =
    "ERR The stream has exhausted the last possible ID, unable to add more items";
inline constexpr std::string_view kMaxLenAndMinId =
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
inline constexpr std::string_view kMaxLenNegative = "ERR The MAXLEN argument must be >= 0.";
inline constexpr std::string_view kLimitNegative = "ERR The LIMIT argument must be >= 0.";
inline constexpr std::string_view kLimitWithoutApprox =
    "ERR syntax error, LIMIT cannot be used without the special ~ option";
inline constexpr std::string_view kInvalidStartId = "ERR invalid start ID for the interval";
inline constexpr std::string_view kInvalidEndId = "ERR invalid end ID for the interval";
inline constexpr std::string_view kEntriesAddedNegative = "ERR entries_added must be positive";
inline constexpr std::string_view kXSetIdBelowMaxDeleted =
    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
inline constexpr std::string_view kXSetIdBelowLength =
    "ERR The entries_added specified in XSETID is smaller than the target stream length";
inline constexpr std::string_view kXSetIdBelowTop =
    "ERR The ID specified in XSETID is smaller than the target stream top item";
inline constexpr std::string_view kXReadGreaterId =
    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> "
    "<consumer> option.";
inline constexpr std::string_view kTimeoutNotInteger =
    "ERR timeout is not an integer or out of range";
inline constexpr std::string_view kTimeoutNegative = "ERR timeout is negative";
inline constexpr std::string_view kMissingGroup = "ERR Missing GROUP option for XREADGROUP";
inline constexpr std::string_view kXGroupNeedsKey =
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to "
    "use the MKSTREAM option to create an empty stream automatically.";
inline constexpr std::string_view kEntriesReadNegative =
    "ERR value for ENTRIESREAD must be positive or -1";
inline constexpr std::string_view kBusyGroup = "BUSYGROUP Consumer Group name already exists";
inline constexpr std::string_view kXReadGroupDollarId =
    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of "
    "this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would "
    "just return an empty result set.";
inline constexpr std::string_view kXAutoClaimCount = "ERR COUNT must be > 0";
// DUMP, RESTORE, MIGRATE.
inline constexpr std::string_view kBadDumpPayload =
    "ERR DUMP payload version or checksum are wrong";
inline constexpr std::string_view kBadDataFormat = "ERR Bad data format";
inline constexpr std::string_view kBusyKey = "BUSYKEY Target key name already exists.";
inline constexpr std::string_view kIdleTimeNegative = "ERR Invalid IDLETIME value, must be >= 0";
inline constexpr std::string_view kFreqOutOfRange =
    "ERR Invalid FREQ value, must be >= 0 and <= 255";
inline constexpr std::string_view kTtlNegative = "ERR Invalid TTL value, must be >= 0";
inline constexpr std::string_view kMigrateKeysNeedsEmptyKey =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
inline constexpr std::string_view kMigrateConnecting =
    "IOERR error or timeout connecting to the client";
inline constexpr std::string_view kMigrateWriting =
    "IOERR error or timeout writing to target instance";
inline constexpr std::string_view kMigrateReading =
    "IOERR error or timeout reading to target instance";
// Transactions and the dispatcher.
inline constexpr std::string_view kNestedMulti = "ERR MULTI calls can not be nested";
inline constexpr std::string_view kExecWithoutMulti = "ERR EXEC without MULTI";
inline constexpr std::string_view kExecAbort =
    "EXECABORT Transaction discarded because of previous errors.";
inline constexpr std::string_view kDiscardWithoutMulti = "ERR DISCARD without MULTI";
inline constexpr std::string_view kWatchInMulti = "ERR WATCH inside MULTI is not allowed";
inline constexpr std::string_view kNotAllowedInMulti =
    "ERR Command not allowed inside a transaction";
inline constexpr std::string_view kMaxClients = "ERR max number of clients reached";
inline constexpr std::string_view kMonitorDenyBlocking =
    "ERR MONITOR isn't allowed for DENY BLOCKING client";
inline constexpr std::string_view kHelloNoAuth =
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
    "AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
    "protocol version at the same time";
inline constexpr std::string_view kAuthWithoutPassword =
    "ERR AUTH <password> called without any password configured for the default user. Are you "
    "sure your configuration is correct?";
// Replication.
inline constexpr std::string_view kSyncWithPendingOutput =
    "ERR SYNC and PSYNC are invalid with pending output";
inline constexpr std::string_view kConnectionClosing = "ERR the connection is closing";
inline constexpr std::string_view kReplicaOfInCluster =
    "ERR REPLICAOF not allowed in cluster mode.";
inline constexpr std::string_view kPrimaryOnly =
    "ERR prefixd does not replicate from another server: it is a primary only (REPLICAOF NO ONE "
    "is accepted; see docs/replication.md)";
// Cluster commands (Redis's cluster.c).
inline constexpr std::string_view kInvalidSlotShort = "ERR Invalid slot";
inline constexpr std::string_view kInvalidSlotOrCount = "ERR Invalid slot or number of keys";
inline constexpr std::string_view kFlushSlotsNotEmpty =
    "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.";
inline constexpr std::string_view kEpochWithOtherNodes =
    "ERR The user can assign a config epoch only when the node does not know any other node.";
inline constexpr std::string_view kEpochAlreadySet = "ERR Node config epoch is already non-zero";
inline constexpr std::string_view kForgetMyself = "ERR I tried hard but I can't forget myself...";
inline constexpr std::string_view kResetWithKeys =
    "ERR CLUSTER RESET can't be called with master nodes containing keys";

std::string HelloSyntax(std::string_view option);
std::string UnrecognizedOption(std::string_view option);
std::string LibField(bool name);  // CLIENT SETINFO's text for a bad lib-name / lib-ver
std::string UnknownClientType(std::string_view type);
std::string NoSuchUser(std::string_view user);
std::string ConfigSetUnknown(std::string_view name);
std::string ConfigSetFailed(std::string_view name, std::string_view why);

// "ERR <why>", `why` a lower layer's reason (a failed save, a refused record, a shape check).
std::string Because(std::string_view why);
std::string WrongArity(std::string_view full_name);
std::string UnknownCommand(const protocol::Request& request);
std::string UnknownSubcommand(std::string_view subcommand, std::string_view command);

// Strings, streams, keys.
std::string MigrateUnsupportedType(std::string_view command_upper, std::string_view type_name);
std::string UnbalancedStreams(std::string_view command_lower);
std::string NoGroup(std::string_view key, std::string_view group);
std::string NoKeyOrGroup(std::string_view key, std::string_view group);
std::string NoKeyOrGroupInXReadGroup(std::string_view key, std::string_view group);
std::string InvalidMinIdle(std::string_view command);
std::string InvalidXClaimArgument(std::string_view option);
std::string UnrecognizedXClaimOption(std::string_view option);
std::string DebugUnknownSubcommand(std::string_view subcommand);
// A refused write (a memory verdict): "OOM|ERR <what> refused: <why>".
std::string Refused(bool out_of_memory, std::string_view what, std::string_view why);
std::string TargetReplied(std::string_view target_error);
// Dispatcher.
std::string ExecAbortBecause(std::string_view error);
std::string NotEnoughMemoryToRun(std::string_view command);
std::string InternalError(std::string_view command, std::string_view what);
std::string AofWriteFailed(std::string_view why);
// Replication.
std::string ReplconfIpTooLong(size_t bytes);
std::string UnrecognizedReplconf(std::string_view option);
// Cluster.
std::string StartSlotAfterEnd(int64_t first, int64_t last);
std::string SlotBusy(int slot);
std::string SlotUnassigned(int slot);
std::string SlotRepeated(int slot);
std::string NotSlotOwner(int slot);
std::string AlreadySlotOwner(int slot);
std::string DontKnowNode(std::string_view node_id);
std::string UnknownNode(std::string_view node_id);
std::string SlotHasKeys(int slot);
std::string InvalidConfigEpoch(int64_t epoch);
std::string ClusterConfigSave(std::string_view why);
std::string ClusterUnsupported(std::string_view subcommand_upper);

// ---- prefixd's own commands and limits ----------------------------------------------------------
// XREAD's and XREADGROUP's BLOCK when it would wait.
inline constexpr std::string_view kBlockUnsupported =
    "ERR BLOCK is not supported by this server: it answers at once when data is there and "
    "refuses to wait for new entries";
// Persistence: SAVE and BGSAVE without a log (a failed save is Because's).
inline constexpr std::string_view kPersistenceOff =
    "ERR persistence is off (appendonly no): there is nothing to save to";
// V.* and KV.PREFIX.* (commands/vstore_shared.h, vstore_commands.cc, kvprefix_commands.cc).
inline constexpr std::string_view kSessionNotFound = "ERR session not found";
inline constexpr std::string_view kBadVRange = "ERR invalid RANGE: end must exceed start (>=0)";
inline constexpr std::string_view kVCreateSchema =
    "ERR V.CREATE: SCHEMA (per-layer formats) is not supported by prefixd; create one session per "
    "format";
inline constexpr std::string_view kVStoreBatchOption =
    "ERR V.STOREBATCH: unknown option (expected FMT F16|BF16|F32)";
inline constexpr std::string_view kVStoreBatchReshaped =
    "ERR V.STOREBATCH: the session was dropped and created again with another shape while this "
    "batch was being stored; send it again";
inline constexpr std::string_view kVFetchBatchEmpty =
    "ERR V.FETCH BATCH: session has no stored layers";
inline constexpr std::string_view kVFetchNativeById =
    "ERR V.FETCH: FMT NATIVE applies to RANGE and BATCH only (rows by id are always fp32)";
inline constexpr std::string_view kKvSaveNoPath =
    "ERR KV.PREFIX.SAVE: prefixd snapshots into its data directory (dir); a path is not accepted";
inline constexpr std::string_view kKvSavePersistenceOff =
    "ERR KV.PREFIX.SAVE: persistence is off (appendonly no)";
inline constexpr std::string_view kKvCommitPersistenceOff =
    "ERR KV.PREFIX.COMMIT: persistence is off (appendonly no): nothing can be made durable";
std::string InvalidSid(std::string_view what, size_t most, size_t limit, size_t got);
std::string SessionLimit(std::string_view command, uint64_t limit);
// An unknown tier name; Pion's rotation codecs (`pion_codec`) get a pointed one.
std::string UnknownTier(std::string_view command, std::string_view what, std::string_view shown,
                        bool pion_codec, std::string_view tier_names);
std::string OutputLimit(std::string_view command, uint64_t reply_bytes, uint64_t limit,
                        std::string_view advice);
// "ERR <command>: <why>", `why` a lower layer's reason.
std::string CommandFailed(std::string_view command, std::string_view why);
std::string InvalidValueDim(uint64_t max_dim);
std::string InvalidVInteger(std::string_view name, std::string_view shown, uint64_t min,
                            uint64_t max);
std::string LayerOverMax(uint64_t layer, uint64_t max_layers);
std::string EndOverMaxTokens(uint64_t end, uint64_t max_tokens);
std::string VBlobSize(size_t got, uint64_t expected, uint64_t count, uint64_t dim, size_t element,
                      std::string_view format);
std::string VFetchUnknownOption(std::string_view shown);
std::string RangeOverMaxTokens(uint64_t end, uint64_t max_tokens);
std::string VFetchBatchLayerCount(std::string_view shown, uint64_t max_layers);
std::string VFetchInvalidTokenId(std::string_view shown);
std::string VFetchTooManyIds(size_t most, size_t got);
std::string InvalidPrefillMs(std::string_view command, std::string_view shown);
std::string KvNamespaceNeedsHashTag(std::string_view ns);
std::string KvInvalidKvDim(uint64_t max_dim);
std::string KvInvalidBlocks(uint64_t max_block_size, uint64_t max_blocks);
// `what`: "KV.PREFIX.REGISTER: BLOCKS" or "KV.PREFIX.MEMBERSHIP:".
std::string KvBlobSize(std::string_view what, size_t got, uint64_t n);
std::string KvUnknownOption(std::string_view command, std::string_view shown,
                            std::string_view expected);
std::string KvInvalidTokens(std::string_view shown);
std::string KvInvalidProbeCount(uint64_t max_blocks);
std::string NeedsAttentionEngine(std::string_view command_upper);
// An argument as the texts below quote it (`quoted`): its first 64 bytes in single quotes.
std::string Quoted(std::string_view shown);
// "ERR invalid <what> <quoted>: must be an integer from <min> to <max>" (an SSM layer, a V.FETCH
// layer_id, a KV.PREFIX count).
std::string NotInRange(std::string_view what, std::string_view quoted, uint64_t min, uint64_t max);
// SSM.PREFIX.* (ssm_commands.cc).
std::string SidTooLong(size_t bytes, int64_t limit);
std::string NotNonNegative(std::string_view what, std::string_view quoted);
// The prefix index's KV.PREFIX.* (prefix_index_commands.cc).
inline constexpr std::string_view kNamespaceNeedsShape =
    "ERR KV.PREFIX.NAMESPACE needs BLOCK, ATTN, KVDIM and RECURRENT";
inline constexpr std::string_view kNoLayers = "ERR ATTN and RECURRENT are both 0";
inline constexpr std::string_view kRootHash = "ERR a block hash of 16 zero bytes is the root's";
inline constexpr std::string_view kWindowCrossesBlock =
    "ERR the window crosses a block boundary (store the block first and split the window)";
inline constexpr std::string_view kTailAtBoundary =
    "ERR TAIL at a block boundary: the position has no partial block";
inline constexpr std::string_view kBoundaryIsAnchor =
    "ERR at a block boundary the position is the anchor's hash";
inline constexpr std::string_view kTooManyLeases =
    "BUSY too many prefix leases, release some or retry";
inline constexpr std::string_view kNoLease = "ERR unknown or expired prefix lease";
std::string NoSuchLayers(std::string_view what, std::string_view quoted);
// "ERR <what> must be <n> x <item_bytes> = <n * item_bytes> bytes, got <got>": a list of hashes
// (16 bytes each) or of AT positions (8).
std::string ListSize(std::string_view what, uint64_t n, uint64_t item_bytes, size_t got);
std::string NoSuchNamespace(std::string_view quoted);
std::string InvalidVquant(std::string_view quoted, std::string_view tier_names);
std::string InvalidFmt(std::string_view quoted);
std::string LayerRowsSize(uint64_t layer, uint64_t want, uint64_t rows, uint64_t kv_dim,
                          std::string_view format, size_t got);
std::string LayerFailed(uint64_t layer, std::string_view why);
std::string NamespaceMaxMemory(uint64_t incoming, uint64_t max_bytes);
// `what_needs`: "blocks need", "a checkpoint needs", ...; `kind`: "attention" or "recurrent".
std::string LayersMissing(std::string_view what_needs, uint64_t want, std::string_view kind,
                          size_t got);
std::string LeaseRange(uint64_t start, uint64_t stop, uint64_t length);

// Same-host transport (commands/shm_commands.cc).
inline constexpr std::string_view kShmUnixOnly =
    "ERR SHM commands are served on the unix socket only";
inline constexpr std::string_view kShmArenasOff =
    "ERR shared arenas are off (start the server with --shm-arenas yes)";
inline constexpr std::string_view kShmHelloFirst = "ERR send SHM.HELLO first";
inline constexpr std::string_view kShmNoPeerCredentials =
    "ERR cannot read the peer's credentials (SO_PEERCRED)";
inline constexpr std::string_view kShmNoDescriptors =
    "ERR cannot duplicate an arena descriptor (open-files limit?)";
std::string ShmUidRefused(uint32_t uid);
std::string ShmTooManyLeases(int64_t cap);
// `command` (V.SHMFETCH) refuses rows of a decoded `tier` of a `holder` (session, namespace),
// naming `socket_command` (V.FETCH) as the way to them.
std::string ShmRowsDecoded(std::string_view command, std::string_view holder, std::string_view tier,
                           std::string_view socket_command);
// Zero-copy writes: `command` (SHM.SET, SHM.CALL) reads the file passed with its request.
std::string ShmNoDescriptor(std::string_view command);
std::string ShmNotAFile(std::string_view command);
std::string ShmPastEnd(std::string_view command, uint64_t offset, uint64_t length,
                       uint64_t file_size);
std::string ShmReadFailed(std::string_view command, std::string_view why);
// SHM.CALL.
inline constexpr std::string_view kShmCallCount =
    "ERR SHM.CALL: the count of file arguments must be a positive integer";
// Argument `index` of the carried command, of `last` (its last index).
std::string ShmCallIndex(int64_t index, size_t last);
std::string ShmCallRepeated(int64_t index);
std::string ShmCallTooLong(int64_t index, int64_t length, int64_t max);
std::string ShmCallCannotCarry(std::string_view carrier, std::string_view carried);
// COMMAND GETKEYS of SHM.CALL: argument `index` of the carried command is a key from the file.
std::string ShmCallKeyInFile(size_t index);

}  // namespace prefixd::commands::errors
