// prefixd::llama::PromptCache and the sequence-state codec (src/llama/seq_state.h) against the
// real llama.cpp and a real prefixd-server, on the synthetic tiny models scripts/llama/make_gguf.py
// writes: a state taken apart and assembled back is llama.cpp's own bytes; a restore decodes the
// logits a cold run split at the same place decodes; every failure is a miss, never a wrong state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"
#include "llama/runner.h"
#include "llama/seq_state.h"
#include "prefixd/client.h"
#include "prefixd/llama.h"

namespace prefixd::llama {
namespace {

namespace fs = std::filesystem;

// The tiny models, written once per test binary into a temporary directory.
class Models {
 public:
  static const std::string& Path(const std::string& arch) {
    static Models models;
    auto it = models.paths_.find(arch);
    if (it != models.paths_.end()) return it->second;
    const fs::path out = models.dir_ / (arch + ".gguf");
    const std::string cmd = std::string("/usr/bin/python3 ") + PREFIXD_MAKE_GGUF + " --arch " +
                            arch + " --shape tiny --seed 1 --out " + out.string();
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "could not write the model: " << cmd;
    }
    return models.paths_.emplace(arch, out.string()).first->second;
  }

 private:
  Models() {
    dir_ = fs::temp_directory_path() / ("prefixd-llama-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  ~Models() { fs::remove_all(dir_); }
  fs::path dir_;
  std::map<std::string, std::string> paths_;
};

std::unique_ptr<Runner> Load(const std::string& arch, const std::string& flash_attn = "auto",
                             uint32_t n_batch = 256) {
  RunnerOptions o;
  o.model_path = Models::Path(arch);
  o.n_ctx = 1024;
  o.n_batch = n_batch;
  o.threads = 1;  // ggml's threads wait for each other: one is faster on shared cores
  o.flash_attn = flash_attn;
  Result<std::unique_ptr<Runner>> r = Runner::Load(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

MemoryKind KindOf(const std::string& arch) {
  if (arch == "qwen3") return MemoryKind::kAttention;
  if (arch == "mamba2" || arch == "rwkv7") return MemoryKind::kRecurrent;
  return MemoryKind::kHybrid;
}

std::vector<uint8_t> StateOf(Runner& r) {
  std::vector<uint8_t> bytes(llama_state_seq_get_size_ext(r.ctx(), 0, 0));
  EXPECT_EQ(llama_state_seq_get_data_ext(r.ctx(), bytes.data(), bytes.size(), 0, 0), bytes.size());
  return bytes;
}

class EveryFamily : public ::testing::TestWithParam<std::string> {};

// Taken apart and assembled back, a state is llama.cpp's own bytes, and llama.cpp loads it.
TEST_P(EveryFamily, StateAssemblesBackToLlamaCppsBytes) {
  const std::string arch = GetParam();
  for (const char* flash : {"on", "off"}) {
    SCOPED_TRACE(flash);
    auto runner = Load(arch, flash);
    ASSERT_TRUE(runner);
    const std::vector<llama_token> tokens = RandomTokens(3, 200, runner->vocab());
    ASSERT_TRUE(runner->Decode(0, tokens, 0, tokens.size()).ok());
    const std::string digest = runner->LogitsDigest();
    const std::vector<uint8_t> bytes = StateOf(*runner);

    Result<SequenceState> state = SequenceState::Parse(bytes, KindOf(arch), tokens);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    const StateLayout& layout = state->layout();
    EXPECT_EQ(layout.kind, KindOf(arch));
    std::vector<std::vector<uint8_t>> rows(layout.attention_layers());
    std::vector<std::span<const uint8_t>> attention, recurrent;
    for (uint32_t l = 0; l < rows.size(); ++l) {
      state->AppendRows(l, 0, tokens.size(), rows[l]);
      attention.emplace_back(rows[l]);
    }
    std::vector<std::vector<uint8_t>> blobs;
    for (size_t i = 0; i < layout.recurrent_layers(); ++i) blobs.push_back(state->RecurrentBlob(i));
    for (const auto& b : blobs) recurrent.emplace_back(b);
    Result<std::vector<uint8_t>> assembled =
        AssembleState(layout, 0, tokens.size(), tokens, attention, recurrent);
    ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
    EXPECT_TRUE(*assembled == bytes)
        << "assembled " << assembled->size() << " bytes, llama.cpp " << bytes.size();

    // Loaded into an emptied sequence, the next token's logits are the cold run's.
    runner->Clear(0);
    ASSERT_EQ(
        llama_state_seq_set_data_ext(runner->ctx(), assembled->data(), assembled->size(), 0, 0),
        assembled->size());
    std::vector<llama_token> longer = tokens;
    longer.push_back(7);
    ASSERT_TRUE(runner->Decode(0, longer, tokens.size(), longer.size()).ok());
    const std::string restored = runner->LogitsDigest();
    runner->Clear(0);
    ASSERT_TRUE(runner->Decode(0, tokens, 0, tokens.size()).ok());
    ASSERT_TRUE(runner->Decode(0, longer, tokens.size(), longer.size()).ok());
    EXPECT_EQ(restored, runner->LogitsDigest());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, EveryFamily,
                         ::testing::Values("qwen35", "mamba2", "rwkv7", "qwen3", "granitehybrid"));

TEST(SeqState, EveryCutAndTrailingByteIsRefused) {
  auto runner = Load("qwen35");
  ASSERT_TRUE(runner);
  const std::vector<llama_token> tokens = RandomTokens(4, 20, runner->vocab());
  ASSERT_TRUE(runner->Decode(0, tokens, 0, tokens.size()).ok());
  std::vector<uint8_t> bytes = StateOf(*runner);
  ASSERT_TRUE(SequenceState::Parse(bytes, MemoryKind::kHybrid, tokens).ok());
  for (size_t cut = 0; cut < bytes.size(); cut += 1 + cut / 64) {
    EXPECT_FALSE(
        SequenceState::Parse(std::span(bytes).first(cut), MemoryKind::kHybrid, tokens).ok())
        << "cut at " << cut;
  }
  bytes.push_back(0);
  EXPECT_FALSE(SequenceState::Parse(bytes, MemoryKind::kHybrid, tokens).ok());
  bytes.pop_back();
  // Tokens other than the cells' (the cells of M-RoPE models carry them) or of another count.
  std::vector<llama_token> other = tokens;
  other.pop_back();
  EXPECT_FALSE(SequenceState::Parse(bytes, MemoryKind::kHybrid, other).ok());
  // The wrong memory kind.
  EXPECT_FALSE(SequenceState::Parse(bytes, MemoryKind::kAttention, tokens).ok());
  EXPECT_FALSE(SequenceState::Parse(bytes, MemoryKind::kRecurrent, tokens).ok());
}

// A cache this code does not store (K and V of different element types here; quantized types
// take the same path, but the tiny models' 16-value heads are too narrow for their 32-value
// blocks) is refused as unsupported, not misread.
TEST(SeqState, UnsupportedCacheTypesAreRefused) {
  RunnerOptions o;
  o.model_path = Models::Path("qwen3");
  o.n_ctx = 256;
  o.n_batch = 64;
  o.threads = 1;        // ggml's threads wait for each other: one is faster on shared cores
  o.flash_attn = "on";  // V of another type than K needs flash attention
  Result<std::unique_ptr<Runner>> r = Runner::Load(o);
  ASSERT_TRUE(r.ok());
  // A context of its own with f16 K and bf16 V.
  llama_context_params p = (*r)->params();
  p.type_k = GGML_TYPE_F16;
  p.type_v = GGML_TYPE_BF16;
  llama_context* ctx =
      llama_init_from_model(const_cast<llama_model*>(llama_get_model((*r)->ctx())), p);
  ASSERT_NE(ctx, nullptr);
  const std::vector<llama_token> tokens = RandomTokens(5, 32, (*r)->vocab());
  llama_batch batch = llama_batch_get_one(const_cast<llama_token*>(tokens.data()), 32);
  ASSERT_EQ(llama_decode(ctx, batch), 0);
  std::vector<uint8_t> bytes(llama_state_seq_get_size_ext(ctx, 0, 0));
  llama_state_seq_get_data_ext(ctx, bytes.data(), bytes.size(), 0, 0);
  Result<SequenceState> state = SequenceState::Parse(bytes, MemoryKind::kAttention, tokens);
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), StatusCode::kInvalidArgument) << state.status().ToString();
  llama_free(ctx);
}

TEST(SeqState, LayoutRoundTripsAndRefusesDamage) {
  StateLayout layout;
  layout.kind = MemoryKind::kHybrid;
  layout.attention = {1, CellExt::kPosition, true, 3, 1, 2, 128};
  layout.recurrent.n_layer = 12;
  layout.recurrent.layers = {{0, 4096, 0, 65536}, {0, 4096, 0, 65536}};
  const std::string bytes = layout.Encode();
  Result<StateLayout> back = StateLayout::Decode(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, layout);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] ^= 0x10;
    EXPECT_FALSE(StateLayout::Decode(damaged).ok()) << "byte " << i;
  }
  EXPECT_FALSE(StateLayout::Decode(bytes.substr(0, bytes.size() - 1)).ok());
  EXPECT_FALSE(StateLayout::Decode("").ok());
}

// --- The cache against a real server ---

class CacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }

