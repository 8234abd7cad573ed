// InputBuffer (server/connection_memory.h): a read fills the small array, then runs on into a
// large buffer's room; the bytes come back in one piece, and the large buffer is held only while
// they are processed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "server/connection_memory.h"

namespace prefixd::server {
namespace {

// Writes `bytes` into `room` in order, as a scattered read would.
size_t ReadInto(const std::array<iovec, 2>& room, const std::string& bytes) {
  size_t done = 0;
  for (const iovec& piece : room) {
    const size_t n = std::min(piece.iov_len, bytes.size() - done);
    std::memcpy(piece.iov_base, bytes.data() + done, n);
    done += n;
  }
  return done;
}

std::string Pattern(size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

TEST(InputBufferTest, RoomIsTheSmallArrayThenTheLargeBuffersRest) {
  InputBuffer input;
  const auto room = input.Room();
  EXPECT_EQ(room[0].iov_len, InputBuffer::kSmall);
  EXPECT_EQ(room[1].iov_len, InputBuffer::kLarge - InputBuffer::kSmall);
  EXPECT_EQ(input.capacity(), InputBuffer::kLarge);  // borrowed for the read
}

TEST(InputBufferTest, AReadInsideTheSmallArrayGivesTheLargeBufferBack) {
  for (size_t size : {size_t{0}, size_t{1}, InputBuffer::kSmall - 1, InputBuffer::kSmall}) {
    InputBuffer input;
    const std::string sent = Pattern(size);
    const size_t n = ReadInto(input.Room(), sent);
    EXPECT_EQ(input.Filled(n), sent) << size;
    EXPECT_EQ(input.capacity(), 0u) << size;
  }
}

TEST(InputBufferTest, AReadPastTheSmallArrayComesBackInOnePieceUntilProcessed) {
  for (size_t size :
       {InputBuffer::kSmall + 1, size_t{5000}, InputBuffer::kLarge - 1, InputBuffer::kLarge}) {
    InputBuffer input;
    const std::string sent = Pattern(size);
    const size_t n = ReadInto(input.Room(), sent);
    ASSERT_EQ(n, size);
    const std::string_view got = input.Filled(n);
    EXPECT_TRUE(got == sent) << size;
    EXPECT_EQ(input.capacity(), InputBuffer::kLarge) << size;
    input.Processed();
    EXPECT_EQ(input.capacity(), 0u) << size;
    // The next read starts afresh in the small array.
    const std::string next = Pattern(10);
    EXPECT_EQ(input.Filled(ReadInto(input.Room(), next)), next);
  }
}

// A read can bring no more than the room: a burst past it waits for the next read.
TEST(InputBufferTest, TheRoomEndsAtTheLargeBuffersSize) {
  InputBuffer input;
  const std::string sent = Pattern(InputBuffer::kLarge + 1);
  EXPECT_EQ(ReadInto(input.Room(), sent), InputBuffer::kLarge);
}

}  // namespace
}  // namespace prefixd::server
