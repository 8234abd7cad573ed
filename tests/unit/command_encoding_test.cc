// The RESP command encoder (protocol/command_encoding.h) that the client, replication and MIGRATE
// share: exact bytes, as Redis's clients frame a command.
#include "protocol/command_encoding.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace prefixd::protocol {
namespace {

TEST(CommandEncodingTest, FramesACommandAsAnArrayOfBulkStrings) {
  const std::vector<std::string_view> argv = {"SET", "k", ""};
  EXPECT_EQ(EncodeCommand(argv), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
  EXPECT_EQ(EncodeCommand({}), "*0\r\n");
}

TEST(CommandEncodingTest, HeadersHoldTheLargestCounts) {
  EXPECT_EQ(FrameHeader::Array(0).view(), "*0\r\n");
  EXPECT_EQ(FrameHeader::Bulk(16384).view(), "$16384\r\n");
  EXPECT_EQ(FrameHeader::Bulk(18446744073709551615ull).view(), "$18446744073709551615\r\n");
}

TEST(CommandEncodingTest, AppendBulkIsOneArgumentOfEncodeCommand) {
  std::string out(FrameHeader::Array(2).view());
  AppendBulk(out, "GET");
  AppendBulk(out, std::string_view("a\r\nb\0c", 6));
  const std::vector<std::string_view> argv = {"GET", std::string_view("a\r\nb\0c", 6)};
  EXPECT_EQ(out, EncodeCommand(argv));
}

}  // namespace
}  // namespace prefixd::protocol
