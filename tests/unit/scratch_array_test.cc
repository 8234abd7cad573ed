// ScratchArray at its inline capacity and one past it: the same elements either way, on the
// stack up to N and on the heap beyond.
#include "common/scratch_array.h"

#include <gtest/gtest.h>

#include <string>

namespace prefixd {
namespace {

template <size_t N>
bool Inside(ScratchArray<std::string, N>& a, const void* p) {
  const auto* begin = reinterpret_cast<const char*>(&a);
  return p >= begin && p < begin + sizeof(a);
}

TEST(ScratchArray, UpToItsCapacityTheElementsLiveInsideIt) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4}}) {
    ScratchArray<std::string, 4> a(n);
    ASSERT_EQ(a.size(), n);
    ASSERT_EQ(a.span().size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(a[i].empty());  // value-initialised
      EXPECT_TRUE(Inside(a, &a[i]));
      a[i] = std::string(40, static_cast<char>('a' + i));
    }
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(a.span()[i], std::string(40, 'a' + i));
  }
}

TEST(ScratchArray, OnePastItsCapacityTheElementsLiveOnTheHeap) {
  ScratchArray<std::string, 4> a(5);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(a.span().size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(a[i].empty());
    EXPECT_FALSE(Inside(a, &a[i]));
    a[i] = std::to_string(i);
  }
  EXPECT_EQ(a.span()[4], "4");
}

}  // namespace
}  // namespace prefixd
