// prefixd-llama: prefixd's prompt cache proven on llama.cpp itself. `chat` runs a conversation
// (multiturn, fanout or branch) and `sweep` a set of prefix lengths; in both, this process
// prefills cold and saves through the cache, and a second process (`warm`, spawned here) restores
// from the server and decodes the rest, and the two are compared: time to first token, logits
// bit for bit against a cold run split at the same place, greedy tokens against the cold run.
// Single-threaded driver; llama.cpp's own threads do the math.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "prefixd/client.h"
#include "prefixd/llama.h"
#include "report.h"
#include "runner.h"

extern char** environ;

namespace prefixd::llama {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Settings of both processes; the driver passes its own to the warm process.
struct Common {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 1974;
  std::string socket;
  int threads = std::max(1u, std::thread::hardware_concurrency());
  uint32_t ctx = 0;  // 0: what the workload needs
  uint32_t batch = 512;
  uint32_t block = 256;
  uint32_t interval = 1024;
  int timeout_ms = 5000;
  std::string flash_attn = "auto";
  bool shm = true;                  // restore through the shared arenas when on a unix socket
  bool compare_transports = false;  // sweep: the warm process restores over the socket too

  std::vector<std::string> Args() const {
    std::vector<std::string> a{"--model",      model,
                               "--host",       host,
                               "--port",       std::to_string(port),
                               "--threads",    std::to_string(threads),
                               "--ctx",        std::to_string(ctx),
                               "--batch",      std::to_string(batch),
                               "--block",      std::to_string(block),
                               "--interval",   std::to_string(interval),
                               "--timeout-ms", std::to_string(timeout_ms),
                               "--flash-attn", flash_attn};
    if (!socket.empty()) a.insert(a.end(), {"--socket", socket});
    if (!shm) a.push_back("--no-shm");
    if (compare_transports) a.push_back("--compare-transports");
    return a;
  }
};

void AddCommon(CLI::App* app, Common* c) {
  app->add_option("--model", c->model, "GGUF model file")->required();
  app->add_option("--host", c->host, "prefixd host")->capture_default_str();
  app->add_option("--port", c->port, "prefixd port")->capture_default_str();
  app->add_option("--socket", c->socket, "prefixd unix socket (instead of host and port)");
  app->add_flag("!--no-shm", c->shm,
                "on the unix socket, restore and save over the socket rather than through the "
                "server's shared arenas and memfds (SHM.CALL)");
  app->add_flag("--compare-transports", c->compare_transports,
                "sweep with --socket: the warm process also restores each prefix over the socket "
                "(--no-shm's way), alternating with its own restores, and the CSV's socket_* "
                "columns report it");
  app->add_option("--threads", c->threads, "llama.cpp threads")->capture_default_str();
  app->add_option("--ctx", c->ctx, "context size (0: what the workload needs)")
      ->capture_default_str();
  app->add_option("--batch", c->batch, "llama.cpp batch and micro-batch size")
      ->capture_default_str();
  app->add_option("--block", c->block, "tokens per K/V block in prefixd")->capture_default_str();
  app->add_option("--interval", c->interval, "recurrent checkpoint every N prompt tokens")
      ->capture_default_str();
  app->add_option("--timeout-ms", c->timeout_ms, "connect and I/O timeout towards prefixd")
      ->capture_default_str();
  app->add_option("--flash-attn", c->flash_attn, "llama.cpp flash attention: auto, on, off")
      ->capture_default_str();
}

// The model, its context and the cache over a fresh connection.
struct Engine {
  std::unique_ptr<Runner> runner;
  std::optional<PromptCache> cache;
  std::optional<PromptCache> socket_cache;  // --compare-transports: restores over the socket
};

Result<Engine> OpenEngine(const Common& c, uint32_t n_ctx) {
  Engine e;
  RunnerOptions ro;
  ro.model_path = c.model;
  ro.n_ctx = c.ctx != 0 ? c.ctx : n_ctx;
  ro.n_batch = c.batch;
  ro.threads = c.threads;
  ro.flash_attn = c.flash_attn;
  PREFIXD_ASSIGN_OR_RETURN(e.runner, Runner::Load(ro));
  ClientOptions co;
  co.connect_timeout = std::chrono::milliseconds(c.timeout_ms);
  co.io_timeout = std::chrono::milliseconds(c.timeout_ms);
  PREFIXD_ASSIGN_OR_RETURN(std::string model_hash, HashModelFile(c.model));
  const ModelIdentity identity = IdentityFor(model_hash, e.runner->params());
  auto open = [&](bool shared_memory) -> Result<PromptCache> {
    PREFIXD_ASSIGN_OR_RETURN(Client client, c.socket.empty() ? Client::Connect(c.host, c.port, co)
                                                             : Client::ConnectUnix(c.socket, co));
    CacheOptions options;
    options.block_size = c.block;
    options.checkpoint_interval = c.interval;
    options.shared_memory = shared_memory;
    return PromptCache::Open(e.runner->ctx(), e.runner->params(), std::move(client), identity,
                             options);
  };
  PREFIXD_ASSIGN_OR_RETURN(PromptCache cache, open(c.shm));
  if (c.compare_transports) {
    PREFIXD_ASSIGN_OR_RETURN(PromptCache socket_cache, open(false));
    e.socket_cache.emplace(std::move(socket_cache));
  }
  e.cache.emplace(std::move(cache));
  return e;
}

// The warm process, spawned with pipes on its standard input and output: one JSON line per
// request and per answer.
class WarmProcess {
 public:
  static Result<WarmProcess> Spawn(const Common& c, uint32_t n_ctx) {
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
      return Status::IoError("pipe");
    }
    std::vector<std::string> args{"/proc/self/exe", "warm", "--workload-ctx",
                                  std::to_string(n_ctx)};
    const std::vector<std::string> common = c.Args();
    args.insert(args.end(), common.begin(), common.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    if (rc != 0) {
      close(to_child[1]);
      close(from_child[0]);
      return Status::IoError("spawning the warm process failed");
    }
    WarmProcess w;
    w.pid_ = pid;
    w.in_ = fdopen(to_child[1], "w");
    w.out_ = fdopen(from_child[0], "r");
    return w;
  }

