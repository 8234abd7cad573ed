// Tests of ColdReply: cold values streamed into a reply window by window come out bit-exact and
// in order, nothing of them held before they are written; a run of extents and zeros is one
// bulk, and only a single extent of a file is sent from it; a value seen to lie past its file's
// end fails before anything is queued; a read that fails half-way throws from the write.

#include "commands/cold_reply.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "protocol/reply_writer.h"

namespace prefixd::commands {
namespace {

using protocol::ReplyWriter;

// A file image that fails reads at or past `fail_from`.
class ImageFile : public store::ColdFile {
 public:
  explicit ImageFile(std::string image) : image_(std::move(image)) {}
  bool Read(uint64_t offset, uint64_t length, Bytes& out, std::string& error) const override {
    if (offset + length > image_.size() || offset + length > fail_from) {
      error = "read failed at " + std::to_string(offset);
      return false;
    }
    out = Bytes::CopyOf(std::string_view(image_).substr(offset, length));
    return true;
  }
  bool Holds(uint64_t offset, uint64_t length, std::string& error) const override {
    if (offset + length <= image_.size()) return true;
    error = "the file ends at " + std::to_string(image_.size());
    return false;
  }
  uint64_t fail_from = UINT64_MAX;

 private:
  std::string image_;
};

std::string Image(size_t size) {
  std::string out(size, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : out) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  return out;
}

// Everything the writer hands out, window by window, as the connection would write it.
std::string WriteAll(ReplyWriter& writer) {
  std::string out;
  std::vector<std::span<const uint8_t>> run;
  while (writer.NextWrite(run)) {
    for (auto piece : run) out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  }
  return out;
}

constexpr uint64_t kWindow = ReplyWriter::kProduceWindow;

TEST(ColdReplyTest, StreamsValuesBitExactAndInOrder) {
  // Two values of one file with 12 bytes between them (two layers of one record), the first
  // not a whole number of windows, then a value of another file.
  const std::string image = Image(4 * kWindow);
  auto file = std::make_shared<ImageFile>(image);
  auto other = std::make_shared<ImageFile>(Image(kWindow));
  const uint64_t first = 2 * kWindow + 100, second = kWindow + kWindow / 2;
  std::vector<store::ColdExtent> extents = {
      {file, 7, first}, {file, 7 + first + 12, second}, {other, 0, kWindow}};
  auto plan = std::make_shared<ColdPlan>(extents);
  ReplyWriter writer;
  writer.ArrayLen(3);
  for (size_t i = 0; i < extents.size(); ++i) BulkCold(writer, plan, i);
  EXPECT_LT(writer.held_bytes(), 4096u) << "nothing of the values is held before it is written";
  const std::string expected = "*3\r\n$" + std::to_string(first) + "\r\n" + image.substr(7, first) +
                               "\r\n$" + std::to_string(second) + "\r\n" +
                               image.substr(7 + first + 12, second) + "\r\n$" +
                               std::to_string(kWindow) + "\r\n" + Image(kWindow) + "\r\n";
  const std::string got = WriteAll(writer);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the streamed bytes differ";
}

TEST(ColdReplyTest, ARunOfExtentsAndZerosIsOneBulkReadWindowByWindow) {
  // One bulk of three pieces: rows of a file, zeros (no file), rows of the same file further on,
  // each not a whole number of windows, so windows straddle them. A run is never sent from a
  // file; one extent of a file is.
  const std::string image = Image(3 * kWindow);
  struct SendableFile : ImageFile {
    using ImageFile::ImageFile;
    int descriptor() const override { return 99; }  // never used: the test sends nothing
  };
  auto file = std::make_shared<SendableFile>(image);
  const uint64_t a = kWindow + 5, zeros = kWindow / 2 + 3, b = kWindow - 9;
  auto plan = std::make_shared<ColdPlan>(std::vector<store::ColdExtent>{
      {file, 11, a}, {nullptr, 0, zeros}, {file, 2 * kWindow, b}, {file, 1, 100}});
  ReplyWriter writer;
  BulkCold(writer, plan, 0, 3);
  BulkCold(writer, plan, 3);
  const std::string want_run =
      image.substr(11, a) + std::string(zeros, '\0') + image.substr(2 * kWindow, b);
  std::string got;
  std::vector<std::span<const uint8_t>> run;
  protocol::FileSend send;
  std::vector<protocol::FileSend> sends;
  while (writer.NextWrite(run, &send)) {
    if (send.fd >= 0 || send.producer != nullptr) {
      sends.push_back(send);
      continue;
    }
    for (auto piece : run) got.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  }
  ASSERT_EQ(sends.size(), 1u) << "only the single extent goes out from its file";
  EXPECT_EQ(sends[0].fd, 99);
  EXPECT_EQ(sends[0].offset, 1u);
  EXPECT_EQ(sends[0].length, 100u);
  EXPECT_TRUE(got == "$" + std::to_string(a + zeros + b) + "\r\n" + want_run + "\r\n$100\r\n\r\n")
      << "the run's bytes differ";
}

TEST(ColdReplyTest, AValuePastItsFilesEndFailsBeforeAnythingIsQueued) {
  auto file = std::make_shared<ImageFile>(Image(kWindow));
  std::vector<store::ColdExtent> extents = {{file, 0, kWindow / 2}, {file, kWindow / 2, kWindow}};
  EXPECT_THROW(ColdPlan{extents}, std::runtime_error);
}

TEST(ColdReplyTest, AReadFailingHalfWayThrowsFromTheWrite) {
  const std::string image = Image(3 * kWindow);
  auto file = std::make_shared<ImageFile>(image);
  file->fail_from = 2 * kWindow - 1;  // the second window reads past here
  auto plan = std::make_shared<ColdPlan>(std::vector<store::ColdExtent>{{file, 0, 3 * kWindow}});
  ReplyWriter writer;
  BulkCold(writer, plan, 0);
  std::vector<std::span<const uint8_t>> run;
  ASSERT_TRUE(writer.NextWrite(run));  // the header and the first window
  ASSERT_EQ(run.size(), 2u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(run[1].data()), run[1].size()),
            image.substr(0, kWindow));
  try {
    writer.NextWrite(run);
    ADD_FAILURE() << "the failed read did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("reading a stored value from disk failed: read failed"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace prefixd::commands
