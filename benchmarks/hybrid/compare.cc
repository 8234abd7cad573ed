#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace prefixd::hybrid {

std::string TensorAgreement::Describe() const {
  char line[256];
  if (!same_size) {
    std::snprintf(line, sizeof line, "%s: sizes differ", name.c_str());
  } else if (!finite()) {
    std::snprintf(line, sizeof line,
                  "%s: %lld NaN/Inf in the checked values, %lld in the reference", name.c_str(),
                  static_cast<long long>(nonfinite_got), static_cast<long long>(nonfinite_want));
  } else {
    std::snprintf(line, sizeof line, "%s: rel %.2e (head %lld)", name.c_str(), worst_relative,
                  static_cast<long long>(worst_group));
  }
  return line;
}

TensorAgreement CompareTensor(std::string name, std::span<const float> got,
                              std::span<const float> want, int64_t groups, int64_t inner,
                              double floor) {
  TensorAgreement out;
  out.name = std::move(name);
  out.elements = static_cast<int64_t>(want.size());
  const int64_t cell = groups * inner;
  out.same_size = got.size() == want.size() && groups > 0 && inner > 0 && out.elements % cell == 0;
  if (!out.same_size) return out;
  const int64_t outer = out.elements / cell;
  std::vector<double> worst_diff(static_cast<size_t>(groups), 0.0);
  std::vector<double> scale(static_cast<size_t>(groups), 0.0);
  double global_scale = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t i = 0; i < inner; ++i) {
        const size_t at = static_cast<size_t>((o * groups + g) * inner + i);
        const double a = got[at];
        const double b = want[at];
        // Counted explicitly: a NaN compares false with everything, so a max would drop it.
        out.nonfinite_got += !std::isfinite(a);
        out.nonfinite_want += !std::isfinite(b);
        if (!std::isfinite(a) || !std::isfinite(b)) continue;
        const double diff = std::abs(a - b);
        if (diff > worst_diff[static_cast<size_t>(g)]) worst_diff[static_cast<size_t>(g)] = diff;
        if (std::abs(b) > scale[static_cast<size_t>(g)])
          scale[static_cast<size_t>(g)] = std::abs(b);
      }
      if (scale[static_cast<size_t>(g)] > global_scale)
        global_scale = scale[static_cast<size_t>(g)];
    }
  }
  const double least = std::max(floor * global_scale, std::numeric_limits<double>::min());
  for (int64_t g = 0; g < groups; ++g) {
    const double rel =
        worst_diff[static_cast<size_t>(g)] / std::max(scale[static_cast<size_t>(g)], least);
    if (out.worst_group < 0 || rel > out.worst_relative) {
      out.worst_relative = rel;
      out.worst_group = g;
    }
  }
  if (!out.finite()) out.worst_relative = std::numeric_limits<double>::quiet_NaN();
  return out;
}

TokenAgreement CompareTokens(std::span<const int32_t> got, std::span<const int32_t> want) {
  TokenAgreement out;
  out.total = static_cast<int>(std::max(got.size(), want.size()));
  for (size_t i = 0; i < static_cast<size_t>(out.total); ++i) {
    const bool same = i < got.size() && i < want.size() && got[i] == want[i];
    out.agree += same;
    if (!same && out.first_mismatch < 0) out.first_mismatch = static_cast<int>(i);
  }
  return out;
}

std::vector<std::string> CompareVerdict::Failures() const {
  std::vector<std::string> out;
  for (const TensorAgreement& t : tensors) {
    if (!t.ok(tolerance)) out.push_back(t.Describe());
  }
  if (tensors.empty()) out.push_back("nothing was compared");
  if (!tokens.ok()) {
    out.push_back("greedy tokens " + std::to_string(tokens.agree) + "/" +
                  std::to_string(tokens.total) + ", first mismatch at " +
                  std::to_string(tokens.first_mismatch));
  }
  if (!repeat_state) out.push_back("a second prefill gave different state bits");
  if (!repeat_logits) out.push_back("the pushed-back state gave different logits bits");
  return out;
}

double CompareVerdict::Worst(std::string_view prefix) const {
  double worst = 0;
  for (const TensorAgreement& t : tensors) {
    if (std::string_view(t.name).substr(0, prefix.size()) != prefix) continue;
    if (!t.ok(std::numeric_limits<double>::infinity())) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    worst = std::max(worst, t.worst_relative);
  }
  return worst;
}

}  // namespace prefixd::hybrid
