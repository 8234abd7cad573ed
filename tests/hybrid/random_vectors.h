// Deterministic normal-distributed test inputs for the hybrid model's tests. Any thread.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace prefixd::hybrid {

// n values ~ N(0, scale²) from a fixed seed: the same on every run and machine.
inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace prefixd::hybrid
