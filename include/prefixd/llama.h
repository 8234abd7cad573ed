// prefixd::llama::PromptCache: a persistent, shared prompt cache for programs built on llama.cpp,
// over prefixd's prefix index (docs/prefix-index.md). It is called in two places: Restore before
// a prompt is prefilled (how many of its tokens need no prefill), and Save (or Prefill, which
// saves as it goes) after. One PromptCache serves one llama_context and is used from the thread
// that drives that context, like the context itself.
//
// What is stored, per model identity (a namespace, ModelIdentity below):
//   - the attention K/V of every full block of `block_size` tokens, once, shared by every prompt
//     whose tokens up to the block's end are equal (a chained 128-bit hash names the block);
//   - checkpoints: the recurrent state of every Mamba / Gated DeltaNet / RWKV layer at a position
//     L, with the K/V of the partial block before L. A hybrid or recurrent model resumes from L
//     only with both, and the server answers only such L.
// llama.cpp's sequence state (llama_state_seq_get_data) is parsed into those parts and assembled
// back (docs/llama.md has the format of the pinned release); a format it does not know is refused.
//
// Failure is never worse than a cold prefill: a server that is down, slow or full, a damaged or
// foreign value, a lost lease, a state llama.cpp refuses to load — Restore returns 0 with the
// sequence empty, and Save stores nothing or only complete parts. Each kind of failure is logged
// once (to stderr, or the log callback), then counted in stats().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <llama.h>  // llama.cpp's, not this file
#include "prefixd/client.h"
#include "prefixd/status.h"

namespace prefixd::llama {

// Where to save recurrent checkpoints during Prefill, and how the cache talks to the server.
struct CacheOptions {
  // Tokens per K/V block (the prefix index's BLOCK), 1..512, and Prefill's chunk (the context's
  // n_batch and n_ubatch must hold one). Smaller blocks share more of a prompt with its
  // neighbours and cost more hashes, index records and smaller batches.
  uint32_t block_size = 256;
  // Prefill saves a recurrent checkpoint at every multiple of this many tokens (rounded to a
  // multiple of block_size) and at the end of the prompt; 0: only at the end. A checkpoint of a
  // hybrid model holds every recurrent layer's state (Qwen3.5-0.8B: ~19 MB), so the interval
  // trades memory in the server against tokens prefilled again after a partial match.
  // A pure transformer needs none: every stored block boundary is a restorable prefix by itself.
  uint32_t checkpoint_interval = 1024;
  // Decoded saves a checkpoint (and the blocks it completes) every this many tokens of a
  // sequence; 0: never.
  uint32_t decode_interval = 256;
  // Restore leaves at least this many tokens of the prompt to decode, so that llama_decode
  // produces the logits of its last token (llama.cpp decodes nothing without a token).
  uint32_t keep_last = 1;
  // The match's lease: how long the server pins the matched state for the fetch.
  uint32_t lease_ms = 30000;
  // With a Client on a unix socket (Client::ConnectUnix), restores read the matched prefix
  // through the server's shared arenas (KV.PREFIX.SHMLFETCH, docs/shm-transport.md): a second
  // connection beside the client maps the server's memory read-only and the rows are copied
  // straight from it into llama.cpp's state, not through the socket. The same bytes either way.
  // Saves write their rows and state blobs into a memfd the server maps instead of sending them
  // over the socket (SHM.CALL, docs/shm-transport.md, "Writes of any command"); the server
  // stores the same bytes either way. Over TCP, or when the server refuses (shm-arenas off,
  // this uid not in shm-allow-uids, an older server), restores and saves use the socket, as
  // with false; a refusal is logged once.
  bool shared_memory = true;
  // Prefix of the namespace name; the rest is the identity's digest. Braces make it one Redis
  // Cluster hash tag.
  std::string namespace_prefix = "llama";
  // V-store tier of the K/V blocks: empty means "the cache's own type" (f16 → fp16, bf16 →
  // bf16, f32 → fp32), the only lossless choice and the one that keeps restores bit-exact.
  std::string vquant;
  // Where failures are reported (once per kind); default: stderr with a "prefixd-llama: " prefix.
  std::function<void(std::string_view)> log;
};

// What makes two contexts' states interchangeable. Two contexts share cached state exactly when
// their identities are equal; the digest names the namespace.
struct ModelIdentity {
  std::string model;        // XXH3-128 of the GGUF file (or a caller's own model identity)
  std::string build;        // the llama.cpp release: ggml version and commit of the libraries
  std::string cache_types;  // type_k, type_v and flash attention, as configured
  std::string digest;       // XXH3-128 of the three, 32 hex digits