  WarmProcess() = default;
  WarmProcess(WarmProcess&& o) noexcept : pid_(o.pid_), in_(o.in_), out_(o.out_) {
    o.pid_ = 0, o.in_ = nullptr, o.out_ = nullptr;
  }
  WarmProcess& operator=(WarmProcess&& o) noexcept {
    if (this != &o) {
      Close();
      pid_ = std::exchange(o.pid_, 0);
      in_ = std::exchange(o.in_, nullptr);
      out_ = std::exchange(o.out_, nullptr);
    }
    return *this;
  }
  ~WarmProcess() { Close(); }

  Result<Json> Ask(const Json& request) {
    const std::string line = request.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), in_) != line.size() || std::fflush(in_) != 0) {
      return Status::IoError("the warm process is gone");
    }
    std::string answer;
    for (int ch; (ch = std::fgetc(out_)) != EOF && ch != '\n';)
      answer.push_back(static_cast<char>(ch));
    if (answer.empty()) return Status::IoError("the warm process answered nothing");
    Json j = Json::parse(answer, nullptr, false);
    if (j.is_discarded()) return Status::ProtocolError("the warm process answered: " + answer);
    if (j.contains("error")) return Status::Internal(j["error"].get<std::string>());
    return j;
  }

 private:
  // Closing its input ends the warm process, which is then reaped.
  void Close() {
    if (in_ != nullptr) fclose(in_);
    if (out_ != nullptr) fclose(out_);
    if (pid_ > 0) {
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    pid_ = 0, in_ = nullptr, out_ = nullptr;
  }

  pid_t pid_ = 0;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

// This process's engine and the warm process, both with a context of at least `tokens`.
struct Session {
  Engine engine;
  WarmProcess warm;
};

Result<Session> StartSession(const Common& c, uint64_t tokens) {
  const auto n_ctx = static_cast<uint32_t>((tokens + 255) / 256 * 256);
  Session s;
  PREFIXD_ASSIGN_OR_RETURN(s.engine, OpenEngine(c, n_ctx));
  PREFIXD_ASSIGN_OR_RETURN(s.warm, WarmProcess::Spawn(c, n_ctx));
  return s;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "prefixd-llama: %s\n", st.ToString().c_str());
  return 1;
}

// --- warm: restore, decode the rest, answer ---