  Client Connect() {
    Result<Client> c =
        Client::Connect("127.0.0.1", server_.port(), std::chrono::milliseconds(5000));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }

  PromptCache Open(Runner& runner, CacheOptions options = {}, std::string model_hash = {}) {
    if (model_hash.empty()) {
      Result<std::string> h = HashModelFile(Models::Path(GetParam()));
      EXPECT_TRUE(h.ok());
      model_hash = *h;
    }
    options.log = [this](std::string_view m) { logged_.emplace_back(m); };
    Result<PromptCache> cache =
        PromptCache::Open(runner.ctx(), runner.params(), Connect(),
                          IdentityFor(model_hash, runner.params()), options);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return std::move(*cache);
  }

  it::ServerProcess server_;
  std::vector<std::string> logged_;
};

// Saved by one context (the cold run), restored by another: the restored length is the
// checkpoint's, and the restored state decodes the logits of a cold run split at that length.
TEST_P(CacheTest, RestoresWhatAnotherContextSaved) {
  auto saver = Load(GetParam());
  auto restorer = Load(GetParam());
  ASSERT_TRUE(saver && restorer);
  CacheOptions options;
  options.block_size = 16;
  options.checkpoint_interval = 64;
  PromptCache saving = Open(*saver, options);
  PromptCache restoring = Open(*restorer, options);
  EXPECT_EQ(saving.name(), restoring.name());

  const std::vector<llama_token> first = RandomTokens(10, 150, saver->vocab());
  SaveReport saved;
  ASSERT_TRUE(saving.Prefill(0, first, 0, &saved).ok());
  EXPECT_GT(saved.blocks_stored, 0u);
  // Checkpoints at 64 and 128 (the interval) and 149 (before the last token); a transformer needs
  // only the last (its blocks are restorable by themselves).
  EXPECT_EQ(saved.checkpoints_stored, KindOf(GetParam()) == MemoryKind::kAttention ? 1u : 3u);

  // The same prompt again: all of it but the last token, which is left to decode.
  RestoreReport report;
  EXPECT_EQ(restoring.Restore(0, first, &report), 149u) << report.miss_reason;

  // The same prompt extended: as far as the first's end checkpoint, and nothing past it.
  std::vector<llama_token> second = first;
  const std::vector<llama_token> more = RandomTokens(11, 40, saver->vocab());
  second.insert(second.end(), more.begin(), more.end());
  const uint64_t restored = restoring.Restore(0, second, &report);
  EXPECT_EQ(restored, 149u) << report.miss_reason;
  ASSERT_TRUE(restorer->Decode(0, second, restored, second.size()).ok());
  const std::string warm = restorer->LogitsDigest();

  saver->Clear(0);
  ASSERT_TRUE(
      saving
          .Prefill(0, std::span(second).first(restored), 0, nullptr, PromptCache::Mode::kDecodeOnly)
          .ok());
  ASSERT_TRUE(saver->Decode(0, second, restored, second.size()).ok());
  EXPECT_EQ(warm, saver->LogitsDigest());

  // A prompt that leaves the first at token 100 restores the last checkpoint before it (64; a
  // transformer: the last full block, 96).
  std::vector<llama_token> branch(first.begin(), first.begin() + 100);
  branch.push_back(3);
  branch.push_back(4);
  const bool transformer = KindOf(GetParam()) == MemoryKind::kAttention;
  const uint64_t partial = restoring.Restore(0, branch, &report);
  EXPECT_EQ(partial, transformer ? 96u : 64u);
  ASSERT_TRUE(restorer->Decode(0, branch, partial, branch.size()).ok());
  const std::vector<float> branch_warm(restorer->Logits().begin(), restorer->Logits().end());
  saver->Clear(0);
  ASSERT_TRUE(
      saving
          .Prefill(0, std::span(branch).first(partial), 0, nullptr, PromptCache::Mode::kDecodeOnly)
          .ok());
  ASSERT_TRUE(saver->Decode(0, branch, partial, branch.size()).ok());
  const std::vector<float> branch_cold(saver->Logits().begin(), saver->Logits().end());
  // Every stored block was computed alone in a block-aligned chunk, as the reference computes it:
  // the same arithmetic, so the same bits.
  EXPECT_EQ(branch_warm, branch_cold);

  // Saving the same prompt again stores nothing new.
  saver->Clear(0);
  SaveReport again;
  ASSERT_TRUE(saving.Prefill(0, first, 0, &again).ok());
  EXPECT_EQ(again.blocks_stored, 0u);
  EXPECT_EQ(again.checkpoints_stored, 0u);
  // Over TCP the shared arenas are out of reach: nothing tried, nothing logged.
  EXPECT_EQ(restoring.stats().shm_restores, 0u);
  EXPECT_FALSE(report.shared_memory);
  EXPECT_TRUE(logged_.empty()) << logged_.front();
}

