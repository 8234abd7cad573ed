// prefixd-llama-run: runs a GGUF model through llama.cpp on the CPU for the tests of tests/llama:
// a prompt of token ids, its last-token logits (raw .f32), a greedy continuation and a check that
// the sequence state survives llama_state_seq_get_data -> clear -> llama_state_seq_set_data.
//
//   prefixd-llama-run --model F.gguf (--tokens 1,2,3 | --random-tokens N [--seed S])
//                     [--decode 32] [--threads 2] [--logits-out F.f32] [--json-out F.json]
//                     [--kv-type f16|f32] [--flash-attn on|off|auto] [--check-state] [--verbose]
//
// --kv-type is the attention K/V cache's type: f16 is llama.cpp's default, f32 keeps K and V
// as computed (for comparing the math with another implementation).
//
// The JSON: n_vocab, prompt_tokens, prefill_ms, decode_ms, logits_finite, greedy (the argmax
// after the prompt, then one token per step, `--decode` in all, as `prefixd-hybrid forward
// --decode-tokens` counts them) and, with --check-state, state_bytes and state_bitexact.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

struct Args {
  std::string model;
  std::vector<llama_token> tokens;
  int random_tokens = 0;
  uint64_t seed = 1;
  int decode = 32;
  int threads = 2;
  std::string logits_out;
  std::string json_out;
  bool check_state = false;
  bool kv_f32 = false;
  llama_flash_attn_type flash_attn = LLAMA_FLASH_ATTN_TYPE_AUTO;
  bool verbose = false;
};

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "prefixd-llama-run: %s\n", why.c_str());
  std::exit(1);
}

std::vector<llama_token> ParseTokens(const std::string& text) {
  std::vector<llama_token> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    char* rest = nullptr;
    const long v = std::strtol(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || v < 0) Die("bad token id '" + item + "'");
    out.push_back(static_cast<llama_token>(v));
    pos = end + 1;
  }
  return out;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--model") {
      a.model = value();
    } else if (flag == "--tokens") {
      a.tokens = ParseTokens(value());
    } else if (flag == "--random-tokens") {
      a.random_tokens = std::atoi(value().c_str());
    } else if (flag == "--seed") {
      a.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (flag == "--decode") {
      a.decode = std::atoi(value().c_str());
    } else if (flag == "--threads") {
      a.threads = std::atoi(value().c_str());
    } else if (flag == "--logits-out") {
      a.logits_out = value();
    } else if (flag == "--json-out") {
      a.json_out = value();
    } else if (flag == "--kv-type") {
      const std::string type = value();
      if (type != "f16" && type != "f32") Die("--kv-type f16 or f32");
      a.kv_f32 = type == "f32";
    } else if (flag == "--flash-attn") {
      const std::string mode = value();
      if (mode == "on") {
        a.flash_attn = LLAMA_FLASH_ATTN_TYPE_ENABLED;
      } else if (mode == "off") {
        a.flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
      } else if (mode != "auto") {
        Die("--flash-attn on, off or auto");
      }
    } else if (flag == "--check-state") {
      a.check_state = true;
    } else if (flag == "--verbose") {
      a.verbose = true;
    } else {
      Die("unknown flag " + flag + " (see the comment at the top of llama_run.cc)");
    }
  }
  if (a.model.empty()) Die("--model is required");
  if (a.tokens.empty() == (a.random_tokens <= 0)) Die("one of --tokens or --random-tokens");
  if (a.decode < 1 || a.threads < 1) Die("--decode and --threads must be positive");
  return a;
}

// splitmix64: the same prompt for the same seed on every platform.
std::vector<llama_token> RandomTokens(int n, int n_vocab, uint64_t seed) {
  std::vector<llama_token> out;
  uint64_t s = seed;
  for (int i = 0; i < n; ++i) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    out.push_back(static_cast<llama_token>((z ^ (z >> 31)) % static_cast<uint64_t>(n_vocab)));
  }
  return out;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Decodes `tokens` in batches of at most n_batch; the last token's logits are then readable.
void Decode(llama_context* ctx, std::vector<llama_token> tokens) {
  const size_t n_batch = llama_n_batch(ctx);
  for (size_t i = 0; i < tokens.size(); i += n_batch) {
    const int32_t n = static_cast<int32_t>(std::min(n_batch, tokens.size() - i));
    if (llama_decode(ctx, llama_batch_get_one(tokens.data() + i, n)) != 0) {
      Die("llama_decode failed at token " + std::to_string(i));
    }
  }
}