int RunWarm(const Common& c, uint32_t n_ctx) {
  Result<Engine> engine = OpenEngine(c, n_ctx);
  auto answer = [](const Json& j) {
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  };
  if (!engine.ok()) {
    answer(Json{{"error", engine.status().ToString()}});
    return 1;
  }
  Runner& runner = *engine->runner;
  PromptCache& cache = *engine->cache;
  std::string line;
  while (std::getline(std::cin, line)) {
    const Json request = Json::parse(line, nullptr, false);
    if (request.is_discarded()) break;
    const std::vector<llama_token> tokens = request["tokens"].get<std::vector<llama_token>>();
    const int greedy = request.value("greedy", 0);
    // With runs > 1 the restore (and the slot file's load) is repeated and the last run is
    // reported, as a long-running server sees it; the first run's times come beside it (it also
    // pays for faulting in the memory the state is assembled in).
    const int runs = std::max(1, request.value("runs", 1));
    Json out;
    for (int run = 0; run < runs; ++run) {
      const bool first = run == 0;
      if (request.contains("file")) {
        // llama.cpp's own slot file of the same prefix, for comparison (page cache warm).
        runner.Clear(0);
        std::vector<llama_token> file_tokens(tokens.size());
        size_t n_file = 0;
        const auto start = Clock::now();
        const size_t read =
            llama_state_seq_load_file(runner.ctx(), request["file"].get<std::string>().c_str(), 0,
                                      file_tokens.data(), file_tokens.size(), &n_file);
        out[first ? "first_file_load_ms" : "file_load_ms"] = MsSince(start);
        out["file_loaded"] = read > 0;
        runner.Clear(0);
      }
      if (engine->socket_cache) {
        // The same restore over the socket, just before this run's own.
        RestoreReport over_socket;
        engine->socket_cache->Restore(0, tokens, &over_socket);
        out["socket_restored"] = over_socket.restored;
        out["socket_fetch_ms"] = over_socket.fetch_ms;
        out["socket_restore_ms"] = over_socket.match_ms + over_socket.fetch_ms +
                                   over_socket.assemble_ms + over_socket.load_ms;
      }
      const auto start = Clock::now();
      RestoreReport report;
      const uint64_t restored = cache.Restore(0, tokens, &report);
      const auto suffix_start = Clock::now();
      if (Status st = runner.Decode(0, tokens, restored, tokens.size()); !st.ok()) {
        answer(Json{{"error", st.ToString()}});
        return 1;
      }
      if (first) {
        out["first_restore_ms"] =
            report.match_ms + report.fetch_ms + report.assemble_ms + report.load_ms;
        out["first_warm_ms"] = MsSince(start);
      }
      out["suffix_ms"] = MsSince(suffix_start);
      out["warm_ms"] = MsSince(start);
      out["restored"] = restored;
      out["matched_blocks"] = report.matched_blocks;
      out["bytes"] = report.bytes;
      out["match_ms"] = report.match_ms;
      out["fetch_ms"] = report.fetch_ms;
      out["assemble_ms"] = report.assemble_ms;
      out["load_ms"] = report.load_ms;
      out["miss_reason"] = report.miss_reason;
      out["shm"] = report.shared_memory;
      out["mapped_bytes"] = report.mapped_bytes;
    }
    if (runs == 1 && out.contains("first_file_load_ms"))
      out["file_load_ms"] = out["first_file_load_ms"];
    out["digest"] = runner.LogitsDigest();
    Result<std::vector<llama_token>> next = runner.Greedy(0, tokens.size(), greedy);
    if (!next.ok()) {
      answer(Json{{"error", next.status().ToString()}});
      return 1;
    }
    out["greedy"] = *next;
    answer(out);
  }
  return 0;
}

int CountEqual(const std::vector<llama_token>& a, const std::vector<llama_token>& b) {
  int n = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] == b[i];
  return n;
}

void WriteFile(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream(path) << text;
}

// --- chat ---

struct ChatArgs {
  std::string workload = "multiturn";
  int turns = 8;
  uint32_t system_tokens = 256;
  uint32_t user_tokens = 64;
  uint32_t reply_tokens = 32;
  int agree_tokens = 64;
  uint64_t seed = 1;
  bool verify = true;
  std::string csv, chart;
};

