// libFuzzer target for GlobMatch: never crashes, never reads out of bounds, and finishes in
// O(pattern * text) steps (libFuzzer's -timeout catches a loop or a blow-up). On short inputs it
// must agree with the model of Redis's recursive matcher (tests/unit/glob_reference.h).
//
// Input layout: byte 0 = pattern length (capped at the input's size), then the pattern, then
// the text. An input of more than 64 bytes has its text repeated to 16 KiB, so long keys
// against short pathological patterns are covered too.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/glob.h"
#include "unit/glob_reference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t pattern_len = std::min<size_t>(data[0], input.size());
  const std::string_view pattern = input.substr(0, pattern_len);
  std::string text(input.substr(pattern_len));
  if (size > 64 && !text.empty()) {
    while (text.size() < 16384) text += text;
  }
  const bool matched = prefixd::GlobMatch(pattern, text);
  if (pattern.size() <= 10 && text.size() <= 10 &&
      matched != prefixd::testing::ReferenceGlob(pattern, text)) {
    std::fprintf(stderr, "GlobMatch disagrees with Redis's recursion\n");
    std::abort();
  }
  return 0;
}