// Another model identity (other weights, or the same weights under another llama.cpp build or
// cache type) shares nothing.
TEST_P(CacheTest, AnotherIdentityIsAMiss) {
  auto runner = Load(GetParam());
  ASSERT_TRUE(runner);
  PromptCache saving = Open(*runner);
  const std::vector<llama_token> tokens = RandomTokens(12, 100, runner->vocab());
  ASSERT_TRUE(saving.Prefill(0, tokens, 0).ok());
  PromptCache other = Open(*runner, {}, "another-model");
  EXPECT_NE(other.name(), saving.name());
  RestoreReport report;
  EXPECT_EQ(other.Restore(0, tokens, &report), 0u);
  EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(runner->ctx()), 0), -1);
  llama_context_params f32 = runner->params();
  f32.type_k = GGML_TYPE_F32;
  EXPECT_NE(IdentityFor("m", f32).digest, IdentityFor("m", runner->params()).digest);
}

// A server that goes away, a damaged layout, a layout of other dimensions: the restore is cold
// (0, the sequence empty), the failure is logged once and counted, and nothing crashes.
TEST_P(CacheTest, FailuresAreCold) {
  auto runner = Load(GetParam());
  ASSERT_TRUE(runner);
  PromptCache cache = Open(*runner);
  const std::vector<llama_token> tokens = RandomTokens(13, 100, runner->vocab());
  ASSERT_TRUE(cache.Prefill(0, tokens, 0).ok());
  std::vector<llama_token> longer = tokens;
  longer.push_back(1);

  // A layout whose K/V are wider than the namespace's: the fetched rows do not fit.
  {
    PromptCache fresh = Open(*runner);
    Client raw = Connect();
    Result<Reply> got = raw.Command({"GET", fresh.name() + ":layout"});
    ASSERT_TRUE(got.ok());
    Result<StateLayout> layout = StateLayout::Decode(got->str);
    ASSERT_TRUE(layout.ok());
    StateLayout wrong = *layout;
    if (wrong.has_attention()) {
      wrong.attention.width *= 2;
    } else {
      wrong.recurrent.layers[0].s_bytes += 4;
    }
    ASSERT_TRUE(raw.Command({"SET", fresh.name() + ":layout", wrong.Encode()}).ok());
    RestoreReport report;
    EXPECT_EQ(fresh.Restore(0, longer, &report), 0u);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(runner->ctx()), 0), -1);
    EXPECT_EQ(fresh.stats().failures, 1u);
    // Damaged bytes are refused before anything is fetched.
    PromptCache third = Open(*runner);
    ASSERT_TRUE(raw.Command({"SET", third.name() + ":layout", "garbage"}).ok());
    EXPECT_EQ(third.Restore(0, longer, &report), 0u);
    EXPECT_EQ(third.stats().failures, 1u);
    // A saver refuses to store under a layout that is not its own.
    runner->Clear(0);
    EXPECT_FALSE(third.Prefill(0, tokens, 0).ok());
    ASSERT_TRUE(raw.Command({"SET", third.name() + ":layout", layout->Encode()}).ok());
  }

  // The namespace dropped (by hand, or evicted whole): a miss, and the next save makes it again.
  {
    Client raw = Connect();
    Result<Reply> dropped = raw.Command({"KV.PREFIX.DROP", cache.name()});
    ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
    EXPECT_EQ(dropped->integer, 1);
    ASSERT_TRUE(raw.Command({"DEL", cache.name() + ":layout"}).ok());
    RestoreReport report;
    EXPECT_EQ(cache.Restore(0, longer, &report), 0u);
    runner->Clear(0);
    EXPECT_FALSE(cache.Prefill(0, tokens, 0).ok());  // its namespace is gone: nothing stored
    runner->Clear(0);
    ASSERT_TRUE(cache.Prefill(0, tokens, 0).ok());  // made again
    EXPECT_EQ(cache.Restore(0, longer, &report), tokens.size() - 1) << report.miss_reason;
  }

  // The layout alone gone (a string key maxmemory may evict): the next save puts it back.
  {
    Client raw = Connect();
    ASSERT_TRUE(raw.Command({"DEL", cache.name() + ":layout"}).ok());
    PromptCache other = Open(*runner);
    RestoreReport report;
    EXPECT_EQ(other.Restore(0, longer, &report), 0u);
    runner->Clear(0);
    ASSERT_TRUE(cache.Prefill(0, tokens, 0).ok());
    EXPECT_EQ(other.Restore(0, longer, &report), tokens.size() - 1) << report.miss_reason;
  }

  // The server gone: cold, once logged, however often asked.
  logged_.clear();
  ASSERT_TRUE(server_.Stop());
  RestoreReport report;
  EXPECT_EQ(cache.Restore(0, longer, &report), 0u);
  EXPECT_EQ(cache.Restore(0, longer, &report), 0u);
  EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(runner->ctx()), 0), -1);
  EXPECT_EQ(logged_.size(), 1u);
  runner->Clear(0);
  EXPECT_FALSE(cache.Prefill(0, tokens, 0).ok());
}

