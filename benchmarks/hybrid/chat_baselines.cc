#include "chat_baselines.h"

#include <chrono>
#include <utility>

namespace prefixd::hybrid {

std::vector<int64_t> AlignedCheckpoints(int64_t from, int64_t to, int64_t align) {
  std::vector<int64_t> points;
  if (align < 1) return points;
  for (int64_t p = (from / align + 1) * align; p <= to; p += align) points.push_back(p);
  return points;
}

ExactKeyBaseline::ExactKeyBaseline(const ModelConfig& config, std::string weights_identity)
    : config_(config), weights_identity_(std::move(weights_identity)), cache_(config, {}) {}

std::string ExactKeyBaseline::Key(std::span<const int32_t> prompt) const {
  return PrefixNamespace(config_, weights_identity_, prompt);
}

Result<ExactKeyBaseline::Lookup> ExactKeyBaseline::Find(PrefixdLink& link,
                                                        std::span<const int32_t> prompt,
                                                        SequenceState* scratch) {
  const std::string key = Key(prompt);
  const auto start = std::chrono::steady_clock::now();
  PREFIXD_ASSIGN_OR_RETURN(FetchReport report, link.WithKey(key, [&](Client& c) {
    return cache_.Fetch(c, key, static_cast<int64_t>(prompt.size()), scratch);
  }));
  Lookup found;
  found.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  found.hit = report.hit;
  found.matched_tokens = report.hit ? static_cast<int64_t>(prompt.size()) : 0;
  return found;
}

Status ExactKeyBaseline::Remember(PrefixdLink& link, std::span<const int32_t> prompt,
                                  const SequenceState& state) {
  const std::string key = Key(prompt);
  PREFIXD_RETURN_IF_ERROR(
      link.WithKey(key, [&](Client& c) { return cache_.Store(c, key, state); }).status());
  stored_.push_back(key);
  return {};
}

Status ExactKeyBaseline::ForgetAll(PrefixdLink& link) {
  for (const std::string& key : stored_) {
    PREFIXD_RETURN_IF_ERROR(link.WithKey(key, [&](Client& c) { return cache_.Drop(c, key); }));
  }
  stored_.clear();
  return {};
}

}  // namespace prefixd::hybrid