// The prompts of a workload, built as the turns go (a reply comes from the cold run's greedy
// continuation).
class Conversation {
 public:
  Conversation(const ChatArgs& a, int32_t vocab)
      : args_(a), vocab_(vocab), system_(RandomTokens(a.seed, a.system_tokens, vocab)) {
    ends_.push_back(system_);
  }

  std::vector<llama_token> Prompt(int turn) {
    std::vector<llama_token> base;
    if (args_.workload == "fanout") {
      base = system_;
    } else if (args_.workload == "branch") {
      base = ends_[static_cast<size_t>(turn) / 2];
    } else {
      base = ends_.back();
    }
    const std::vector<llama_token> user = RandomTokens(
        args_.seed * 1000 + static_cast<uint64_t>(turn) + 1, args_.user_tokens, vocab_);
    base.insert(base.end(), user.begin(), user.end());
    return base;
  }

  // Counts the prompt's tokens that no earlier prompt had at the same place (a prefix trie).
  void Prompted(std::span<const llama_token> prompt) {
    size_t node = 0;
    for (llama_token t : prompt) {
      auto [it, added] = trie_.try_emplace({node, t}, trie_.size() + 1);
      unique_ += added;
      node = it->second;
    }
  }
  uint64_t UniquePromptTokens() const { return unique_; }

  void Replied(std::vector<llama_token> prompt, std::span<const llama_token> reply) {
    prompt.insert(prompt.end(), reply.begin(), reply.end());
    ends_.push_back(std::move(prompt));
  }

 private:
  const ChatArgs& args_;
  const int32_t vocab_;
  const std::vector<llama_token> system_;
  std::vector<std::vector<llama_token>> ends_;  // the conversation at the end of each turn
  std::map<std::pair<size_t, llama_token>, size_t> trie_;  // (node, token) -> child node
  uint64_t unique_ = 0;
};