  // "{<prefix>:<digest>:<block size>[:<tier>]}": states of one identity stored with another block
  // size or tier are another namespace (a prefix index has one shape).
  std::string Namespace(std::string_view prefix, uint32_t block_size,
                        std::string_view vquant = {}) const;
};

// The model's part of the identity: XXH3-128 of the GGUF file's bytes (tensors and metadata),
// as 32 hex digits. Reads the whole file once (mmap): ~0.1 s per GB from the page cache.
Result<std::string> HashModelFile(const std::string& gguf_path);

// The whole identity of a context created from `model_hash` (HashModelFile, or the caller's own
// stable name for the weights) with `params`.
ModelIdentity IdentityFor(std::string_view model_hash, const llama_context_params& params);

// Checks that the llama.cpp library loaded at run time is the release prefixd was built against
// (cmake/Llama.cmake compiles its ggml version and commit in). kInvalidArgument otherwise.
Status CheckLibraryRelease();

struct RestoreReport {
  uint64_t restored = 0;        // tokens whose state was loaded (0: cold)
  uint64_t matched_blocks = 0;  // of the prompt's full blocks, how many the server holds
  uint64_t bytes = 0;           // state bytes fetched
  double match_ms = 0;          // both KV.PREFIX.MATCH round trips
  double fetch_ms = 0;          // the leased fetches
  double assemble_ms = 0;       // llama.cpp's sequence state built from the parts
  double load_ms = 0;           // llama_state_seq_set_data_ext
  std::string miss_reason;      // why restored is 0 or short of the prompt, when known
  bool shared_memory = false;   // the fetch read through the server's shared arenas
  uint64_t mapped_bytes = 0;    // of those, bytes copied out of the mapping (the rest: replies)
};

struct SaveReport {
  uint64_t blocks_stored = 0;       // new blocks (the server already held the others)
  uint64_t checkpoints_stored = 0;  // new checkpoints
  uint64_t block_bytes = 0;         // K/V of new blocks sent
  uint64_t tail_bytes = 0;          // K/V of checkpoints' partial blocks sent
  uint64_t state_bytes = 0;         // recurrent-state bytes sent
  bool shared_memory = false;       // a store went through a memfd (SHM.CALL), not the socket
  double ms = 0;
};

struct CacheStats {
  uint64_t restores = 0, restore_hits = 0, restored_tokens = 0;
  uint64_t saves = 0, blocks_stored = 0, checkpoints_stored = 0;
  uint64_t failures = 0;  // every fallback to cold, and every save that stored nothing
  uint64_t shm_restores =
      0;                   // hits fetched through the shared arenas (CacheOptions::shared_memory)
  uint64_t shm_saves = 0;  // saves whose stores went through a memfd (SHM.CALL)
};

class PromptCache {
 public:
  // `ctx` is borrowed and must outlive the cache; `params` are those it was created with
  // (llama.cpp does not report them back). The client is the cache's own connection.
  static Result<PromptCache> Open(llama_context* ctx, const llama_context_params& params,
                                  Client client, const ModelIdentity& identity,
                                  CacheOptions options = {});

  PromptCache(PromptCache&&) noexcept;
  PromptCache& operator=(PromptCache&&) noexcept;
  ~PromptCache();

  // Loads into `seq` (emptied first) the longest stored prefix of `tokens` whose every layer can
  // be restored, leaving at least keep_last tokens. Returns how many tokens need no prefill: the
  // caller decodes tokens[restored..] at positions restored... 0 means cold (the sequence is then
  // empty).
  uint64_t Restore(llama_seq_id seq, std::span<const llama_token> tokens,
                   RestoreReport* report = nullptr);

  // Stores what the server lacks of the state `seq` holds now, which must be exactly `tokens` at
  // positions 0..n-1: the K/V of every full block not yet stored, and a checkpoint at n (the
  // recurrent state now, and the partial block's K/V). Call it after a prefill or a decode step.
  Status Save(llama_seq_id seq, std::span<const llama_token> tokens, SaveReport* report = nullptr);

  // Decodes tokens[n_past..] into `seq` (which holds tokens[0..n_past) already) in chunks of one
  // block (so that a block's K/V is computed the same way by every run that stores it), capturing
  // the recurrent state every checkpoint_interval tokens, and stores the new blocks and
  // checkpoints as Save does. The logits of the last token are requested, as a prefill needs.
  // What it stores at the end depends on `mode`:
  //   kPrompt  the tokens are a whole prompt: its last token is decoded on its own and the
  //            checkpoint is the state before it, the one a restore of this same prompt can use
  //            (a restore leaves the last token to decode) and as good as the end for every
  //            prompt that extends this one;
  //   kPrefix  the tokens are a prefix that other prompts extend (a system prompt, a document):
  //            the checkpoint is at their end;
  //   kDecodeOnly  nothing is stored; the chunks are the same (the cold reference of a restore).
  enum class Mode : uint8_t { kPrompt, kPrefix, kDecodeOnly };
  Status Prefill(llama_seq_id seq, std::span<const llama_token> tokens, uint64_t n_past,
                 SaveReport* report = nullptr, Mode mode = Mode::kPrompt);

  // Call after each decoded token with the sequence's tokens so far: saves (as Save) whenever
  // their count reaches a multiple of decode_interval, so that a long generation is restorable
  // from near its end. Cheap otherwise.
  Status Decoded(llama_seq_id seq, std::span<const llama_token> tokens,
                 SaveReport* report = nullptr);

  // The attention K/V of one token as stored (every attention layer's K and V row); 0 until a
  // Save or Restore has learned the state's layout.
  uint64_t KvBytesPerToken() const;

  const ModelIdentity& identity() const;
  const std::string& name() const;  // the namespace
  const CacheStats& stats() const;

  // The implementation (src/llama/prompt_cache.cc); opaque to callers.
  class Impl;

 private:
  explicit PromptCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::llama