INSTANTIATE_TEST_SUITE_P(Families, CacheTest,
                         ::testing::Values("qwen35", "mamba2", "rwkv7", "qwen3", "granitehybrid"));

// --- The same restores through the server's shared arenas (docs/shm-transport.md) ---

// INFO's shm_leases (-1 when it cannot be read).
int64_t ShmLeases(Client& client) {
  Result<Reply> info = client.Command({"INFO", "memory"});
  if (!info.ok()) return -1;
  const size_t at = info->str.find("shm_leases:");
  if (at == std::string::npos) return -1;
  return std::strtoll(info->str.c_str() + at + 11, nullptr, 10);
}

class ShmCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  // A server on a unix socket too, with `flags`.
  void Start(it::ServerProcess& server, std::vector<std::string> flags) {
    ASSERT_TRUE(server.Start({.flags = std::move(flags), .unix_socket = true}));
  }

  PromptCache Open(it::ServerProcess& server, Runner& runner, CacheOptions options) {
    Result<std::string> h = HashModelFile(Models::Path(GetParam()));
    EXPECT_TRUE(h.ok());
    options.log = [this](std::string_view m) { logged_.emplace_back(m); };
    Result<Client> client = Client::ConnectUnix(server.unix_socket_path());
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    Result<PromptCache> cache = PromptCache::Open(runner.ctx(), runner.params(), std::move(*client),
                                                  IdentityFor(*h, runner.params()), options);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return std::move(*cache);
  }

  // Saves `first` through `saving`, restores `prompt` (which extends it) into `restorer` through
  // `restoring`, and checks that the next token's logits are those of a cold run split at the
  // same place (`saver` recomputes it). Returns the restored state's bytes.
  std::vector<uint8_t> RestoreAndCompare(Runner& saver, PromptCache& saving, Runner& restorer,
                                         PromptCache& restoring,
                                         const std::vector<llama_token>& prompt,
                                         RestoreReport& report) {
    const uint64_t restored = restoring.Restore(0, prompt, &report);
    EXPECT_EQ(restored, 149u) << report.miss_reason;
    const std::vector<uint8_t> state = StateOf(restorer);
    EXPECT_TRUE(restorer.Decode(0, prompt, restored, prompt.size()).ok());
    const std::string warm = restorer.LogitsDigest();
    saver.Clear(0);
    EXPECT_TRUE(saving
                    .Prefill(0, std::span(prompt).first(restored), 0, nullptr,
                             PromptCache::Mode::kDecodeOnly)
                    .ok());
    EXPECT_TRUE(saver.Decode(0, prompt, restored, prompt.size()).ok());
    EXPECT_EQ(warm, saver.LogitsDigest()) << "the restored state decodes other logits than cold";
    return state;
  }

  // Caches of blocks of 16 tokens with a checkpoint every 64.
  static CacheOptions SmallBlocks() {
    CacheOptions options;
    options.block_size = 16;
    options.checkpoint_interval = 64;
    return options;
  }

  // Two contexts of the family and their caches on `server` (SmallBlocks), and 150 random tokens
  // prefilled and saved through the first.
  struct SavedPrompt {
    std::unique_ptr<Runner> saver, restorer;
    std::optional<PromptCache> saving, restoring;
    std::vector<llama_token> first;
  };
  void SaveFirst(it::ServerProcess& server, SavedPrompt& saved) {
    saved.saver = Load(GetParam());
    saved.restorer = Load(GetParam());
    ASSERT_TRUE(saved.saver && saved.restorer);
    saved.saving.emplace(Open(server, *saved.saver, SmallBlocks()));
    saved.restoring.emplace(Open(server, *saved.restorer, SmallBlocks()));
    saved.first = RandomTokens(10, 150, saved.saver->vocab());
    ASSERT_TRUE(saved.saving->Prefill(0, saved.first, 0).ok());
  }

  std::vector<std::string> logged_;
};

