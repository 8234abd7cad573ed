// The two ways of reusing a prefix that `prefixd-hybrid chat --compare` measures the prefix index
// against, on the same prompts in the same run: (a) exact-key lookup as the sweep does it (one
// HybridPrefixCache entry per whole prompt), and (b) recurrent states kept only at fixed block
// boundaries (vLLM's mamba_cache_mode=align: 528 tokens for Qwen3.5-4B). The chat's turn loop
// calls these; it owns the thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config.h"
#include "model.h"
#include "prefix_cache.h"
#include "prefixd/status.h"
#include "prefixd_link.h"

namespace prefixd::hybrid {

// (b): the positions where the aligned policy keeps a recurrent state while prefilling from
// `from` to `to` tokens: each multiple of `align` in (from, to], the block boundaries that prefill
// passes or ends on. Nothing else ever gets a state, so its match is always a multiple of `align`.
std::vector<int64_t> AlignedCheckpoints(int64_t from, int64_t to, int64_t align);

// (a): today's exact-key client. After each turn it stores the state of the whole prompt under the
// prompt's hash (PrefixNamespace of all its tokens); a later prompt finds it only when it is the
// identical token sequence.
class ExactKeyBaseline {
 public:
  ExactKeyBaseline(const ModelConfig& config, std::string weights_identity);

  struct Lookup {
    bool hit = false;
    int64_t matched_tokens = 0;  // the whole prompt on a hit, else 0
    double ms = 0;               // the lookup round trips (and, on a hit, the fetch)
  };

  // Looks `prompt` up as the exact-key client would, through the real commands. `scratch` is
  // overwritten (hydrated on a hit, cleared on a miss).
  Result<Lookup> Find(PrefixdLink& link, std::span<const int32_t> prompt, SequenceState* scratch);
  // Stores `state`, the state after exactly `prompt`, under the prompt's key.
  Status Remember(PrefixdLink& link, std::span<const int32_t> prompt, const SequenceState& state);
  // Drops every entry Remember stored.
  Status ForgetAll(PrefixdLink& link);

 private:
  std::string Key(std::span<const int32_t> prompt) const;

  ModelConfig config_;
  std::string weights_identity_;
  HybridPrefixCache cache_;
  std::vector<std::string> stored_;
};

}  // namespace prefixd::hybrid
