// prefixd-prefix-bench: KV.PREFIX.MATCH latency with many stored blocks across many namespaces,
// and what the index costs per block (docs/benchmarks.md, "Prefix index"). Loads --namespaces
// namespaces holding --blocks blocks in all (conversations of --chain blocks each; the smallest
// K/V that a namespace can hold, so memory is the index's), plus one probe namespace holding a
// conversation of the longest prompt with checkpoints at every turn end, then times matches of
// prompts of each --lengths over one warm connection (the lease is released outside the timed
// call). Reports p50/p99/max, and the server's RSS growth per block against the payload: right
// after the load and again once the server's memory reclaimer has had --settle-ms to return
// freed heap (what the argument buffers of the load left behind), next to what the index's own
// accounting (KV.PREFIX.NSINFO index_bytes, INFO used_memory) says.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "prefixd/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using prefixd::Client;
using prefixd::LayerBlob;
using prefixd::PrefixHash;

constexpr uint32_t kBs = 16;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "prefixd-prefix-bench: %s\n", what.c_str());
  std::exit(2);
}

template <typename T>
T OrDie(prefixd::Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what + ": " + r.status().ToString());
  return std::move(r).value();
}

// A "name:value" line of a k:v text reply (INFO, KV.PREFIX.NSINFO), or 0.
uint64_t Field(const std::string& text, const std::string& name) {
  const std::string line = "\n" + name + ":";
  const size_t at = ("\n" + text).find(line);
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + line.size() - 1));
}

uint64_t UsedMemory(Client& c) {
  return Field(OrDie(c.Command({"INFO", "memory"}), "INFO").str, "used_memory");
}

uint64_t ServerRssBytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

std::vector<uint32_t> Tokens(size_t n, uint32_t seed) {
  std::vector<uint32_t> t(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& v : t) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = static_cast<uint32_t>(x % 150000);
  }
  return t;
}