// Over the unix socket of a server with shared arenas, a restore reads through them by itself,
// and llama.cpp gets the very bytes a restore over the socket gives it.
TEST_P(ShmCacheTest, RestoresThroughTheArenasTheBytesTheSocketGives) {
  it::ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(Start(server, {"--shm-arenas", "yes"}));
  SavedPrompt saved;
  ASSERT_NO_FATAL_FAILURE(SaveFirst(server, saved));
  Runner& saver = *saved.saver;
  Runner& restorer = *saved.restorer;
  PromptCache& saving = *saved.saving;
  PromptCache& shared = *saved.restoring;
  CacheOptions socket_only = SmallBlocks();
  socket_only.shared_memory = false;
  PromptCache over_socket = Open(server, restorer, socket_only);

  std::vector<llama_token> second = saved.first;
  const std::vector<llama_token> more = RandomTokens(11, 40, saver.vocab());
  second.insert(second.end(), more.begin(), more.end());

  RestoreReport via_shm, via_socket;
  const std::vector<uint8_t> shm_state =
      RestoreAndCompare(saver, saving, restorer, shared, second, via_shm);
  EXPECT_TRUE(via_shm.shared_memory) << "the restore did not read through the arenas";
  EXPECT_EQ(shared.stats().shm_restores, 1u);
  // Values of 32 KiB and more lie in the arenas and are read through the mapping: qwen35's and
  // qwen3's pages (9 blocks of 16 tokens, 256 bytes a token: one 36 KiB slab chunk) and rwkv7's
  // states. mamba2's and granitehybrid's parts are all smaller, so the server answers their bytes
  // in the replies, as it does for everything below 1 MiB on a sanitized server.
  const bool maps = GetParam() == "qwen35" || GetParam() == "qwen3" || GetParam() == "rwkv7";
  if (maps && !it::ServerIsSanitized()) {
    EXPECT_GT(via_shm.mapped_bytes, 0u) << "nothing was read through the mapping";
  }
  if (!maps) EXPECT_EQ(via_shm.mapped_bytes, 0u);
  const std::vector<uint8_t> socket_state =
      RestoreAndCompare(saver, saving, restorer, over_socket, second, via_socket);
  EXPECT_FALSE(via_socket.shared_memory);
  EXPECT_EQ(over_socket.stats().shm_restores, 0u);
  EXPECT_EQ(via_shm.bytes, via_socket.bytes);
  EXPECT_TRUE(shm_state == socket_state)
      << "llama.cpp got other bytes through the arenas than over the socket";
  // Again: the connection beside the client is kept, its leases given back.
  RestoreReport again;
  EXPECT_EQ(shared.Restore(0, second, &again), 149u);
  EXPECT_TRUE(again.shared_memory);
  EXPECT_TRUE(StateOf(restorer) == shm_state);
  Result<Client> admin = Client::ConnectUnix(server.unix_socket_path());
  ASSERT_TRUE(admin.ok());
  // The last SHM.RELEASE is sent without waiting for its reply: give the server a moment.
  int64_t leases = -1;
  for (int i = 0; i < 100 && leases != 0; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    leases = ShmLeases(*admin);
  }
  EXPECT_EQ(leases, 0) << "a restore left SHM leases behind";
  EXPECT_TRUE(logged_.empty()) << logged_.front();
}

