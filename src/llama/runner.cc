#include "runner.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "ggml-backend.h"
#include "token_batch.h"

namespace prefixd::llama {
namespace {

// ggml's CPU backends are shared libraries beside libllama (one per CPU feature level); they are
// loaded once per process from where the build found llama.cpp.
void LoadBackendsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // llama.cpp narrates every tensor it loads; warnings and errors are what a run needs.
    // A continuation line (GGML_LOG_LEVEL_CONT) belongs to the line before it.
    llama_log_set(
        [](ggml_log_level level, const char* text, void*) {
          static thread_local ggml_log_level last = GGML_LOG_LEVEL_INFO;
          if (level != GGML_LOG_LEVEL_CONT) last = level;
          if (last == GGML_LOG_LEVEL_WARN || last == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
        },
        nullptr);
    ggml_backend_load_all_from_path(PREFIXD_LLAMA_LIB_DIR);
    llama_backend_init();
  });
}

Result<llama_flash_attn_type> FlashAttn(const std::string& text) {
  if (text == "auto") return LLAMA_FLASH_ATTN_TYPE_AUTO;
  if (text == "on") return LLAMA_FLASH_ATTN_TYPE_ENABLED;
  if (text == "off") return LLAMA_FLASH_ATTN_TYPE_DISABLED;
  return Status::InvalidArgument("flash attention is auto, on or off, not '" + text + "'");
}

}  // namespace

Result<std::unique_ptr<Runner>> Runner::Load(const RunnerOptions& options) {
  PREFIXD_RETURN_IF_ERROR(CheckLibraryRelease());
  PREFIXD_ASSIGN_OR_RETURN(llama_flash_attn_type flash, FlashAttn(options.flash_attn));
  LoadBackendsOnce();
  std::unique_ptr<Runner> r(new Runner());
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  r->model_ = llama_model_load_from_file(options.model_path.c_str(), mp);
  if (r->model_ == nullptr) {
    return Status::InvalidArgument("llama.cpp could not load " + options.model_path);
  }
  r->params_ = llama_context_default_params();
  r->params_.n_ctx = options.n_ctx;
  r->params_.n_batch = options.n_batch;
  r->params_.n_ubatch = options.n_batch;
  r->params_.n_seq_max = 1;
  r->params_.n_threads = options.threads;
  r->params_.n_threads_batch = options.threads;
  r->params_.flash_attn_type = flash;
  r->params_.no_perf = true;
  r->ctx_ = llama_init_from_model(r->model_, r->params_);
  if (r->ctx_ == nullptr) return Status::InvalidArgument("llama.cpp could not create a context");
  r->n_vocab_ = llama_vocab_n_tokens(llama_model_get_vocab(r->model_));
  return r;
}

Runner::~Runner() {
  if (ctx_ != nullptr) llama_free(ctx_);
  if (model_ != nullptr) llama_model_free(model_);
}

void Runner::Clear(llama_seq_id seq) {
  // One sequence per context: cleared whole, so that its cells start at the cache's first again.
  llama_memory_clear(llama_get_memory(ctx_), false);
  (void)seq;
}

Status Runner::Decode(llama_seq_id seq, std::span<const llama_token> tokens, uint64_t from,
                      uint64_t to) {
  TokenBatch batch(params_.n_batch);
  for (uint64_t at = from; at < to;) {
    const uint64_t end = std::min<uint64_t>(to, at + params_.n_batch);
    PREFIXD_RETURN_IF_ERROR(batch.Decode(ctx_, seq, tokens, at, end, end == to));
    at = end;
  }
  return Status::Ok();
}

std::span<const float> Runner::Logits() const {
  return {llama_get_logits_ith(ctx_, -1), static_cast<size_t>(n_vocab_)};
}

std::string Runner::LogitsDigest() const {
  const std::span<const float> logits = Logits();
  const XXH128_hash_t h = XXH3_128bits(logits.data(), logits.size_bytes());
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return text;
}

Result<std::vector<llama_token>> Runner::Greedy(llama_seq_id seq, uint64_t past, int n) {
  std::vector<llama_token> out;
  for (int i = 0; i < n; ++i) {
    const std::span<const float> logits = Logits();
    llama_token best =
        static_cast<llama_token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    if (i + 1 == n) break;
    llama_pos pos = static_cast<llama_pos>(past + static_cast<uint64_t>(i));
    int8_t want_logits = 1;
    llama_seq_id seq_id = seq;
    llama_seq_id* seq_ids = &seq_id;
    int32_t n_seq = 1;
    const llama_batch one{1, &best, nullptr, &pos, &n_seq, &seq_ids, &want_logits};
    if (const int32_t rc = llama_decode(ctx_, one); rc != 0) {
      return Status::Internal("llama_decode returned " + std::to_string(rc));
    }
  }
  return out;
}

std::vector<llama_token> RandomTokens(uint64_t seed, size_t n, int32_t vocab) {
  std::vector<llama_token> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < n; ++i) {
    // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    out[i] = static_cast<llama_token>(z % static_cast<uint64_t>(vocab));
  }
  return out;
}

}  // namespace prefixd::llama