std::vector<float> LastLogits(llama_context* ctx, int n_vocab) {
  const float* logits = llama_get_logits_ith(ctx, -1);
  if (logits == nullptr) Die("no logits");
  return std::vector<float>(logits, logits + n_vocab);
}

llama_token Argmax(const std::vector<float>& logits) {
  return static_cast<llama_token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Saves the sequence, decodes `next`, clears the memory, restores and decodes `next` again: the
// two next-token logits must be bit-identical. Leaves the context after the restored decode.
bool StateRoundTrip(llama_context* ctx, llama_token next, int n_vocab, size_t* bytes) {
  std::vector<uint8_t> state(llama_state_seq_get_size(ctx, 0));
  *bytes = llama_state_seq_get_data(ctx, state.data(), state.size(), 0);
  if (*bytes == 0) Die("llama_state_seq_get_data returned nothing");
  Decode(ctx, {next});
  const std::vector<float> direct = LastLogits(ctx, n_vocab);
  llama_memory_clear(llama_get_memory(ctx), true);
  if (llama_state_seq_set_data(ctx, state.data(), *bytes, 0) != *bytes) {
    Die("llama_state_seq_set_data refused the state it wrote");
  }
  Decode(ctx, {next});
  const std::vector<float> restored = LastLogits(ctx, n_vocab);
  return std::memcmp(direct.data(), restored.data(), direct.size() * sizeof(float)) == 0;
}

void WriteFile(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    Die("cannot write " + path);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args = ParseArgs(argc, argv);
  if (!args.verbose) {
    llama_log_set(
        [](ggml_log_level level, const char* text, void*) {
          if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
        },
        nullptr);
  }
  // The prebuilt libraries carry one CPU backend per instruction set, loaded by path.
  ggml_backend_load_all_from_path(PREFIXD_LLAMA_LIB_DIR);
  llama_backend_init();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(args.model.c_str(), mp);
  if (model == nullptr) Die("cannot load " + args.model);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  if (args.tokens.empty()) args.tokens = RandomTokens(args.random_tokens, n_vocab, args.seed);
  for (llama_token t : args.tokens) {
    if (t >= n_vocab) Die("token " + std::to_string(t) + " >= n_vocab " + std::to_string(n_vocab));
  }

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(args.tokens.size() + args.decode + 16);
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_seq_max = 1;
  cp.n_threads = args.threads;
  cp.n_threads_batch = args.threads;
  cp.no_perf = true;
  cp.flash_attn_type = args.flash_attn;
  if (args.kv_f32) {
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) Die("cannot create a context");

  auto start = std::chrono::steady_clock::now();
  Decode(ctx, args.tokens);
  const std::vector<float> prompt_logits = LastLogits(ctx, n_vocab);
  const double prefill_ms = MsSince(start);
  const bool finite = std::all_of(prompt_logits.begin(), prompt_logits.end(),
                                  [](float v) { return std::isfinite(v); });

  std::vector<llama_token> greedy = {Argmax(prompt_logits)};
  size_t state_bytes = 0;
  bool state_bitexact = false;
  start = std::chrono::steady_clock::now();
  if (args.check_state) {
    state_bitexact = StateRoundTrip(ctx, greedy.back(), n_vocab, &state_bytes);
    if (args.decode > 1) greedy.push_back(Argmax(LastLogits(ctx, n_vocab)));
  }
  while (static_cast<int>(greedy.size()) < args.decode) {
    Decode(ctx, {greedy.back()});
    greedy.push_back(Argmax(LastLogits(ctx, n_vocab)));
  }
  const double decode_ms = MsSince(start);

  if (!args.logits_out.empty()) {
    WriteFile(args.logits_out, prompt_logits.data(), prompt_logits.size() * sizeof(float));
  }
  std::string json = "{\"n_vocab\": " + std::to_string(n_vocab) +
                     ", \"prompt_tokens\": " + std::to_string(args.tokens.size()) +
                     ", \"prefill_ms\": " + std::to_string(prefill_ms) +
                     ", \"decode_ms\": " + std::to_string(decode_ms) +
                     ", \"logits_finite\": " + (finite ? "true" : "false");
  if (args.check_state) {
    json += ", \"state_bytes\": " + std::to_string(state_bytes) +
            ", \"state_bitexact\": " + (state_bitexact ? "true" : "false");
  }
  json += ", \"greedy\": [";
  for (size_t i = 0; i < greedy.size(); ++i) {
    json += (i ? ", " : "") + std::to_string(greedy[i]);
  }
  json += "]}\n";
  if (args.json_out.empty()) {
    std::fputs(json.c_str(), stdout);
  } else {
    WriteFile(args.json_out, json.data(), json.size());
  }

  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
