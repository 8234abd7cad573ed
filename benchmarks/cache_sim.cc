// prefixd-cache-sim: hit ratios of exact eviction policies on a Zipf trace of whole sessions, the
// simulation half of the cache benchmark (benchmarks/cache_sim.py replays the same trace against
// redis-server). It draws sessions of 16 layers each until they total 4x the budget (layer
// sizes from jemalloc's large size classes, 64 KiB to 1 MiB, so 1-16 MiB sessions), then a
// Zipf(0.99) sequence of session requests. A request hits when every layer is cached; on a miss
// the client stores the whole session again. Policies, each on store::EvictionIndex:
//   lru, lfu          whole sessions as entries (what prefixd's keyspace evicts)
//   layer-lru         every layer its own entry, exact LRU (what per-layer keys give even with
//                     an exact policy; a request can then find a partial session)
//
//   prefixd-cache-sim --budget-mb 128 --requests 4000 --seed 1 [--reserve-bytes N]
//                     [--trace-out FILE]
//   prefixd-cache-sim --index-cost 1000000     # the index's ns per operation and bytes per entry
// --reserve-bytes is taken off the budget (redis-server's own used_memory at start, so both see
// the same room for data). Prints one JSON object per policy on stdout.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "store/eviction_index.h"

namespace prefixd::bench {
namespace {

constexpr int kLayers = 16;
// jemalloc's large size classes from 64 KiB to 1 MiB; a layer is a class less 64 bytes, so
// redis-server's string header fits and it wastes no memory on rounding.
constexpr uint64_t kLayerClasses[] = {64,  80,  96,  112, 128, 160, 192, 224, 256,
                                      320, 384, 448, 512, 640, 768, 896, 1024};
constexpr uint64_t kLayerSlack = 64;

struct Trace {
  std::vector<uint64_t> layer_bytes;  // per session
  std::vector<uint32_t> requests;     // session ids
};

Trace MakeTrace(uint64_t budget, uint64_t requests, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Trace trace;
  uint64_t total = 0;
  while (total < 4 * budget) {
    const uint64_t layer = kLayerClasses[rng() % std::size(kLayerClasses)] * 1024 - kLayerSlack;
    trace.layer_bytes.push_back(layer);
    total += layer * kLayers;
  }
  const size_t sessions = trace.layer_bytes.size();
  // Zipf(0.99) over popularity ranks; ranks are dealt to sessions at random, so popularity and
  // size are independent.
  std::vector<double> cdf(sessions);
  double sum = 0;
  for (size_t rank = 0; rank < sessions; ++rank) {
    sum += 1.0 / std::pow(double(rank + 1), 0.99);
    cdf[rank] = sum;
  }
  std::vector<uint32_t> session_of_rank(sessions);
  std::iota(session_of_rank.begin(), session_of_rank.end(), 0);
  std::shuffle(session_of_rank.begin(), session_of_rank.end(), rng);
  std::uniform_real_distribution<double> uniform(0.0, sum);
  for (uint64_t i = 0; i < requests; ++i) {
    const size_t rank = std::upper_bound(cdf.begin(), cdf.end(), uniform(rng)) - cdf.begin();
    trace.requests.push_back(session_of_rank[std::min(rank, sessions - 1)]);
  }
  return trace;
}

struct Result {
  uint64_t hits = 0, misses = 0, partial = 0, evictions = 0;
};

// A byte-budgeted cache of entries ordered by one EvictionIndex.
class Cache {
 public:
  Cache(store::EvictionPolicy policy, uint64_t budget, size_t entries)
      : index_(policy),
        budget_(budget),
        handle_(entries, store::EvictionIndex::kNoHandle),
        bytes_(entries, 0) {}

  bool Contains(size_t id) const { return handle_[id] != store::EvictionIndex::kNoHandle; }
  void Touch(size_t id, uint64_t now) { index_.Touch(handle_[id], now); }
  // Makes room, then caches `id`; returns the number of entries evicted.
  uint64_t Insert(size_t id, uint64_t bytes, uint64_t now) {
    uint64_t evicted = 0;
    while (used_ + bytes > budget_) {
      const auto victim = index_.PickVictim();
      if (!victim) std::abort();
      const size_t gone = owner_[victim->handle];
      index_.Erase(victim->handle);
      handle_[gone] = store::EvictionIndex::kNoHandle;
      used_ -= bytes_[gone];
      ++evicted;
    }
    const auto h = index_.Insert(now);
    if (owner_.size() <= h) owner_.resize(h + 1);
    owner_[h] = id;
    handle_[id] = h;
    bytes_[id] = bytes;
    used_ += bytes;
    return evicted;
  }

