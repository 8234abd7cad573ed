// Runner: one llama.cpp model and context on the CPU, as prefixd-llama drives them — loading,
// decoding token ranges in batches, greedy continuation, and a digest of the logits. Owns the
// model and the context; one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prefixd/llama.h"
#include "prefixd/status.h"

namespace prefixd::llama {

struct RunnerOptions {
  std::string model_path;
  uint32_t n_ctx = 4096;
  uint32_t n_batch = 512;
  int threads = 2;
  // "auto", "on" or "off" (llama.cpp's flash attention setting).
  std::string flash_attn = "auto";
};

class Runner {
 public:
  static Result<std::unique_ptr<Runner>> Load(const RunnerOptions& options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  llama_context* ctx() const { return ctx_; }
  const llama_context_params& params() const { return params_; }
  int32_t vocab() const { return n_vocab_; }
  uint32_t n_batch() const { return params_.n_batch; }

  // Empties the context (it holds one sequence), so that its cells start at the first again.
  void Clear(llama_seq_id seq);
  // Decodes tokens[from..to) at positions from.. into `seq`, in batches of at most n_batch,
  // with the logits of the last one.
  Status Decode(llama_seq_id seq, std::span<const llama_token> tokens, uint64_t from, uint64_t to);
  // The logits of the last decoded token.
  std::span<const float> Logits() const;
  // XXH3-128 of Logits()'s bytes, 32 hex digits.
  std::string LogitsDigest() const;
  // Greedy continuation: `n` tokens after the `past` tokens `seq` holds, each decoded.
  Result<std::vector<llama_token>> Greedy(llama_seq_id seq, uint64_t past, int n);

 private:
  Runner() = default;

  llama_model* model_ = nullptr;
  llama_context* ctx_ = nullptr;
  llama_context_params params_{};
  int32_t n_vocab_ = 0;
};

// Deterministic pseudo-random token ids in [0, vocab) (the synthetic models have no tokenizer).
std::vector<llama_token> RandomTokens(uint64_t seed, size_t n, int32_t vocab);

}  // namespace prefixd::llama
