// The register of leased allocations (engine/shm_leases.h) with real buffers and lease tables:
// whether a lease holds its key (something besides leases still holds the bytes), and the bytes
// only leases keep, each allocation counted whole and once, gone with the last lease however it
// ends (release, expiry, the table's end at disconnect). The register is process-wide: every
// test leaves it empty.
#include "engine/shm_leases.h"

#include <gtest/gtest.h>

namespace prefixd::commands {
namespace {

constexpr size_t kCap = 8;
constexpr int64_t kNever = INT64_MAX;

TEST(ShmLeasesTest, ALeaseHoldsItsKeyWhileTheStoreHoldsTheBytes) {
  auto table = NewShmLeaseTable();
  Bytes stored = Bytes::Allocate(64 << 10);
  const uint64_t tag = ShmLeaseTag(0, "k");
  EXPECT_FALSE(ShmLeaseHoldsKey(tag));
  const uint64_t id = table->Add(stored, tag, kNever, kCap);
  ASSERT_NE(id, 0u);
  EXPECT_TRUE(ShmLeaseHoldsKey(tag));
  EXPECT_FALSE(ShmLeaseHoldsKey(ShmLeaseTag(1, "k"))) << "another database's key of that name";
  EXPECT_FALSE(ShmLeaseHoldsKey(ShmLeaseTag(0, "other")));
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), 0u);

  // The store lets go (DEL, overwrite): the key is not held, the bytes are the lease's alone.
  const size_t whole = stored.allocation_bytes();
  stored = Bytes();
  EXPECT_FALSE(ShmLeaseHoldsKey(tag));
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), whole);
  EXPECT_TRUE(table->Release(id));
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), 0u);
  EXPECT_EQ(ShmLeasedOrphanBytes(), 0u) << "a release makes the kept figure stale";
}

TEST(ShmLeasesTest, AnAllocationIsCountedOnceWholeHoweverManyLeasesOrSlicesHoldIt) {
  auto first = NewShmLeaseTable(), second = NewShmLeaseTable();
  Bytes chunk = Bytes::Allocate(256 << 10);
  const size_t whole = chunk.allocation_bytes();
  const uint64_t tag = ShmLeaseTag(0, "session");
  // Two pieces of one chunk on one connection, a third on another.
  const uint64_t a = first->Add(chunk.Slice(0, 4096), tag, kNever, kCap);
  const uint64_t b = first->Add(chunk.Slice(4096, 4096), tag, kNever, kCap);
  const uint64_t c = second->Add(chunk.Slice(0, 4096), tag, kNever, kCap);
  ASSERT_NE(a * b * c, 0u);
  EXPECT_EQ(ShmLeasedBytes(), 3u * 4096);
  EXPECT_TRUE(ShmLeaseHoldsKey(tag));
  chunk = Bytes();
  EXPECT_FALSE(ShmLeaseHoldsKey(tag));
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), whole) << "the whole chunk, once";
  EXPECT_TRUE(first->Release(a));
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), whole);
  // The first connection goes: its table's end ends its leases.
  first.reset();
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), whole);
  EXPECT_EQ(ShmLeaseCount(), 1u);
  EXPECT_TRUE(second->Release(c));
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), 0u);
}

TEST(ShmLeasesTest, ExpiredLeasesLeaveTheRegisterAndTheCapHolds) {
  auto table = NewShmLeaseTable();
  Bytes value = Bytes::Allocate(64 << 10);
  const uint64_t tag = ShmLeaseTag(0, "k");
  for (size_t i = 0; i < 2; ++i) ASSERT_NE(table->Add(value, tag, 1000, 2), 0u);
  EXPECT_EQ(table->Add(value, tag, 1000, 2), 0u) << "one past the cap";
  EXPECT_EQ(table->count(), 2u);
  const size_t whole = value.allocation_bytes();
  value = Bytes();
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), whole);
  SweepShmLeases(999);
  EXPECT_EQ(table->count(), 2u) << "not yet due";
  SweepShmLeases(1000);
  EXPECT_EQ(table->count(), 0u);
  EXPECT_EQ(ShmLeasedOrphanBytesNow(), 0u);
  EXPECT_FALSE(ShmLeaseHoldsKey(tag));
}

}  // namespace
}  // namespace prefixd::commands
