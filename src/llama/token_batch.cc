#include "token_batch.h"

#include <string>

namespace prefixd::llama {

TokenBatch::TokenBatch(uint32_t capacity)
    : batch_(llama_batch_init(static_cast<int32_t>(capacity), 0, 1)), capacity_(capacity) {}

TokenBatch::~TokenBatch() { llama_batch_free(batch_); }

Status TokenBatch::Decode(llama_context* ctx, llama_seq_id seq, std::span<const llama_token> tokens,
                          uint64_t from, uint64_t to, bool logits_last) {
  if (to < from || to - from > capacity_ || to > tokens.size()) {
    return Status::InvalidArgument("a batch of tokens [" + std::to_string(from) + ", " +
                                   std::to_string(to) + ") in one of " + std::to_string(capacity_));
  }
  batch_.n_tokens = 0;
  for (uint64_t p = from; p < to; ++p) {
    const int32_t i = batch_.n_tokens++;
    batch_.token[i] = tokens[p];
    batch_.pos[i] = static_cast<llama_pos>(p);
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = seq;
    batch_.logits[i] = logits_last && p + 1 == to;
  }
  if (const int32_t rc = llama_decode(ctx, batch_); rc != 0) {
    return Status::Internal("llama_decode returned " + std::to_string(rc));
  }
  return Status::Ok();
}

}  // namespace prefixd::llama
