#include "train/mixup.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
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

void MixupConfig::validate() const {
  VIT_VALUE_CHECK(std::isfinite(mixup_alpha) && std::isfinite(cutmix_alpha),
                  "--mixup and --cutmix must be finite (0 = off)");
  VIT_VALUE_CHECK(mixup_alpha >= 0.f, "--mixup must be non-negative (0 = off), got ", mixup_alpha);
  VIT_VALUE_CHECK(cutmix_alpha >= 0.f, "--cutmix must be non-negative (0 = off), got ", cutmix_alpha);
  VIT_VALUE_CHECK(prob >= 0.f && prob <= 1.f, "--mixup-prob must be a probability, got ", prob);
  VIT_VALUE_CHECK(switch_prob >= 0.f && switch_prob <= 1.f, "--mixup-switch-prob must be a probability, got ",
                  switch_prob);
  VIT_VALUE_CHECK(mode == "batch" || mode == "pair" || mode == "elem",
                  "--mixup-mode must be batch, pair or elem, got '", mode, "'");
  VIT_VALUE_CHECK(cutmix_minmax.empty() || (cutmix_minmax.size() == 2 && cutmix_minmax[0] > 0.0 &&
                                            cutmix_minmax[0] < cutmix_minmax[1] && cutmix_minmax[1] <= 1.0),
                  "--cutmix-minmax wants MIN MAX with 0 < MIN < MAX <= 1 (shares of the image's sides)");
  VIT_VALUE_CHECK(off_epoch >= 0, "--mixup-off-epoch must be an epoch (0: never), got ", off_epoch);
}

namespace {

// One draw (a batch's, a pair's or an image's): whether it is mixed, how, and CutMix's box
// (lam corrected to the box).
struct MixDraw {
  float lam = 1.f;
  bool cutmix = false;
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

MixDraw draw_mix(const MixupConfig& cfg, int64_t H, int64_t W, uint64_t key) {
  uint64_t state = key;
  Rng rng(state);
  MixDraw d;
  const float cutmix_alpha = cfg.cutmix_minmax.empty() ? cfg.cutmix_alpha : 1.f;  // timm's, with minmax
  if (rng.uniform() < cfg.prob) {
    d.cutmix = cutmix_alpha > 0.f && (cfg.mixup_alpha <= 0.f || rng.uniform() < cfg.switch_prob);
    state = rng.state();
    d.lam = float(sample_beta(state, d.cutmix ? cutmix_alpha : cfg.mixup_alpha));
    rng.set_state(state);
  }
  if (d.lam < 1.f && d.cutmix) {
    if (cfg.cutmix_minmax.empty()) {
      // A box of area (1 - lam) centered uniformly, clipped to the image (timm's rand_bbox).
      const double cut = std::sqrt(1.0 - d.lam);
      const int64_t ch = int64_t(H * cut), cw = int64_t(W * cut);
      const int64_t cy = int64_t(rng.below(uint64_t(H))), cx = int64_t(rng.below(uint64_t(W)));
      d.y0 = std::max<int64_t>(0, cy - ch / 2), d.y1 = std::min<int64_t>(H, cy + ch / 2);
      d.x0 = std::max<int64_t>(0, cx - cw / 2), d.x1 = std::min<int64_t>(W, cx + cw / 2);
    } else {
      // Sides in [min, max) of the image's, placed inside it (timm's rand_bbox_minmax).
      const auto side = [&](int64_t n) {
        const int64_t lo = int64_t(double(n) * cfg.cutmix_minmax[0]),
                      hi = int64_t(double(n) * cfg.cutmix_minmax[1]);
        return lo + int64_t(rng.below(uint64_t(std::max<int64_t>(1, hi - lo))));
      };
      const int64_t ch = side(H), cw = side(W);
      d.y0 = int64_t(rng.below(uint64_t(std::max<int64_t>(1, H - ch)))), d.y1 = d.y0 + ch;
      d.x0 = int64_t(rng.below(uint64_t(std::max<int64_t>(1, W - cw)))), d.x1 = d.x0 + cw;
    }
    d.lam = 1.f - float(double((d.y1 - d.y0) * (d.x1 - d.x0)) / double(H * W));
  }
  return d;
}

// A step's draws by row: the batch's (drawn once), each pair's (rows b and B-1-b alike) or
// each row's own.
class RowDraws {
 public:
  RowDraws(const MixupConfig& cfg, int64_t H, int64_t W, uint64_t seed, uint64_t step, int64_t B)
      : cfg_(cfg),
        H_(H),
        W_(W),
        B_(B),
        key_(rng_key(seed, step, 0x313C)),
        per_batch_(cfg.mode == "batch"),
        per_pair_(cfg.mode == "pair") {
    if (per_batch_) batch_ = draw_mix(cfg_, H_, W_, key_);
  }
  MixDraw at(int64_t b) const {
    if (per_batch_) return batch_;
    const int64_t unit = per_pair_ ? std::min(b, B_ - 1 - b) : b;
    return draw_mix(cfg_, H_, W_, rng_key(key_, uint64_t(unit), 0x7A1));
  }