int RunChat(const Common& c, const ChatArgs& a) {
  if (a.workload != "multiturn" && a.workload != "fanout" && a.workload != "branch") {
    return Fail(Status::InvalidArgument("--workload is multiturn, fanout or branch"));
  }
  // Sized from the longest prompt a workload can build (multiturn's last).
  const uint64_t longest = a.system_tokens + uint64_t{a.user_tokens + a.reply_tokens} *
                                                 static_cast<uint64_t>(std::max(a.turns, 0));
  Result<Session> session = StartSession(c, longest + static_cast<uint64_t>(a.agree_tokens));
  if (!session.ok()) return Fail(session.status());
  Runner& runner = *session->engine.runner;
  PromptCache& cache = *session->engine.cache;
  WarmProcess* warm = &session->warm;
  std::fprintf(stderr, "prefixd-llama chat: %s, %d turns of %s, namespace %s\n", c.model.c_str(),
               a.turns, a.workload.c_str(), cache.name().c_str());

  Conversation conversation(a, runner.vocab());
  std::vector<ChatRow> rows;
  ProgressBar progress(a.turns);
  bool all_good = true;
  for (int turn = 1; turn <= a.turns; ++turn) {
    progress.Update(turn - 1, "turn " + std::to_string(turn));
    const std::vector<llama_token> prompt = conversation.Prompt(turn);
    conversation.Prompted(prompt);
    ChatRow row;
    row.turn = turn;
    row.prompt_tokens = prompt.size();

    // Warm first, in the other process: what the turns before left in the server.
    Result<Json> w = warm->Ask(Json{{"tokens", prompt}, {"greedy", a.agree_tokens}});
    if (!w.ok()) return Fail(w.status());
    row.warm_ttft_ms = (*w)["warm_ms"].get<double>();
    row.matched_tokens = (*w)["restored"].get<uint64_t>();
    row.prefilled_tokens = row.prompt_tokens - row.matched_tokens;

    // Cold, as llama.cpp prefills without a cache: the whole prompt in batches of n_batch.
    runner.Clear(0);
    auto start = Clock::now();
    if (Status st = runner.Decode(0, prompt, 0, prompt.size()); !st.ok()) return Fail(st);
    row.cold_ttft_ms = MsSince(start);
    const int continuation = std::max<int>(a.agree_tokens, static_cast<int>(a.reply_tokens));
    Result<std::vector<llama_token>> cold_tokens = runner.Greedy(0, prompt.size(), continuation);
    if (!cold_tokens.ok()) return Fail(cold_tokens.status());

    // Then saved through the cache for later turns (the prefill again, in block-sized chunks).
    runner.Clear(0);
    SaveReport saved;
    start = Clock::now();
    if (Status st = cache.Prefill(0, prompt, 0, &saved); !st.ok()) return Fail(st);
    row.store_prefill_ms = MsSince(start);
    row.block_bytes_stored = saved.block_bytes;
    row.tail_bytes_stored = saved.tail_bytes;
    row.state_bytes_stored = saved.state_bytes;
    const std::vector<llama_token> warm_tokens = (*w)["greedy"].get<std::vector<llama_token>>();
    row.total_tokens = a.agree_tokens;
    row.agreeing_tokens = CountEqual(
        std::vector<llama_token>(cold_tokens->begin(), cold_tokens->begin() + a.agree_tokens),
        warm_tokens);

    // The same split, cold: the restored length decoded as the cached run did, then the rest.
    if (a.verify) {
      runner.Clear(0);
      const uint64_t n = row.matched_tokens;
      if (n > 0) {
        if (Status st = cache.Prefill(0, std::span(prompt).first(n), 0, nullptr,
                                      PromptCache::Mode::kDecodeOnly);
            !st.ok()) {
          return Fail(st);
        }
      }
      if (Status st = runner.Decode(0, prompt, n, prompt.size()); !st.ok()) return Fail(st);
      row.states_bitexact = runner.LogitsDigest() == (*w)["digest"].get<std::string>();
    }
    all_good =
        all_good && row.agreeing_tokens == row.total_tokens && (!a.verify || row.states_bitexact);
    conversation.Replied(prompt, std::span(*cold_tokens).first(a.reply_tokens));
    rows.push_back(row);
  }
  progress.Finish();
  const std::string csv = ChatCsv(rows);
  std::fputs(csv.c_str(), stdout);
  WriteFile(a.csv, csv);
  WriteFile(a.chart, ChatSvg(rows, "prefixd-llama chat (" + a.workload + "): time to first token"));
  const CacheStats& stats = cache.stats();
  std::fprintf(stderr, "saved %llu blocks and %llu checkpoints; %llu failures%s\n",
               static_cast<unsigned long long>(stats.blocks_stored),
               static_cast<unsigned long long>(stats.checkpoints_stored),
               static_cast<unsigned long long>(stats.failures),
               all_good ? "" : "; NOT every turn agreed with the cold run");
  // What deduplication bought: the K/V sent against the K/V of the distinct prompt tokens (a
  // token shared by several prompts counted once).
  uint64_t blocks = 0, tails = 0, states = 0;
  for (const ChatRow& r : rows) {
    blocks += r.block_bytes_stored, tails += r.tail_bytes_stored, states += r.state_bytes_stored;
  }
  const uint64_t unique_bytes = conversation.UniquePromptTokens() * cache.KvBytesPerToken();
  if (unique_bytes > 0) {
    std::fprintf(stderr,
                 "K/V stored: %llu bytes in blocks + %llu in checkpoint tails = %.3fx the K/V of "
                 "the %llu distinct prompt tokens (%llu bytes); recurrent state: %llu bytes\n",
                 static_cast<unsigned long long>(blocks), static_cast<unsigned long long>(tails),
                 static_cast<double>(blocks + tails) / static_cast<double>(unique_bytes),
                 static_cast<unsigned long long>(conversation.UniquePromptTokens()),
                 static_cast<unsigned long long>(unique_bytes),
                 static_cast<unsigned long long>(states));
  }
  return all_good ? 0 : 2;
}

// --- sweep ---

struct SweepArgs {
  std::vector<uint64_t> lengths{512, 2048, 8192, 32768};
  int runs = 2;
  bool single_prefill = false;
  uint32_t suffix_tokens = 16;
  int agree_tokens = 64;
  uint64_t seed = 7;
  std::string csv, chart;
};

