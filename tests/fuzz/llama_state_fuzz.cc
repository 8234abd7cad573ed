// libFuzzer target for llama.cpp's sequence state as src/llama/seq_state.h takes it apart: any
// bytes either parse or give an error; a state that parses, put back together from its parts,
// parses again to the same layout and the same rows; a stored layout decodes only from its own
// encoding. Input: one byte for the memory kind, one for the token count n (at most 32), n
// little-endian i32 tokens, then the state.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "llama/seq_state.h"

namespace {

using namespace prefixd::llama;

std::vector<std::vector<uint8_t>> Rows(const SequenceState& s) {
  std::vector<std::vector<uint8_t>> rows(s.layout().attention_layers());
  for (uint32_t l = 0; l < rows.size(); ++l) s.AppendRows(l, 0, s.tokens(), rows[l]);
  for (size_t i = 0; i < s.layout().recurrent_layers(); ++i) rows.push_back(s.RecurrentBlob(i));
  return rows;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto kind = static_cast<MemoryKind>(data[0] % 3);
  const size_t n = data[1] % 33;
  if (size < 2 + 4 * n) return 0;
  std::vector<int32_t> tokens(n);
  if (n > 0) std::memcpy(tokens.data(), data + 2, 4 * n);
  const std::span<const uint8_t> bytes(data + 2 + 4 * n, size - 2 - 4 * n);

  // A stored layout decodes only from exactly its own encoding.
  auto layout = StateLayout::Decode(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (layout.ok() &&
      layout->Encode() !=
          std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())) {
    std::abort();
  }
  if (n > 0) (void)SequenceState::ParseRecurrent(bytes, static_cast<int32_t>(n - 1));

  auto state = SequenceState::Parse(bytes, kind, tokens);
  if (!state.ok()) return 0;
  const std::vector<std::vector<uint8_t>> rows = Rows(*state);
  std::vector<std::span<const uint8_t>> attention, recurrent;
  for (size_t i = 0; i < rows.size(); ++i) {
    (i < state->layout().attention_layers() ? attention : recurrent).emplace_back(rows[i]);
  }
  auto assembled = AssembleState(state->layout(), 0, n, tokens, attention, recurrent);
  if (!assembled.ok()) std::abort();
  auto again = SequenceState::Parse(*assembled, kind, tokens);
  if (!again.ok() || !(again->layout() == state->layout()) || Rows(*again) != rows) std::abort();
  return 0;
}