 private:
  const MixupConfig& cfg_;
  int64_t H_, W_, B_;
  uint64_t key_;
  bool per_batch_, per_pair_;
  MixDraw batch_;
};

// t[K] = smoothed lam * onehot(y) + (1 - lam) * onehot(y_partner).
void soft_target(float* t, int64_t y, int64_t y_partner, float lam, int64_t K, float smoothing) {
  const float off = smoothing / float(K), on = 1.f - smoothing + off;
  for (int64_t k = 0; k < K; ++k) t[k] = off;
  t[y] += lam * (on - off);
  t[y_partner] += (1.f - lam) * (on - off);
}

// An image mixed with its partner's unmixed one by its draw: the partner's box pasted, or
// lam x image + (1 - lam) x partner.
void mix_image(float* x, const float* partner, const MixDraw& d, int64_t C, int64_t H, int64_t W) {
  if (d.lam >= 1.f) return;
  if (d.cutmix) {
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = d.y0; y < d.y1; ++y)
        for (int64_t i = d.x0; i < d.x1; ++i) x[(c * H + y) * W + i] = partner[(c * H + y) * W + i];
    return;
  }
  const float lam = d.lam;
  for (int64_t i = 0; i < C * H * W; ++i) x[i] = lam * x[i] + (1.f - lam) * partner[i];
}

}  // namespace

float mix_batch(const MixupConfig& cfg, float* images, const int64_t* labels, float* targets, int64_t B,
                int64_t C, int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step) {
  const int64_t n = C * H * W;
  thread_local std::vector<float> keep;  // the pair's first image, unmixed; reused across steps
  keep.resize(size_t(n));
  const RowDraws draws(cfg, H, W, seed, step, B);
  float first_lam = 1.f;
  for (int64_t b = 0; b < (B + 1) / 2; ++b) {
    const int64_t q = B - 1 - b;
    const MixDraw db = draws.at(b);
    const MixDraw dq = q == b ? db : draws.at(q);
    if (b == 0) first_lam = db.lam;
    // The middle row of an odd batch is its own partner: unchanged.
    if (q != b && (db.lam < 1.f || dq.lam < 1.f)) {
      float* x = images + b * n;
      float* y = images + q * n;
      std::copy(x, x + n, keep.begin());
      mix_image(x, y, db, C, H, W);
      mix_image(y, keep.data(), dq, C, H, W);
    }
    soft_target(targets + b * K, labels[b], labels[q], db.lam, K, smoothing);
    if (q != b) soft_target(targets + q * K, labels[q], labels[b], dq.lam, K, smoothing);
  }
  return first_lam;
}

float mix_shard(const MixupConfig& cfg, float* images, const float* partners, const int64_t* labels,
                const int64_t* partner_labels, float* targets, int64_t first, int64_t n, int64_t B, int64_t C,
                int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step) {
  const int64_t m = C * H * W;
  const RowDraws draws(cfg, H, W, seed, step, B);
  float first_lam = 1.f;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = first + i;
    const MixDraw d = draws.at(b);
    if (i == 0) first_lam = d.lam;
    if (b != B - 1 - b) mix_image(images + i * m, partners + i * m, d, C, H, W);
    soft_target(targets + i * K, labels[i], partner_labels[i], d.lam, K, smoothing);
  }
  return first_lam;
}

}  // namespace vit