// The namespace's stored bytes as the plain fetches answer them: NSINFO's counts, every saved
// block's rows of every attention layer as stored (FMT NATIVE), and the recurrent parts of the
// checkpoints at `lengths`.
std::vector<std::string> StoredBytes(Client& client, const std::string& ns,
                                     const std::vector<llama_token>& tokens, uint32_t block_size,
                                     uint64_t saved_blocks, const std::vector<uint64_t>& lengths) {
  std::vector<std::string> out;
  auto text = [](const Result<Reply>& r) {
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return std::string("(error)");
    std::string joined = r->str;
    for (const Reply& e : r->elements) joined += "|" + std::to_string(e.str.size()) + ":" + e.str;
    return joined;
  };
  const Result<Reply> info = client.Command({"KV.PREFIX.NSINFO", ns});
  std::string counts = text(info);
  // Leases and index figures may differ; what was stored may not.
  for (const char* key : {"blocks:", "checkpoints:", "kv_bytes:", "state_bytes:"}) {
    const size_t at = counts.find(key);
    out.push_back(at == std::string::npos ? std::string("(no ") + key + ")"
                                          : counts.substr(at, counts.find('\r', at) - at));
  }
  const size_t attn_at = counts.find("attn:");
  const int attn = attn_at == std::string::npos ? 0 : std::atoi(counts.c_str() + attn_at + 5);
  const std::vector<uint32_t> ids(tokens.begin(), tokens.end());
  const std::vector<PrefixHash> hashes = PrefixBlockHashes(ids, block_size);
  const std::string chain(reinterpret_cast<const char*>(hashes.data()),
                          saved_blocks * sizeof(PrefixHash));
  for (int layer = 0; layer < attn; ++layer) {
    out.push_back(text(client.Command({"KV.PREFIX.BFETCH", ns, std::to_string(saved_blocks), chain,
                                       std::to_string(layer), "FMT", "NATIVE"})));
  }
  for (uint64_t length : lengths) {
    const PrefixHash position = PrefixPositionHash(ids, length, block_size, hashes);
    out.push_back(text(client.Command(
        {"SSM.PREFIX.CKPT.FETCH", ns,
         std::string_view(reinterpret_cast<const char*>(position.data()), position.size())})));
  }
  return out;
}