int RunSweep(const Common& c, const SweepArgs& a) {
  uint64_t longest = 0;
  for (uint64_t l : a.lengths) longest = std::max(longest, l);
  Result<Session> session =
      StartSession(c, longest + a.suffix_tokens + static_cast<uint64_t>(a.agree_tokens));
  if (!session.ok()) return Fail(session.status());
  Runner& runner = *session->engine.runner;
  PromptCache& cache = *session->engine.cache;
  WarmProcess* warm = &session->warm;
  const std::string slot_file =
      (std::filesystem::temp_directory_path() / ("prefixd-llama-slot-" + std::to_string(getpid())))
          .string();
  std::vector<SweepRow> rows;
  ProgressBar progress(static_cast<int>(a.lengths.size()));
  bool all_good = true;
  for (size_t i = 0; i < a.lengths.size(); ++i) {
    const uint64_t length = a.lengths[i];
    progress.Update(static_cast<int>(i), std::to_string(length) + " tokens");
    std::vector<llama_token> prompt = RandomTokens(a.seed + length, length, runner.vocab());
    const std::vector<llama_token> suffix =
        RandomTokens(a.seed + length + 1, a.suffix_tokens, runner.vocab());
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    SweepRow row;
    row.prefix_tokens = length;
    row.suffix_tokens = a.suffix_tokens;

    // Cold, as llama.cpp prefills without a cache: the whole prompt in batches of n_batch. (With
    // --single-prefill, the saving prefill below stands in for it, to halve a long sweep.)
    auto start = Clock::now();
    std::optional<std::vector<llama_token>> cold_tokens;
    if (!a.single_prefill) {
      runner.Clear(0);
      if (Status st = runner.Decode(0, prompt, 0, prompt.size()); !st.ok()) return Fail(st);
      row.cold_ttft_ms = MsSince(start);
      Result<std::vector<llama_token>> greedy = runner.Greedy(0, prompt.size(), a.agree_tokens);
      if (!greedy.ok()) return Fail(greedy.status());
      cold_tokens = std::move(*greedy);
    }

    // The prefix saved through the cache (checkpoint at its end) and as llama.cpp's slot file;
    // then the suffix: the cold run split where the warm one restores, for the bit-exact check.
    runner.Clear(0);
    SaveReport saved;
    start = Clock::now();
    if (Status st = cache.Prefill(0, std::span(prompt).first(length), 0, &saved,
                                  PromptCache::Mode::kPrefix);
        !st.ok()) {
      return Fail(st);
    }
    row.store_prefill_ms = MsSince(start);
    row.save_ms = saved.ms;
    row.save_shared_memory = saved.shared_memory;
    llama_state_seq_save_file(runner.ctx(), slot_file.c_str(), 0, prompt.data(), length);
    start = Clock::now();
    if (Status st = runner.Decode(0, prompt, length, prompt.size()); !st.ok()) return Fail(st);
    const std::string cold_digest = runner.LogitsDigest();
    if (a.single_prefill) {
      // The prefill's own time without its stores, then the suffix.
      row.cold_ttft_ms = row.store_prefill_ms - saved.ms + MsSince(start);
      Result<std::vector<llama_token>> greedy = runner.Greedy(0, prompt.size(), a.agree_tokens);
      if (!greedy.ok()) return Fail(greedy.status());
      cold_tokens = std::move(*greedy);
    }

    Result<Json> w = warm->Ask(Json{
        {"tokens", prompt}, {"greedy", a.agree_tokens}, {"file", slot_file}, {"runs", a.runs}});
    if (!w.ok()) return Fail(w.status());
    row.warm_ttft_ms = (*w)["warm_ms"].get<double>();
    row.restored_tokens = (*w)["restored"].get<uint64_t>();
    row.state_bytes = (*w)["bytes"].get<uint64_t>();
    row.match_ms = (*w)["match_ms"].get<double>();
    row.fetch_ms = (*w)["fetch_ms"].get<double>();
    row.assemble_ms = (*w)["assemble_ms"].get<double>();
    row.load_ms = (*w)["load_ms"].get<double>();
    row.shared_memory = (*w)["shm"].get<bool>();
    if (w->contains("socket_fetch_ms")) {
      row.socket_fetch_ms = (*w)["socket_fetch_ms"].get<double>();
      row.socket_restore_ms = (*w)["socket_restore_ms"].get<double>();
      all_good = all_good && (*w)["socket_restored"].get<uint64_t>() == length;
    }
    row.suffix_ms = (*w)["suffix_ms"].get<double>();
    row.file_load_ms = (*w)["file_load_ms"].get<double>();
    row.first_restore_ms = (*w)["first_restore_ms"].get<double>();
    row.first_file_load_ms = (*w)["first_file_load_ms"].get<double>();
    row.states_bitexact = (*w)["digest"].get<std::string>() == cold_digest;
    row.total_tokens = a.agree_tokens;
    row.agreeing_tokens = CountEqual(*cold_tokens, (*w)["greedy"].get<std::vector<llama_token>>());
    all_good = all_good && row.states_bitexact && row.agreeing_tokens == row.total_tokens &&
               row.restored_tokens == length;
    rows.push_back(row);
  }
  progress.Finish();
  std::filesystem::remove(slot_file);
  const std::string csv = SweepCsv(rows);
  std::fputs(csv.c_str(), stdout);
  WriteFile(a.csv, csv);
  WriteFile(a.chart, SweepSvg(rows, "prefixd-llama sweep: time to first token"));
  if (!all_good) std::fprintf(stderr, "NOT every length restored fully and agreed with cold\n");
  return all_good ? 0 : 2;
}

}  // namespace
}  // namespace prefixd::llama

