// Agreement between two backends' outputs (the CUDA backend against the CPU backend): relative
// errors that never hide a NaN or an Inf, judged per head so that a small-magnitude head cannot
// hide behind a large one, greedy-token agreement, and the verdict `prefixd-hybrid compare`
// prints. Plain functions and values; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::hybrid {

// One tensor checked against its reference.
struct TensorAgreement {
  std::string name;
  int64_t elements = 0;
  bool same_size = true;
  int64_t nonfinite_got = 0;   // NaN or ±Inf among the checked values
  int64_t nonfinite_want = 0;  // ... among the reference values
  // The largest, over groups (heads), of max |got − want| / max |want| within the group, the
  // denominator floored at `floor` times the tensor's largest |want| (so an all-zero head is
  // judged by absolute error instead of dividing by zero).
  double worst_relative = 0;
  int64_t worst_group = -1;

  bool finite() const { return nonfinite_got == 0 && nonfinite_want == 0; }
  bool ok(double tolerance) const {
    return same_size && finite() && elements > 0 && worst_relative <= tolerance;
  }
  // "k[3]: rel 1.2e-06 (head 1)" or "logits: 2 NaN/Inf in the checked values".
  std::string Describe() const;
};

// Compares got against want viewed as [outer, groups, inner]: element (o, g, i) is at
// (o·groups + g)·inner + i, and group g's error covers all its (o, i). groups = 1 and inner =
// size compares the whole tensor at once. A size that is not outer·groups·inner is a mismatch.
TensorAgreement CompareTensor(std::string name, std::span<const float> got,
                              std::span<const float> want, int64_t groups, int64_t inner,
                              double floor = 1e-6);

struct TokenAgreement {
  int agree = 0;
  int total = 0;
  int first_mismatch = -1;  // index of the first differing token, −1 when all agree
  bool ok() const { return total > 0 && agree == total; }
};
TokenAgreement CompareTokens(std::span<const int32_t> got, std::span<const int32_t> want);

// Everything one comparison (one prompt length) found; pass() requires every tensor within
// tolerance and finite, every token equal, and the checked backend repeating itself bit for bit.
struct CompareVerdict {
  double tolerance = 0;
  std::vector<TensorAgreement> tensors;
  TokenAgreement tokens;
  bool repeat_state = true;   // a second prefill gave the same state bits
  bool repeat_logits = true;  // the state pushed back gave the same logits bits

  bool pass() const { return Failures().empty(); }
  // One line per reason the verdict fails; empty when it passes.
  std::vector<std::string> Failures() const;
  // The worst relative error among tensors whose name starts with `prefix` (NaN if one of them
  // is not finite), for the summary line.
  double Worst(std::string_view prefix) const;
};

}  // namespace prefixd::hybrid
