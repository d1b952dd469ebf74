#include "train/mixup.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"

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

namespace {

// A batch's draws: whether it is mixed, how, and CutMix's box (lam corrected to the box).
struct MixDraw {
  float lam = 1.f;
  bool cutmix = false;
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

MixDraw draw_mix(const MixupConfig& cfg, int64_t H, int64_t W, uint64_t seed, uint64_t step) {
  uint64_t state = rng_key(seed, step, 0x313C);
  Rng rng(state);
  MixDraw d;
  if (rng.uniform() < cfg.prob) {
    d.cutmix = cfg.cutmix_alpha > 0.f && (cfg.mixup_alpha <= 0.f || rng.uniform() < cfg.switch_prob);
    state = rng.state();
    d.lam = float(sample_beta(state, d.cutmix ? cfg.cutmix_alpha : cfg.mixup_alpha));
    rng.set_state(state);
  }
  if (d.lam < 1.f && d.cutmix) {
    // A box of area (1 - lam) centered uniformly, clipped to the image (timm's rand_bbox).
    const double cut = std::sqrt(1.0 - d.lam);
    const int64_t ch = int64_t(H * cut), cw = int64_t(W * cut);
    const int64_t cy = int64_t(rng.below(uint64_t(H))), cx = int64_t(rng.below(uint64_t(W)));
    d.y0 = std::max<int64_t>(0, cy - ch / 2), d.y1 = std::min<int64_t>(H, cy + ch / 2);
    d.x0 = std::max<int64_t>(0, cx - cw / 2), d.x1 = std::min<int64_t>(W, cx + cw / 2);
    d.lam = 1.f - float(double((d.y1 - d.y0) * (d.x1 - d.x0)) / double(H * W));
  }
  return d;
}

// t[K] = smoothed lam * onehot(y) + (1 - lam) * onehot(y_partner).
void soft_target(float* t, int64_t y, int64_t y_partner, float lam, int64_t K, float smoothing) {
  const float off = smoothing / float(K), on = 1.f - smoothing + off;
  for (int64_t k = 0; k < K; ++k) t[k] = off;
  t[y] += lam * (on - off);
  t[y_partner] += (1.f - lam) * (on - off);
}

// dst's box (every channel) = src's box.
void paste_box(float* dst, const float* src, const MixDraw& d, int64_t C, int64_t H, int64_t W) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = d.y0; y < d.y1; ++y)
      for (int64_t x = d.x0; x < d.x1; ++x) dst[(c * H + y) * W + x] = src[(c * H + y) * W + x];
}

}  // namespace

float mix_batch(const MixupConfig& cfg, float* images, const int64_t* labels, float* targets, int64_t B,
                int64_t C, int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step) {
  const MixDraw d = draw_mix(cfg, H, W, seed, step);
  const int64_t n = C * H * W;
  if (d.lam < 1.f && d.cutmix) {
    // Pairs (b, B-1-b) swap boxes: one image's box is kept aside while its pair's is pasted.
    thread_local std::vector<float> box;  // reused across steps: no allocation per batch
    box.resize(n);
    for (int64_t b = 0; b < B / 2; ++b) {
      float* p = images + b * n;
      float* q = images + (B - 1 - b) * n;
      paste_box(box.data(), p, d, C, H, W);
      paste_box(p, q, d, C, H, W);
      paste_box(q, box.data(), d, C, H, W);
    }
  } else if (d.lam < 1.f) {
    // x[b] = lam x[b] + (1 - lam) x[B-1-b], computed for pairs at once.
    const float lam = d.lam;
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
  for (int64_t b = 0; b < B; ++b)
    soft_target(targets + b * K, labels[b], labels[B - 1 - b], d.lam, K, smoothing);
  return d.lam;
}

float mix_shard(const MixupConfig& cfg, float* images, const float* partners, const int64_t* labels,
                const int64_t* partner_labels, float* targets, int64_t first, int64_t n, int64_t B, int64_t C,
                int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step) {
  const MixDraw d = draw_mix(cfg, H, W, seed, step);
  const int64_t m = C * H * W;
  const float lam = d.lam;
  for (int64_t i = 0; i < n; ++i) {
    float* p = images + i * m;
    const float* q = partners + i * m;
    // The middle row of an odd batch is its own partner: mix_batch leaves it unchanged.
    if (lam < 1.f && first + i != B - 1 - (first + i)) {
      if (d.cutmix) {
        paste_box(p, q, d, C, H, W);
      } else {
        for (int64_t j = 0; j < m; ++j) p[j] = lam * p[j] + (1.f - lam) * q[j];
      }
    }
    soft_target(targets + i * K, labels[i], partner_labels[i], lam, K, smoothing);
  }
  return lam;
}

}  // namespace vit
