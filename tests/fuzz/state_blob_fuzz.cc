// libFuzzer target for the state-blob decoder (include/prefixd/state_blob.h): any bytes either
// decode or give an error; a blob that decodes, copied out natively and encoded again, decodes
// to the same arrays.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "prefixd/state_blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace prefixd;
  auto views = DecodeStateBlob(std::span<const uint8_t>(data, size));
  if (!views.ok()) return 0;
  std::vector<std::vector<uint8_t>> natives;
  std::vector<StateArray> arrays;
  for (const StateArrayView& view : *views) {
    std::vector<float> fp32(view.element_count());
    if (!CopyAsFp32(view, fp32).ok()) std::abort();
    std::vector<uint8_t>& native =
        natives.emplace_back(view.element_count() * NativeElementSize(view.dtype));
    if (!CopyNative(view, native).ok()) return 0;  // a bf16 element the encoder never writes
  }
  for (size_t i = 0; i < views->size(); ++i) {
    arrays.push_back(StateArray{(*views)[i].dtype, (*views)[i].shape, natives[i]});
  }
  auto blob = EncodeStateBlob(arrays);
  if (!blob.ok()) std::abort();
  auto again = DecodeStateBlob(*blob);
  if (!again.ok() || again->size() != views->size()) std::abort();
  for (size_t i = 0; i < views->size(); ++i) {
    const StateArrayView &a = (*views)[i], &b = (*again)[i];
    if (a.dtype != b.dtype || a.shape != b.shape || a.bytes.size() != b.bytes.size() ||
        !std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin())) {
      std::abort();
    }
  }
  return 0;
}
