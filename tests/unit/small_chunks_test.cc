// store::SmallChunks: chunks in 8-byte classes that never overlap, a page's worth per page,
// freed chunks reused, empty pages given back (all but the last open one of a class until
// Trim), and heaps on several threads sharing the page pool.
#include "store/small_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace prefixd::store {
namespace {

constexpr size_t kSlotsPerPage(size_t slot) { return (SmallChunks::kPageBytes - 32) / slot; }

TEST(SmallChunks, SizeClassesStepByEightFromTheSmallest) {
  EXPECT_EQ(SmallChunks::SlotBytes(0), SmallChunks::kSmallest);
  EXPECT_EQ(SmallChunks::SlotBytes(24), 24u);
  EXPECT_EQ(SmallChunks::SlotBytes(25), 32u);
  EXPECT_EQ(SmallChunks::SlotBytes(64), 64u);
  EXPECT_EQ(SmallChunks::SlotBytes(67), 72u);
  EXPECT_EQ(SmallChunks::SlotBytes(SmallChunks::kLargest), SmallChunks::kLargest);
}

TEST(SmallChunks, APageHoldsItsShareOfChunksThatNeverOverlap) {
  SmallChunks chunks;
  constexpr size_t kRequest = 67;  // a 72-byte class
  const size_t per_page = kSlotsPerPage(72);
  std::vector<unsigned char*> held;
  for (size_t i = 0; i < per_page * 3 + 1; ++i) {
    auto* p = static_cast<unsigned char*>(chunks.Allocate(kRequest));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u);
    std::memset(p, static_cast<int>(i % 251), 72);
    held.push_back(p);
  }
  EXPECT_EQ(chunks.pages(), 4u);
  EXPECT_EQ(chunks.bytes_held(), 4 * SmallChunks::kPageBytes);
  std::vector<unsigned char*> sorted = held;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_GE(sorted[i] - sorted[i - 1], 72);
  for (size_t i = 0; i < held.size(); ++i) {
    for (size_t b = 0; b < 72; ++b) ASSERT_EQ(held[i][b], i % 251) << i;
  }
  for (unsigned char* p : held) SmallChunks::Free(p);
  // The last open page of the class stays for the next chunk of its size; Trim gives it back.
  EXPECT_EQ(chunks.pages(), 1u);
  chunks.Trim();
  EXPECT_EQ(chunks.pages(), 0u);
}

TEST(SmallChunks, AFreedChunkIsTheNextOneOfItsClass) {
  SmallChunks chunks;
  void* a = chunks.Allocate(40);
  void* b = chunks.Allocate(40);
  void* other = chunks.Allocate(100);  // another class, another page
  EXPECT_EQ(chunks.pages(), 2u);
  SmallChunks::Free(a);
  EXPECT_EQ(chunks.Allocate(33), a);  // 33 and 40 share the 40-byte class
  SmallChunks::Free(a);
  SmallChunks::Free(b);
  SmallChunks::Free(other);
  chunks.Trim();
  EXPECT_EQ(chunks.pages(), 0u);
}

TEST(SmallChunks, AnEmptiedPageGoesBackWhileItsClassHasAnotherOpenPage) {
  SmallChunks chunks;
  const size_t per_page = kSlotsPerPage(256);
  std::vector<void*> first_page, second_page;
  for (size_t i = 0; i < per_page; ++i) first_page.push_back(chunks.Allocate(256));
  second_page.push_back(chunks.Allocate(256));
  EXPECT_EQ(chunks.pages(), 2u);
  // The first page was full; freeing one chunk opens it, freeing the rest empties it while the
  // second page is still open, so it goes back at once.
  for (void* p : first_page) SmallChunks::Free(p);
  EXPECT_EQ(chunks.pages(), 1u);
  SmallChunks::Free(second_page[0]);
  EXPECT_EQ(chunks.pages(), 1u);  // the class's only open page is kept
  chunks.Trim();
  EXPECT_EQ(chunks.pages(), 0u);
}

// Random allocations and frees of every class against a model of what each chunk holds.
TEST(SmallChunks, RandomChurnKeepsEveryChunksBytes) {
  SmallChunks chunks;
  std::mt19937 rng(7);
  struct Held {
    unsigned char* p;
    size_t size;
    unsigned char fill;
  };
  std::vector<Held> held;
  for (int step = 0; step < 20000; ++step) {
    if (held.empty() || rng() % 3 != 0) {
      const size_t size = rng() % (SmallChunks::kLargest + 1);
      auto* p = static_cast<unsigned char*>(chunks.Allocate(size));
      const auto fill = static_cast<unsigned char>(rng());
      std::memset(p, fill, size);
      held.push_back({p, size, fill});
    } else {
      const size_t i = rng() % held.size();
      for (size_t b = 0; b < held[i].size; ++b) ASSERT_EQ(held[i].p[b], held[i].fill);
      SmallChunks::Free(held[i].p);
      held[i] = held.back();
      held.pop_back();
    }
  }
  for (const Held& h : held) {
    for (size_t b = 0; b < h.size; ++b) ASSERT_EQ(h.p[b], h.fill);
    SmallChunks::Free(h.p);
  }
  chunks.Trim();
  EXPECT_EQ(chunks.pages(), 0u);
}

// Each heap is its own thread's; the page pool under them is shared (TSan runs this).
TEST(SmallChunks, HeapsOnSeveralThreadsShareThePagePool) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      SmallChunks chunks;
      std::vector<void*> held;
      for (int round = 0; round < 20; ++round) {
        for (int i = 0; i < 500; ++i) {
          void* p = chunks.Allocate(static_cast<size_t>(24 + (i + t) % 200));
          std::memset(p, t, 24);
          held.push_back(p);
        }
        for (void* p : held) SmallChunks::Free(p);
        held.clear();
      }
      chunks.Trim();
      EXPECT_EQ(chunks.pages(), 0u);
    });
  }
  for (std::thread& t : threads) t.join();
}

#if defined(__SANITIZE_ADDRESS__)
TEST(SmallChunksDeathTest, AUseAfterFreeIsReportedUnderASan) {
  SmallChunks chunks;
  auto* p = static_cast<volatile unsigned char*>(chunks.Allocate(64));
  p[63] = 1;
  SmallChunks::Free(const_cast<unsigned char*>(p));
  EXPECT_DEATH(p[0] = 2, "use-after-poison");
  chunks.Trim();
}
#endif

}  // namespace
}  // namespace prefixd::store