int main(int argc, char** argv) {
  using namespace prefixd::llama;
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{"prefixd-llama: a persistent, shared prompt cache for llama.cpp, proven on it"};
  app.require_subcommand(1);

  Common chat_common;
  ChatArgs chat;
  CLI::App* chat_cmd = app.add_subcommand("chat", "A conversation: cold against warm per turn");
  AddCommon(chat_cmd, &chat_common);
  chat_cmd->add_option("--workload", chat.workload, "multiturn, fanout or branch")
      ->capture_default_str();
  chat_cmd->add_option("--turns", chat.turns, "turns")->capture_default_str();
  chat_cmd->add_option("--system-tokens", chat.system_tokens, "shared opening tokens")
      ->capture_default_str();
  chat_cmd->add_option("--user-tokens", chat.user_tokens, "new tokens per turn")
      ->capture_default_str();
  chat_cmd->add_option("--reply-tokens", chat.reply_tokens, "reply tokens kept per turn")
      ->capture_default_str();
  chat_cmd->add_option("--agree-tokens", chat.agree_tokens, "greedy tokens compared")
      ->capture_default_str();
  chat_cmd->add_option("--seed", chat.seed, "prompt seed")->capture_default_str();
  chat_cmd->add_flag("!--no-verify", chat.verify, "skip the same-split cold reference");
  chat_cmd->add_option("--csv", chat.csv, "write the rows here");
  chat_cmd->add_option("--chart", chat.chart, "write an SVG chart here");

  Common sweep_common;
  SweepArgs sweep;
  CLI::App* sweep_cmd = app.add_subcommand("sweep", "Cold against warm per prefix length");
  AddCommon(sweep_cmd, &sweep_common);
  sweep_cmd->add_option("--lengths", sweep.lengths, "prefix lengths")
      ->delimiter(',')
      ->capture_default_str();
  sweep_cmd->add_option("--suffix-tokens", sweep.suffix_tokens, "tokens after the prefix")
      ->capture_default_str();
  sweep_cmd->add_option("--agree-tokens", sweep.agree_tokens, "greedy tokens compared")
      ->capture_default_str();
  sweep_cmd->add_option("--seed", sweep.seed, "prompt seed")->capture_default_str();
  sweep_cmd
      ->add_option("--runs", sweep.runs,
                   "restores per length in the warm process; the last is reported (and the first "
                   "beside it)")
      ->capture_default_str();
  sweep_cmd->add_flag("--single-prefill", sweep.single_prefill,
                      "time cold as the saving prefill (block-sized chunks, stores excluded) "
                      "instead of a prefill of its own, and compare tokens with it");
  sweep_cmd->add_option("--csv", sweep.csv, "write the rows here");
  sweep_cmd->add_option("--chart", sweep.chart, "write an SVG chart here");

  Common warm_common;
  uint32_t warm_ctx = 4096;
  CLI::App* warm_cmd =
      app.add_subcommand("warm", "The restoring process of chat and sweep (JSON lines on stdin)");
  AddCommon(warm_cmd, &warm_common);
  warm_cmd->add_option("--workload-ctx", warm_ctx, "context size the driver computed");
  warm_cmd->group("");  // internal

  CLI11_PARSE(app, argc, argv);
  if (chat_cmd->parsed()) return RunChat(chat_common, chat);
  if (sweep_cmd->parsed()) return RunSweep(sweep_common, sweep);
  return RunWarm(warm_common, warm_ctx);
}