// On the unix socket of a server with arenas a save writes its rows and states into a memfd the
// server maps (SHM.CALL) by itself, and the server stores the very bytes a save over the socket
// stores; with shared_memory off it uses the socket.
TEST_P(ShmCacheTest, SavesThroughAMemfdStoreTheBytesTheSocketStores) {
  it::ServerProcess through_file, over_socket;
  ASSERT_NO_FATAL_FAILURE(Start(through_file, {"--shm-arenas", "yes"}));
  ASSERT_NO_FATAL_FAILURE(Start(over_socket, {"--shm-arenas", "yes"}));
  auto runner = Load(GetParam());
  ASSERT_TRUE(runner);
  CacheOptions socket_only = SmallBlocks();
  socket_only.shared_memory = false;
  PromptCache shm_cache = Open(through_file, *runner, SmallBlocks());
  PromptCache socket_cache = Open(over_socket, *runner, socket_only);
  const std::vector<llama_token> tokens = RandomTokens(10, 150, runner->vocab());
  SaveReport via_shm, via_socket;
  ASSERT_TRUE(shm_cache.Prefill(0, tokens, 0, &via_shm).ok());
  runner->Clear(0);
  ASSERT_TRUE(socket_cache.Prefill(0, tokens, 0, &via_socket).ok());
  EXPECT_TRUE(via_shm.shared_memory) << "the save did not go through a memfd";
  EXPECT_FALSE(via_socket.shared_memory);
  EXPECT_EQ(shm_cache.stats().shm_saves, 1u);
  EXPECT_EQ(socket_cache.stats().shm_saves, 0u);
  EXPECT_EQ(via_shm.blocks_stored, 9u);
  EXPECT_EQ(via_shm.blocks_stored, via_socket.blocks_stored);
  EXPECT_EQ(via_shm.checkpoints_stored, via_socket.checkpoints_stored);
  EXPECT_EQ(via_shm.block_bytes + via_shm.state_bytes + via_shm.tail_bytes,
            via_socket.block_bytes + via_socket.state_bytes + via_socket.tail_bytes);

  Result<Client> a = Client::ConnectUnix(through_file.unix_socket_path());
  Result<Client> b = Client::ConnectUnix(over_socket.unix_socket_path());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<uint64_t> lengths = {64, 128, 149};
  const std::vector<std::string> file_bytes =
      StoredBytes(*a, shm_cache.name(), tokens, 16, 9, lengths);
  const std::vector<std::string> socket_bytes =
      StoredBytes(*b, socket_cache.name(), tokens, 16, 9, lengths);
  ASSERT_EQ(file_bytes.size(), socket_bytes.size());
  for (size_t i = 0; i < file_bytes.size(); ++i) {
    EXPECT_TRUE(file_bytes[i] == socket_bytes[i])
        << "part " << i << " differs: " << file_bytes[i].substr(0, 80) << " vs "
        << socket_bytes[i].substr(0, 80);
  }
  size_t fetched = 0;
  for (const std::string& part : file_bytes) fetched += part.size();
  EXPECT_GT(fetched, 10000u) << "nothing was fetched";
  EXPECT_TRUE(logged_.empty()) << logged_.front();
}

// A server that refuses the shared path (this uid not allowed; arenas off): restores and saves go
// over the socket, the refusal is logged once by each cache, and the state is as good.
TEST_P(ShmCacheTest, RefusedArenasFallBackToTheSocket) {
  const std::vector<std::vector<std::string>> refusing = {
      {"--shm-arenas", "yes", "--shm-allow-uids", std::to_string(::geteuid() + 1)},
      {"--shm-arenas", "no"}};
  for (const auto& flags : refusing) {
    SCOPED_TRACE(flags[1] == "no" ? "arenas off" : "uid not allowed");
    logged_.clear();
    it::ServerProcess server;
    ASSERT_NO_FATAL_FAILURE(Start(server, flags));
    SavedPrompt saved;
    ASSERT_NO_FATAL_FAILURE(SaveFirst(server, saved));
    std::vector<llama_token> second = saved.first;
    second.push_back(5);
    for (int i = 0; i < 2; ++i) {
      RestoreReport report;
      RestoreAndCompare(*saved.saver, *saved.saving, *saved.restorer, *saved.restoring, second,
                        report);
      EXPECT_FALSE(report.shared_memory);
    }
    EXPECT_EQ(saved.restoring->stats().shm_restores, 0u);
    EXPECT_EQ(saved.restoring->stats().failures, 0u);
    EXPECT_EQ(saved.saving->stats().shm_saves, 0u);
    EXPECT_EQ(saved.saving->stats().failures, 0u);
    // The saving cache's, then the restoring one's.
    ASSERT_EQ(logged_.size(), 2u);
    for (const std::string& line : logged_) {
      EXPECT_NE(line.find("shared memory refused"), std::string::npos) << line;
    }
  }
}