// Stores a conversation's blocks [0, n) in pieces of at most 4096 blocks.
void StoreChain(Client& c, const std::string& ns, const std::vector<PrefixHash>& chain) {
  for (size_t at = 0; at < chain.size(); at += 4096) {
    const size_t n = std::min<size_t>(4096, chain.size() - at);
    std::vector<float> rows(2 * n * kBs, 0.5f);  // ATTN 1, KVDIM 1
    const LayerBlob layer{0, {reinterpret_cast<const uint8_t*>(rows.data()), rows.size() * 4}};
    OrDie(c.PrefixStoreBlocks(ns, at == 0 ? prefixd::kPrefixRoot : chain[at - 1],
                              std::span(chain).subspan(at, n), std::span(&layer, 1)),
          "BSTORE");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int port = 7411, server_pid = 0, samples = 2000, settle_ms = 3000;
  uint64_t namespaces = 10000, blocks = 1000000, chain_blocks = 100;
  std::string lengths_text = "1024,4096,16384,32768";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--port")
      port = std::stoi(v);
    else if (k == "--server-pid")
      server_pid = std::stoi(v);
    else if (k == "--namespaces")
      namespaces = std::stoull(v);
    else if (k == "--blocks")
      blocks = std::stoull(v);
    else if (k == "--chain")
      chain_blocks = std::stoull(v);
    else if (k == "--settle-ms")
      settle_ms = std::stoi(v);
    else if (k == "--samples")
      samples = std::stoi(v);
    else if (k == "--lengths")
      lengths_text = v;
    else
      Die("unknown flag " + k);
  }
  std::vector<size_t> lengths;
  std::stringstream ls(lengths_text);
  for (std::string item; std::getline(ls, item, ',');) lengths.push_back(std::stoull(item));
  const size_t longest = *std::max_element(lengths.begin(), lengths.end());

  Client c = OrDie(Client::Connect("127.0.0.1", port), "connect");
  const uint64_t rss0 = server_pid ? ServerRssBytes(server_pid) : 0;
  const uint64_t used0 = UsedMemory(c);
  const auto load_start = Clock::now();
  uint64_t stored = 0;
  for (uint64_t n = 0; n < namespaces && stored < blocks; ++n) {
    const std::string ns = "{bench:" + std::to_string(n) + "}";
    prefixd::Status st = c.PrefixNamespaceCreate(ns, {kBs, 1, 1, 1, "fp32", 0});
    if (!st.ok()) Die("namespace: " + st.ToString());
    const uint64_t per_ns = (blocks - stored + (namespaces - n) - 1) / (namespaces - n);
    for (uint64_t done = 0, conv = 0; done < per_ns; ++conv) {
      const size_t len = std::min<uint64_t>(chain_blocks, per_ns - done);
      auto tokens = Tokens(len * kBs, static_cast<uint32_t>(n * 1000 + conv));
      StoreChain(c, ns, prefixd::PrefixBlockHashes(tokens, kBs));
      done += len;
    }
    stored += per_ns;
  }
  const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  const uint64_t rss1 = server_pid ? ServerRssBytes(server_pid) : 0;
  const uint64_t used1 = UsedMemory(c);
  const std::string first_info = OrDie(c.Command({"KV.PREFIX.NSINFO", "{bench:0}"}), "NSINFO").str;
  std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
  const uint64_t rss2 = server_pid ? ServerRssBytes(server_pid) : 0;

  // The probe: one conversation as long as the longest prompt, a checkpoint every 512 tokens
  // (its turn ends, 7 tokens into a block), each with one 64-byte state and its tail.
  const std::string probe = "{bench:probe}";
  OrDie(c.Command({"DEL", probe}), "DEL");
  if (!c.PrefixNamespaceCreate(probe, {kBs, 1, 1, 1, "fp32", 0}).ok()) Die("probe namespace");
  const auto tokens = Tokens(longest + kBs, 7);
  const auto chain = prefixd::PrefixBlockHashes(tokens, kBs);
  StoreChain(c, probe, chain);
  std::vector<uint64_t> ends;
  for (uint64_t end = 512 + 7; end < longest; end += 512) {
    ends.push_back(end);
    const std::vector<uint8_t> state(64, 1);
    const LayerBlob s{0, state};
    std::vector<float> tail(2 * (end % kBs), 0.25f);
    const LayerBlob t{0, {reinterpret_cast<const uint8_t*>(tail.data()), tail.size() * 4}};
    const prefixd::PrefixCheckpointParts parts{std::span(&s, 1), std::span(&t, 1)};
    prefixd::Status st =
        c.PrefixStoreCheckpoint(probe, chain[end / kBs - 1], end,
                                prefixd::PrefixPositionHash(tokens, end, kBs, chain), parts);
    if (!st.ok()) Die("checkpoint: " + st.ToString());
  }

  std::printf(
      "stored %llu blocks in %llu namespaces (+ probe: %zu blocks, %zu checkpoints) in "
      "%.1f s\n",
      static_cast<unsigned long long>(stored),
      static_cast<unsigned long long>(std::min(namespaces, stored)), chain.size(), ends.size(),
      load_s);
  const double payload = 2.0 * kBs * 4;  // one block's K/V
  if (server_pid) {
    auto per_block = [&](uint64_t rss) { return double(rss - rss0) / stored; };
    std::printf(
        "server RSS +%.1f MB for those blocks: %.0f bytes per block, of which %.0f K/V payload "
        "-> %.0f bytes of index per block\n",
        (rss1 - rss0) / 1e6, per_block(rss1), payload, per_block(rss1) - payload);
    std::printf(
        "after %d ms (freed heap returned): RSS +%.1f MB, %.0f bytes per block -> %.0f bytes "
        "of index per block\n",
        settle_ms, (rss2 - rss0) / 1e6, per_block(rss2), per_block(rss2) - payload);
  }
  std::printf(
      "accounting: used_memory +%.0f bytes per block (%.0f beyond the payload); {bench:0} "
      "index_bytes %llu for %llu blocks: %.0f per block\n",
      double(used1 - used0) / stored, double(used1 - used0) / stored - payload,
      static_cast<unsigned long long>(Field(first_info, "index_bytes")),
      static_cast<unsigned long long>(Field(first_info, "blocks")),
      double(Field(first_info, "index_bytes")) /
          double(std::max<uint64_t>(1, Field(first_info, "blocks"))));
  // The floor: PING's round trip on the same connection, measured the same way.
  std::vector<double> ping_us;
  for (int i = 0; i < samples; ++i) {
    const auto t = Clock::now();
    if (!c.Ping().ok()) Die("PING");
    ping_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  std::sort(ping_us.begin(), ping_us.end());
  std::printf(
      "\n| prompt tokens | blocks sent | AT candidates | L answered | p50 | p99 | max |\n"
      "|---|---|---|---|---|---|---|\n");
  std::printf("| PING (the round trip alone) | | | | %.0f us | %.0f us | %.0f us |\n",
              ping_us[ping_us.size() / 2], ping_us[ping_us.size() * 99 / 100], ping_us.back());
  for (size_t len : lengths) {
    const std::span<const PrefixHash> blocks_sent = std::span(chain).first(len / kBs);
    std::vector<prefixd::PrefixCandidate> at;
    for (uint64_t e : ends) {
      if (e < len) at.push_back({e, prefixd::PrefixPositionHash(tokens, e, kBs, chain)});
    }
    std::vector<double> us;
    uint64_t answered = 0;
    for (int i = 0; i < samples; ++i) {
      const auto t = Clock::now();
      auto m = OrDie(c.PrefixMatch(probe, blocks_sent, at), "MATCH");
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      answered = m.length;
      OrDie(c.PrefixRelease(probe, m.lease), "RELEASE");
    }
    std::sort(us.begin(), us.end());
    std::printf("| %zu | %zu | %zu | %llu | %.0f us | %.0f us | %.0f us |\n", len,
                blocks_sent.size(), at.size(), static_cast<unsigned long long>(answered),
                us[us.size() / 2], us[us.size() * 99 / 100], us.back());
  }
  return 0;
}
