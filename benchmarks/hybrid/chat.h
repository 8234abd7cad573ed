// `prefixd-hybrid chat`: conversation workloads over the server's prefix index
// (docs/prefix-index.md). Each turn matches its longest cached prefix (KV.PREFIX.MATCH), hydrates
// it from the lease, prefills only the rest, stores the new blocks and a checkpoint at the
// prompt's end, and is compared with a cold prefill of the whole prompt. Over a unix socket with
// the shared arenas open, the lease is read in place (ChatFetchPath). One thread: the model's
// own pool does the parallel work.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "model.h"
#include "prefixd/client.h"
#include "prefixd/status.h"
#include "prefixd_link.h"

namespace prefixd::hybrid {

struct ChatOptions {
  std::string workload = "multiturn";  // multiturn | fanout | branch
  std::string restore = "full";        // full | kv-only (the negative control)
  int turns = 4;
  uint32_t block = 64;      // tokens per block of the namespace
  int system_tokens = 256;  // the shared start of every prompt
  int message_tokens = 64;  // each turn's new message (fanout: its question)
  int reply_tokens = 8;     // greedy tokens per turn, compared with the cold run's
  uint64_t seed = 1;
  // Also run each prompt under exact-key lookup and under states kept only at multiples of
  // `align_block` (chat_baselines.h), and report them beside the prefix index.
  bool compare = false;
  uint32_t align_block = 528;
  int loopback_mb = 64;  // the blob fetched from the server to measure its bandwidth
};

struct ChatRow {
  int turn = 0;
  int64_t prompt_tokens = 0;
  int64_t matched_tokens = 0;
  int64_t prefilled_tokens = 0;
  double cold_ttft_ms = 0;
  double warm_ttft_ms = 0;
  bool states_bitexact = false;
  int agreeing_tokens = 0;
  int total_tokens = 0;
  int64_t edit_position = -1;  // branch: the edited token, which the match must not pass
  uint64_t fetched_bytes = 0;
  // Where the warm TTFT went: match, fetch and hydration, then the prefill of the unmatched
  // tokens (pauses to store checkpoints on the way are not counted in either, nor in the TTFT).
  double restore_ms = 0;
  double prefill_ms = 0;
  // The warm start's state after the prompt (DigestState, per layer) and its reply tokens: what
  // --json writes, so that runs over different transports can be compared with each other.
  std::vector<std::string> warm_digests;
  std::vector<int32_t> warm_tokens;

  // --compare: the same prompt under the alternatives. Exact key: the lookup is measured; on a
  // miss its TTFT is the lookup plus the cold prefill measured above (a miss is a cold prefill).
  // Aligned: measured end to end (match, hydrate, prefill the rest).
  bool compared = false;
  int64_t exact_matched_tokens = 0;
  double exact_lookup_ms = 0;
  double exact_ttft_ms = 0;
  int64_t aligned_matched_tokens = 0;
  uint64_t aligned_fetched_bytes = 0;
  double aligned_ttft_ms = 0;

  double speedup() const { return warm_ttft_ms > 0 ? cold_ttft_ms / warm_ttft_ms : 0; }
  // The TTFT bound's base: the fetched bytes at the measured bandwidth plus the prefill of the
  // unmatched tokens. The warm TTFT should be within 1.5x of it.
  double bound_ms(double gbps) const {
    return (gbps > 0 ? static_cast<double>(fetched_bytes) / (gbps * 1e6) : 0) + prefill_ms;
  }
  double bound_ratio(double gbps) const {
    const double bound = bound_ms(gbps);
    return bound > 0 ? warm_ttft_ms / bound : 0;
  }
};

// How the warm starts' rows and states came from the server. Over the unix socket with the shared
// arenas open (LinkTransport::kShm), each matched prefix is read with KV.PREFIX.SHMLFETCH (and,
// for --restore kv-only, its whole blocks with KV.PREFIX.SHMBFETCH): the pieces are copied from
// the server's arenas straight into the model's state, then their leases are released. A shared
// call the server refuses (the lease cap) is done again over the socket.
struct ChatFetchPath {
  std::string transport = "tcp";  // LinkTransportName: "unix" after a refused SHM.HELLO
  std::string shm_refused;        // SHM.HELLO's refusal, when it was refused
  uint64_t shared_calls = 0;      // KV.PREFIX.SHMLFETCH and SHMBFETCH answered
  uint64_t shared_bytes = 0;      // read in place from the arenas, under a lease
  uint64_t shared_views = 0;      // leased pieces
  uint64_t inline_bytes = 0;      // answered as bytes by a shared call (small pieces)
  uint64_t socket_fallbacks = 0;  // shared calls refused, done again over the socket
};

struct ChatReport {
  std::vector<ChatRow> rows;
  ChatFetchPath path;
  double server_gbps = 0;  // best of three fetches of options.loopback_mb MiB from the server
  ChatOptions options;
};

// Runs the workload; the namespace (derived from the model and weights, a hash tag: every call
// goes to its node) is emptied first.
Result<ChatReport> RunChatWorkload(Backend& backend, std::string_view weights_identity,
                                   PrefixdLink& link, const ChatOptions& options);

// The exit rule of --restore full: every turn after the first matched > 0 tokens (and, for an
// edited turn, no token past the edit), was bit-exact and agreed in every token. Empty when it
// holds, else why not.
std::string ChatVerdict(const std::vector<ChatRow>& rows);

// "turn,prompt_tokens,matched_tokens,prefilled_tokens,cold_ttft_ms,warm_ttft_ms,speedup,
// states_bitexact,token_agreement" and one line per turn.
std::string ChatCsv(const std::vector<ChatRow>& rows);
// One line: the path the fetches took and what came through it ("fetches via shm: ...").
std::string ChatPathLine(const ChatFetchPath& path);
// The turns' table, the fetch path, the TTFT bound per turn and, with --compare, the alternatives
// per turn and the prefill tokens each avoided in all.
std::string ChatMarkdown(const ChatReport& report, std::string_view title);
// --chart: per turn, the cold and warm TTFT as bars (linear ms), each turn labelled with its
// matched and prompt tokens. Self-contained SVG 1.1, as the sweep's chart.
std::string ChatSvgChart(const std::vector<ChatRow>& rows, std::string_view title);
// --compare-csv: "turn,prompt_tokens,index_matched,index_warm_ttft_ms,exact_matched,exact_ttft_ms,
// aligned_matched,aligned_ttft_ms,fetched_bytes,restore_ms,prefill_ms,bound_ms,bound_ratio,
// within_bound" and one line per turn.
std::string ChatCompareCsv(const ChatReport& report);

}  // namespace prefixd::hybrid
