// A tiny deterministic seeded random number generator for simulations (STYLE.md example 2:
// randomness is an input). xoshiro256** seeded through splitmix64; sampling is integer-only, so a
// seed replays identically on every standard library (no std::*_distribution).
#ifndef COHORT_NSO_RNG_H_
#define COHORT_NSO_RNG_H_

#include <cstdint>

namespace cohort::nso {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& word : state_) word = SplitMix64(&x);
  }

  // The next raw 64-bit value.
  uint64_t Next() {
    const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = RotateLeft(state_[3], 45);
    return result;
  }

  // Uniform in [0, n); 0 when n == 0. Rejection sampling: no modulo bias.
  uint64_t Uniform(uint64_t n) {
    if (n == 0) return 0;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
      const uint64_t x = Next();
      if (x < limit) return x % n;
    }
  }

  // Uniform in [low, high] (inclusive); low when high <= low.
  uint64_t Range(uint64_t low, uint64_t high) {
    if (high <= low) return low;
    return low + Uniform(high - low + 1);
  }

  // True with probability per_million / 1'000'000.
  bool Chance(uint32_t per_million) { return Uniform(1000000) < per_million; }

 private:
  static uint64_t SplitMix64(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  static uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t state_[4];
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_RNG_H_
