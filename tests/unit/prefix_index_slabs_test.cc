// store::Slab's copy-on-write: a slot handed out by Share() never changes under its holder, and
// once every handed-out slice is dropped the chunk is written in place again (no copy per
// rewrite after a snapshot is done).
#include "store/prefix_index_slabs.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>

namespace prefixd::store {
namespace {

constexpr size_t kSlotBytes = 64;

Slab Filled(uint32_t slots) {
  Slab slab(kSlotBytes);
  for (uint32_t id = 0; id < slots; ++id) {
    slab.Add(id);
    std::memset(slab.Mutable(id), static_cast<int>('a' + id % 26), kSlotBytes);
  }
  return slab;
}

TEST(SlabTest, ASharedSlotKeepsItsBytesWhenRewritten) {
  Slab slab = Filled(100);
  Bytes held = slab.Share(7);
  const uint8_t* before = slab.Data(7);
  std::memset(slab.Rewrite(7), 'Z', kSlotBytes);
  EXPECT_EQ(held.view(), std::string(kSlotBytes, 'a' + 7));
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(slab.Data(7)), kSlotBytes),
            std::string(kSlotBytes, 'Z'));
  EXPECT_NE(slab.Data(7), before) << "the chunk was copied while a slice of it was held";
  // The other slots came along with the copy.
  EXPECT_EQ(slab.Data(8)[0], 'a' + 8);
}

TEST(SlabTest, AChunkIsWrittenInPlaceOnceItsSlicesAreDropped) {
  Slab slab = Filled(100);
  std::optional<Bytes> held = slab.Share(3);
  held.reset();
  const uint8_t* before = slab.Data(3);
  std::memset(slab.Rewrite(3), 'Q', kSlotBytes);
  EXPECT_EQ(slab.Data(3), before) << "copied although nothing else held the chunk";
  EXPECT_EQ(slab.Data(3)[0], 'Q');
  // Not shared any more: the next rewrite stays in place too.
  const uint8_t* now = slab.Data(4);
  std::memset(slab.Rewrite(4), 'R', kSlotBytes);
  EXPECT_EQ(slab.Data(4), now);
}

}  // namespace
}  // namespace prefixd::store