// A shared fetch past the connection's SHM lease cap is refused with nothing leased and the prefix
// lease kept: that restore goes over the socket (logged once), and the next, with room again,
// through the arenas. The cap counts calls, not pieces: with room for one lease, a restore of 9
// blocks (each layer's answer 2 x (9 + 1) pieces, the old rule's 20 leases) goes through the
// arenas, since each layer's lease is released as the next request goes out.
// Only parts in the arenas take leases: the families whose parts are large enough (see above).
class ShmLeaseCapTest : public ShmCacheTest {};

// The `field` of `command`'s line in INFO commandstats (calls, failed_calls, ...); -1 when absent.
int64_t CommandStat(Client& client, const std::string& command, const std::string& field) {
  Result<Reply> info = client.Command({"INFO", "commandstats"});
  if (!info.ok()) return -1;
  const std::string line = "cmdstat_" + command + ":";
  const size_t at = info->str.find(line);
  if (at == std::string::npos) return -1;
  const size_t end = info->str.find('\n', at);
  const std::string text = info->str.substr(at, end - at);
  const size_t f = text.find(field + "=");
  if (f == std::string::npos) return -1;
  return std::strtoll(text.c_str() + f + field.size() + 1, nullptr, 10);
}

TEST_P(ShmLeaseCapTest, LeaseCapFallsBackForThatRestoreOnlyAndCountsCalls) {
  // A sanitized server keeps these parts on the heap: no lease to refuse.
  if (it::ServerIsSanitized()) GTEST_SKIP() << "a sanitized server keeps these parts on the heap";
  it::ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(Start(server, {"--shm-arenas", "yes", "--shm-max-leases", "0"}));
  SavedPrompt saved;
  ASSERT_NO_FATAL_FAILURE(SaveFirst(server, saved));
  Runner& saver = *saved.saver;
  Runner& restorer = *saved.restorer;
  PromptCache& saving = *saved.saving;
  PromptCache& restoring = *saved.restoring;
  std::vector<llama_token> second = saved.first;
  second.push_back(5);
  RestoreReport capped;
  const std::vector<uint8_t> over_socket =
      RestoreAndCompare(saver, saving, restorer, restoring, second, capped);
  EXPECT_FALSE(capped.shared_memory);
  EXPECT_EQ(restoring.stats().failures, 0u);
  ASSERT_EQ(logged_.size(), 1u);
  EXPECT_NE(logged_[0].find("shared-memory fetch failed"), std::string::npos) << logged_[0];
  Result<Client> admin = Client::ConnectUnix(server.unix_socket_path());
  ASSERT_TRUE(admin.ok());
  EXPECT_GE(CommandStat(*admin, "kv.prefix.shmlfetch", "failed_calls"), 1);
  // Room for one lease: the whole restore, 9 blocks, through the arenas.
  ASSERT_TRUE(admin->Command({"CONFIG", "SET", "shm-max-leases", "1"}).ok());
  const int64_t calls = CommandStat(*admin, "kv.prefix.shmlfetch", "calls");
  const int64_t failed = CommandStat(*admin, "kv.prefix.shmlfetch", "failed_calls");
  RestoreReport shared;
  const std::vector<uint8_t> through_arenas =
      RestoreAndCompare(saver, saving, restorer, restoring, second, shared);
  EXPECT_EQ(shared.matched_blocks, 9u);
  EXPECT_TRUE(shared.shared_memory) << "a restore of more pieces than the cap was refused";
  EXPECT_GT(shared.mapped_bytes, 0u);
  EXPECT_TRUE(through_arenas == over_socket);
  EXPECT_EQ(restoring.stats().shm_restores, 1u);
  EXPECT_GT(CommandStat(*admin, "kv.prefix.shmlfetch", "calls"), calls)
      << "the shared command did not serve the restore";
  EXPECT_EQ(CommandStat(*admin, "kv.prefix.shmlfetch", "failed_calls"), failed);
  EXPECT_EQ(logged_.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Families, ShmCacheTest,
                         ::testing::Values("qwen35", "mamba2", "rwkv7", "qwen3", "granitehybrid"));
INSTANTIATE_TEST_SUITE_P(Families, ShmLeaseCapTest, ::testing::Values("qwen35", "rwkv7", "qwen3"));

}  // namespace
}  // namespace prefixd::llama
