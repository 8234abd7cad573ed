// BytePieces: one piece held in place, more in a vector, contiguous and in order either way;
// copies and moves keep every piece, a moved-from list is empty.
#include "common/byte_pieces.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace prefixd {
namespace {

std::string Joined(const BytePieces& pieces) {
  std::string out;
  for (const Bytes& piece : pieces) out.append(piece.view());
  return out;
}

TEST(BytePiecesTest, GrowsFromNoneToOneToManyInOrder) {
  BytePieces pieces;
  EXPECT_TRUE(pieces.empty());
  EXPECT_EQ(pieces.begin(), pieces.end());
  pieces.push_back(Bytes::CopyOf("a"));
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces.front().view(), "a");
  EXPECT_EQ(&pieces.front(), &pieces.back());
  pieces.push_back(Bytes::CopyOf("bc"));
  pieces.emplace_back() = Bytes::CopyOf("def");
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].view(), "a");
  EXPECT_EQ(pieces[1].view(), "bc");
  EXPECT_EQ(pieces.back().view(), "def");
  EXPECT_EQ(pieces.end() - pieces.begin(), 3);
  EXPECT_EQ(Joined(pieces), "abcdef");
  pieces.clear();
  EXPECT_TRUE(pieces.empty());
  pieces.push_back(Bytes::CopyOf("again"));
  EXPECT_EQ(Joined(pieces), "again");
}

TEST(BytePiecesTest, AnEmptyPieceIsStillAPiece) {
  BytePieces pieces{Bytes::CopyOf("")};
  EXPECT_EQ(pieces.size(), 1u);
  pieces.push_back(Bytes());
  EXPECT_EQ(pieces.size(), 2u);
  EXPECT_EQ(Joined(pieces), "");
}

TEST(BytePiecesTest, BuiltFromVectorsOfAnySize) {
  for (size_t n : {0u, 1u, 2u, 5u}) {
    std::vector<Bytes> source;
    std::string expected;
    for (size_t i = 0; i < n; ++i) {
      source.push_back(Bytes::CopyOf(std::to_string(i)));
      expected += std::to_string(i);
    }
    const BytePieces copied(source);
    EXPECT_EQ(copied.size(), n);
    EXPECT_EQ(Joined(copied), expected);
    const BytePieces moved(std::move(source));
    EXPECT_EQ(moved.size(), n);
    EXPECT_EQ(Joined(moved), expected);
  }
}

TEST(BytePiecesTest, CopiesKeepEveryPieceAndMovesLeaveTheSourceEmpty) {
  for (size_t n : {1u, 3u}) {
    BytePieces pieces;
    for (size_t i = 0; i < n; ++i) pieces.push_back(Bytes::CopyOf("p" + std::to_string(i)));
    const std::string expected = Joined(pieces);
    BytePieces copy = pieces;
    EXPECT_EQ(Joined(copy), expected);
    EXPECT_EQ(Joined(pieces), expected);
    BytePieces moved = std::move(pieces);
    EXPECT_EQ(Joined(moved), expected);
    EXPECT_TRUE(pieces.empty());  // NOLINT(bugprone-use-after-move): what a move promises here
    BytePieces assigned;
    assigned.push_back(Bytes::CopyOf("old"));
    assigned = std::move(moved);
    EXPECT_EQ(Joined(assigned), expected);
    EXPECT_TRUE(moved.empty());  // NOLINT(bugprone-use-after-move)
    pieces.push_back(Bytes::CopyOf("reused"));
    EXPECT_EQ(Joined(pieces), "reused");
  }
}

}  // namespace
}  // namespace prefixd
