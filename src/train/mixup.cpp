#include "vit/train/mixup.h"

#include <cmath>
#include <vector>

#include "vit/core/rng.h"

namespace vit {

namespace {
double gamma_draw(Rng& rng, double a) {
  if (a < 1.0) return gamma_draw(rng, a + 1.0) * std::pow(rng.uniform(), 1.0 / a);
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = rng.uniform();
    if (u < 1 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
  }
}
}  // namespace

double sample_beta(uint64_t& state, double a) {
  Rng rng(state);
  const double x = gamma_draw(rng, a), y = gamma_draw(rng, a);
  state = rng.state();
  return x / (x + y);
}

float mix_batch(const MixupConfig& cfg, float* images, const int64_t* labels, float* targets, int64_t B,
                int64_t C, int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step) {
  uint64_t state = rng_key(seed, step, 0x313C);
  Rng rng(state);
  float lam = 1.f;
  bool cutmix = false;
  if (rng.uniform() < cfg.prob) {
    cutmix = cfg.cutmix_alpha > 0.f && (cfg.mixup_alpha <= 0.f || rng.uniform() < cfg.switch_prob);
    state = rng.state();
    lam = float(sample_beta(state, cutmix ? cfg.cutmix_alpha : cfg.mixup_alpha));
    rng.set_state(state);
  }
  const int64_t plane = H * W, n = C * plane;
  if (lam < 1.f && cutmix) {
    // A box of area (1 - lam) centered uniformly, clipped to the image (timm's rand_bbox).
    const double cut = std::sqrt(1.0 - lam);
    const int64_t ch = int64_t(H * cut), cw = int64_t(W * cut);
    const int64_t cy = int64_t(rng.below(uint64_t(H))), cx = int64_t(rng.below(uint64_t(W)));
    const int64_t y0 = std::max<int64_t>(0, cy - ch / 2), y1 = std::min<int64_t>(H, cy + ch / 2);
    const int64_t x0 = std::max<int64_t>(0, cx - cw / 2), x1 = std::min<int64_t>(W, cx + cw / 2);
    lam = 1.f - float(double((y1 - y0) * (x1 - x0)) / double(plane));
    // Pairs (b, B-1-b) swap boxes: copy the first half's boxes before overwriting them.
    thread_local std::vector<float> box;  // reused across steps: no allocation per batch
    box.resize(B * C * std::max<int64_t>(0, (y1 - y0) * (x1 - x0)));
    const int64_t bw = x1 - x0, bsz = (y1 - y0) * bw;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = y0; y < y1; ++y)
          for (int64_t x = x0; x < x1; ++x)
            box[(b * C + c) * bsz + (y - y0) * bw + (x - x0)] = images[b * n + c * plane + y * W + x];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = y0; y < y1; ++y)
          for (int64_t x = x0; x < x1; ++x)
            images[b * n + c * plane + y * W + x] =
                box[((B - 1 - b) * C + c) * bsz + (y - y0) * bw + (x - x0)];
  } else if (lam < 1.f) {
    // x[b] = lam x[b] + (1 - lam) x[B-1-b], computed for pairs at once.
    for (int64_t b = 0; b < B / 2; ++b) {
      float* p = images + b * n;
      float* q = images + (B - 1 - b) * n;
      for (int64_t i = 0; i < n; ++i) {
        const float a = p[i], c = q[i];
        p[i] = lam * a + (1.f - lam) * c;
        q[i] = lam * c + (1.f - lam) * a;
      }
    }
  }
  const float off = smoothing / float(K), on = 1.f - smoothing + off;
  for (int64_t b = 0; b < B; ++b) {
    float* t = targets + b * K;
    for (int64_t k = 0; k < K; ++k) t[k] = off;
    t[labels[b]] += lam * (on - off);
    t[labels[B - 1 - b]] += (1.f - lam) * (on - off);
  }
  return lam;
}

}  // namespace vit
