// InputBuffer (server/connection_memory.h): every read goes into a large buffer borrowed for it;
// bytes that fit the small array are moved there and the large buffer goes back at once, a longer
// burst keeps it only until its bytes were processed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "server/connection_memory.h"

namespace prefixd::server {
namespace {

// Writes as much of `bytes` into `room` as fits, as a read would.
size_t ReadInto(std::span<char> room, const std::string& bytes) {
  const size_t n = std::min(room.size(), bytes.size());
  std::memcpy(room.data(), bytes.data(), n);
  return n;
}

std::string Pattern(size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

TEST(InputBufferTest, ARoomIsAWholeLargeBufferBorrowedForTheRead) {
  InputBuffer input;
  EXPECT_EQ(input.capacity(), 0u);  // nothing held before a read
  const std::span<char> room = input.Room();
  EXPECT_EQ(room.size(), InputBuffer::kLarge);
  EXPECT_EQ(input.capacity(), InputBuffer::kLarge);
  EXPECT_EQ(input.Filled(0), "");  // nothing came: the buffer goes back
  EXPECT_EQ(input.capacity(), 0u);
}

TEST(InputBufferTest, BytesThatFitTheSmallArrayMoveThereAndTheLargeBufferGoesBack) {
  for (size_t size : {size_t{1}, size_t{100}, InputBuffer::kSmall - 1, InputBuffer::kSmall}) {
    InputBuffer input;
    const std::string sent = Pattern(size);
    const std::span<char> room = input.Room();
    const std::string_view got = input.Filled(ReadInto(room, sent));
    EXPECT_EQ(got, sent) << size;
    EXPECT_EQ(input.capacity(), 0u) << size;
    // The bytes are the connection's own, not the buffer's that went back to the cache.
    EXPECT_TRUE(got.data() < room.data() || got.data() >= room.data() + room.size()) << size;
  }
}

TEST(InputBufferTest, ALongerBurstStaysInTheLargeBufferUntilProcessed) {
  for (size_t size :
       {InputBuffer::kSmall + 1, size_t{5000}, InputBuffer::kLarge - 1, InputBuffer::kLarge}) {
    InputBuffer input;
    const std::string sent = Pattern(size);
    const size_t n = ReadInto(input.Room(), sent);
    ASSERT_EQ(n, size);
    EXPECT_TRUE(input.Filled(n) == sent) << size;
    EXPECT_EQ(input.capacity(), InputBuffer::kLarge) << size;
    input.Processed();
    EXPECT_EQ(input.capacity(), 0u) << size;
    // The next read borrows again, and a short one gives back again.
    const std::string next = Pattern(10);
    EXPECT_EQ(input.Filled(ReadInto(input.Room(), next)), next);
    EXPECT_EQ(input.capacity(), 0u);
  }
}

}  // namespace
}  // namespace prefixd::server
