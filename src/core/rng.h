// Random numbers. Two kinds:
//  - Rng: a sequential generator (splitmix64) for weight init and data order.
//  - counter-based draws (hash of key and index) for dropout and drop path, so a mask
//    element depends only on (seed, step, site, index): the same for any thread count,
//    and backward regenerates the forward's mask instead of storing it.
#pragma once
#include <cstdint>

namespace vit {

// A strong 64-bit mix (splitmix64 finalizer).
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Key for one dropout site in one step.
inline uint64_t rng_key(uint64_t seed, uint64_t step, uint64_t site) {
  return mix64(mix64(mix64(seed) ^ step) ^ (site * 0x9E3779B97F4A7C15ull));
}

// Uniform in [0, 1) from a key and an element index (24 random bits).
inline float uniform_at(uint64_t key, uint64_t i) {
  return static_cast<float>(mix64(key ^ (i * 0xD6E8FEB86659FD93ull)) >> 40) * (1.0f / 16777216.0f);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t next_u64() { return mix64(state_++); }
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  double normal();  // Box-Muller, one value per call
  // Normal(0, std) truncated to [lo, hi] by rejection, as torch.nn.init.trunc_normal_.
  double trunc_normal(double std, double lo, double hi);
  // out[i] = float(trunc_normal(std, lo, hi)) for i < n in order, the same bits and the same
  // state after, on the threads: value i takes draws 2i and 2i + 1 from here (the draws are a
  // counter, so each value can be found without the others) up to the first value rejected, and
  // the rest one at a time after it (so a large model's init uses every thread: docs/design.md,
  // "Randomness and determinism").
  void fill_trunc_normal(float* out, int64_t n, double std, double lo, double hi);
  uint64_t below(uint64_t n) { return next_u64() % n; }  // for shuffles; bias negligible
  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

}  // namespace vit