 private:
  store::EvictionIndex index_;
  uint64_t budget_, used_ = 0;
  std::vector<store::EvictionIndex::Handle> handle_;
  std::vector<uint64_t> bytes_;
  std::vector<size_t> owner_;
};

Result RunWhole(const Trace& trace, store::EvictionPolicy policy, uint64_t budget) {
  Cache cache(policy, budget, trace.layer_bytes.size());
  Result r;
  uint64_t now = 0;
  for (uint32_t s : trace.requests) {
    now += 1000;  // one request a millisecond of virtual time
    if (cache.Contains(s)) {
      ++r.hits;
      cache.Touch(s, now);
    } else {
      ++r.misses;
      r.evictions += cache.Insert(s, trace.layer_bytes[s] * kLayers, now);
    }
  }
  return r;
}

Result RunPerLayer(const Trace& trace, uint64_t budget) {
  Cache cache(store::EvictionPolicy::kAllKeysLru, budget, trace.layer_bytes.size() * kLayers);
  Result r;
  uint64_t now = 0;
  for (uint32_t s : trace.requests) {
    now += 1000;
    int present = 0;
    for (int l = 0; l < kLayers; ++l) {
      const size_t id = size_t{s} * kLayers + l;
      if (cache.Contains(id)) {
        ++present;
        cache.Touch(id, ++now);
      }
    }
    if (present == kLayers) {
      ++r.hits;
      continue;
    }
    ++r.misses;
    if (present > 0) ++r.partial;
    for (int l = 0; l < kLayers; ++l) {  // the client stores the whole session again
      const size_t id = size_t{s} * kLayers + l;
      if (cache.Contains(id)) {
        cache.Touch(id, ++now);
      } else {
        r.evictions += cache.Insert(id, trace.layer_bytes[s], ++now);
      }
    }
  }
  return r;
}

// The index's own cost: ns per insert, touch (random entries) and pick-and-erase over `n`
// entries, and its bytes per entry.
void PrintIndexCost(store::EvictionPolicy policy, uint32_t n) {
  using Clock = std::chrono::steady_clock;
  auto ns_per = [](Clock::time_point start, uint64_t ops) {
    return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / ops;
  };
  store::EvictionIndex index(policy);
  std::vector<store::EvictionIndex::Handle> handles(n);
  uint64_t now = 0;
  auto t = Clock::now();
  for (uint32_t i = 0; i < n; ++i) handles[i] = index.Insert(++now);
  const double insert_ns = ns_per(t, n);
  const size_t bytes = index.MemoryBytes();
  std::mt19937_64 rng(5);
  std::vector<uint32_t> order(n);
  for (auto& o : order) o = uint32_t(rng() % n);
  t = Clock::now();
  for (uint32_t i : order) index.Touch(handles[i], ++now);
  const double touch_ns = ns_per(t, n);
  t = Clock::now();
  for (uint32_t i = 0; i < n; ++i) index.Erase(index.PickVictim()->handle);
  const double evict_ns = ns_per(t, n);
  std::printf(
      "{\"index\": \"%s\", \"entries\": %u, \"bytes_per_entry\": %.1f, \"insert_ns\": %.0f, "
      "\"touch_ns\": %.0f, \"pick_and_erase_ns\": %.0f}\n",
      std::string(store::EvictionPolicyName(policy)).c_str(), n, double(bytes) / n, insert_ns,
      touch_ns, evict_ns);
}

void Print(const char* policy, const Result& r) {
  const double n = double(r.hits + r.misses);
  std::printf(
      "{\"policy\": \"%s\", \"requests\": %.0f, \"hits\": %llu, \"hit_ratio\": %.4f, "
      "\"partial\": %llu, \"partial_ratio\": %.4f, \"evictions\": %llu}\n",
      policy, n, (unsigned long long)r.hits, r.hits / n, (unsigned long long)r.partial,
      r.partial / n, (unsigned long long)r.evictions);
}

}  // namespace
}  // namespace prefixd::bench

int main(int argc, char** argv) {
  using namespace prefixd::bench;
  uint64_t budget_mb = 128, requests = 4000, seed = 1, reserve = 0, index_entries = 0;
  std::string trace_out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--budget-mb") {
      budget_mb = std::strtoull(value, nullptr, 10);
    } else if (flag == "--requests") {
      requests = std::strtoull(value, nullptr, 10);
    } else if (flag == "--seed") {
      seed = std::strtoull(value, nullptr, 10);
    } else if (flag == "--reserve-bytes") {
      reserve = std::strtoull(value, nullptr, 10);
    } else if (flag == "--index-cost") {
      index_entries = std::strtoull(value, nullptr, 10);
    } else if (flag == "--trace-out") {
      trace_out = value;
    } else {
      std::fprintf(stderr, "prefixd-cache-sim: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if ((argc - 1) % 2 != 0 || budget_mb == 0 || requests == 0) {
    std::fprintf(stderr,
                 "usage: prefixd-cache-sim --budget-mb MB --requests N --seed S "
                 "[--reserve-bytes N] [--trace-out FILE]\n");
    return 2;
  }
  if (index_entries > 0) {
    for (auto policy :
         {prefixd::store::EvictionPolicy::kAllKeysLru, prefixd::store::EvictionPolicy::kAllKeysLfu,
          prefixd::store::EvictionPolicy::kAllKeysRandom}) {
      PrintIndexCost(policy, uint32_t(index_entries));
    }
    return 0;
  }
  const uint64_t budget = budget_mb << 20;
  const Trace trace = MakeTrace(budget, requests, seed);
  if (!trace_out.empty()) {
    // Line 1: layers per session; line 2: each session's layer size; line 3: the requests.
    std::ofstream out(trace_out);
    out << kLayers << "\n";
    for (uint64_t b : trace.layer_bytes) out << b << ' ';
    out << "\n";
    for (uint32_t s : trace.requests) out << s << ' ';
    out << "\n";
  }
  const uint64_t room = budget > reserve ? budget - reserve : 0;
  Print("lru", RunWhole(trace, prefixd::store::EvictionPolicy::kAllKeysLru, room));
  Print("lfu", RunWhole(trace, prefixd::store::EvictionPolicy::kAllKeysLfu, room));
  Print("layer-lru", RunPerLayer(trace, room));
  return 0;
}
