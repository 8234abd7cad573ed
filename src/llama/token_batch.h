// TokenBatch: a llama_batch of one sequence's tokens, owned (freed with it), that decodes a range
// of a token array at their own positions. One thread at a time, like its llama_context.
#pragma once

#include <llama.h>

#include <cstdint>
#include <span>

#include "prefixd/status.h"

namespace prefixd::llama {

class TokenBatch {
 public:
  explicit TokenBatch(uint32_t capacity);
  ~TokenBatch();
  TokenBatch(const TokenBatch&) = delete;
  TokenBatch& operator=(const TokenBatch&) = delete;

  // Decodes tokens[from, to) (at most the capacity) into `seq` at positions from..to-1, with the
  // logits of the last token when `logits_last`.
  Status Decode(llama_context* ctx, llama_seq_id seq, std::span<const llama_token> tokens,
                uint64_t from, uint64_t to, bool logits_last);

 private:
  llama_batch batch_;
  uint32_t capacity_;
};

}  // namespace prefixd::llama
