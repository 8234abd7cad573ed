// Bytes::Unique: a buffer is rewritten in place only when no other handle refers to it, and it
// does become unique once another thread's last holder is gone, with that holder's reads seeing
// the bytes as they were. CI also runs this file under ThreadSanitizer, where Unique() must
// report true as well (it used to answer false there, so the in-place paths never ran).
#include "common/bytes.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

namespace prefixd {
namespace {

// SHM.SET's adopted memfd: the handle owns the mapping, counts all of it, is never offered for
// writing in place (its pages are read-only), and unmaps it with its last copy.
TEST(BytesTest, AnAdoptedMappingIsNeverUniqueAndIsUnmappedWithItsLastHandle) {
  void* base = ::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(base, MAP_FAILED);
  {
    Bytes value = Bytes::AdoptMapping(base, 8192, 100, 5000);
    EXPECT_EQ(value.data(), static_cast<uint8_t*>(base) + 100);
    EXPECT_EQ(value.size(), 5000u);
    EXPECT_EQ(value.capacity(), 8192u);
    EXPECT_FALSE(value.Unique());
    Bytes copy = value;
    value = Bytes();
    unsigned char resident[2];
    EXPECT_EQ(::mincore(base, 8192, resident), 0) << "unmapped while a copy lives";
  }
  unsigned char resident[2];
  EXPECT_EQ(::mincore(base, 8192, resident), -1);
  EXPECT_EQ(errno, ENOMEM) << "the mapping outlived its last handle";
}

// What a lease's register reads: one identity and one holder count for a buffer and all its
// copies and slices, and the whole buffer's size from any slice of it.
TEST(BytesTest, SlicesShareTheStorageHolderCountAndAllocationSizeOfTheirBuffer) {
  for (size_t size : {size_t{100}, size_t{64} << 10, (size_t{1} << 20) + 7}) {
    Bytes whole = Bytes::Allocate(size);
    EXPECT_EQ(whole.holders(), 1);
    EXPECT_EQ(whole.allocation_bytes(), whole.capacity()) << size;
    Bytes slice = whole.Slice(10, 20);
    EXPECT_EQ(slice.capacity(), 20u);
    EXPECT_EQ(slice.allocation_bytes(), whole.capacity()) << size;
    EXPECT_EQ(slice.storage(), whole.storage());
    EXPECT_EQ(whole.holders(), 2);
    Bytes other = Bytes::Allocate(size);
    EXPECT_NE(other.storage(), whole.storage());
    whole = Bytes();
    EXPECT_EQ(slice.holders(), 1);
  }
  EXPECT_EQ(Bytes().storage(), nullptr);
}

TEST(BytesTest, UniqueOnlyWhileNoOtherHandleOrSliceRefersToTheBuffer) {
  Bytes value = Bytes::Allocate(4096);
  EXPECT_TRUE(value.Unique());
  {
    const Bytes copy = value;
    EXPECT_FALSE(value.Unique());
    EXPECT_FALSE(copy.Unique());
  }
  EXPECT_TRUE(value.Unique());
  {
    const Bytes slice = value.Slice(10, 20);
    EXPECT_FALSE(value.Unique());
  }
  EXPECT_TRUE(value.Unique());
  EXPECT_FALSE(Bytes().Unique());
  EXPECT_FALSE(Bytes::Borrow("lent").Unique());  // not ours to write
}

TEST(BytesTest, AWriteAfterUniqueIsOrderedAfterAnotherThreadsLastRead) {
  // A reader on another thread reads its copy through and drops it; the owner waits until the
  // buffer is unique and rewrites it. Many rounds, so the drop and the check interleave both ways.
  constexpr int kRounds = 2000;
  constexpr size_t kSize = 256;
  Bytes value = Bytes::Allocate(kSize);
  std::memset(value.mutable_data(), 0, kSize);
  for (int round = 0; round < kRounds; ++round) {
    std::optional<Bytes> lent = value;  // copied on this thread, as a shard lock would order it
    uint64_t sum = 0;
    std::thread reader([&] {
      for (size_t i = 0; i < kSize; ++i) sum += lent->data()[i];
      lent.reset();
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!value.Unique() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_TRUE(value.Unique()) << "round " << round << ": the reader's handle is gone";
    std::memset(value.mutable_data(), round & 0xff, kSize);
    reader.join();
    const uint64_t before = round == 0 ? 0 : static_cast<uint64_t>((round - 1) & 0xff) * kSize;
    ASSERT_EQ(sum, before) << "round " << round;
  }
}

}  // namespace
}  // namespace prefixd
