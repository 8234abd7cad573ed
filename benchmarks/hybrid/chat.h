// `prefixd-hybrid chat`: conversation workloads over the server's prefix index
// (docs/prefix-index.md). Each turn matches its longest cached prefix (KV.PREFIX.MATCH), hydrates
// it from the lease, prefills only the rest, stores the new blocks and a checkpoint at the
// prompt's end, and is compared with a cold prefill of the whole prompt. One thread: the model's
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

  double speedup() const { return warm_ttft_ms > 0 ? cold_ttft_ms / warm_ttft_ms : 0; }
};

// Runs the workload; the namespace (derived from the model and weights, a hash tag: every call
// goes to its node) is emptied first.
Result<std::vector<ChatRow>> RunChatWorkload(Backend& backend, std::string_view weights_identity,
                                             PrefixdLink& link, const ChatOptions& options);

// The exit rule of --restore full: every turn after the first matched > 0 tokens (and, for an
// edited turn, no token past the edit), was bit-exact and agreed in every token. Empty when it
// holds, else why not.
std::string ChatVerdict(const std::vector<ChatRow>& rows);

// "turn,prompt_tokens,matched_tokens,prefilled_tokens,cold_ttft_ms,warm_ttft_ms,speedup,
// states_bitexact,token_agreement" and one line per turn.
std::string ChatCsv(const std::vector<ChatRow>& rows);
std::string ChatMarkdown(const std::vector<ChatRow>& rows, std::string_view title);

}  // namespace prefixd::hybrid
