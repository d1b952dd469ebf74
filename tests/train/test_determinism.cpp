// Determinism: the same seed and thread count give bit-identical weights after N training
// steps with every kind of randomness on (init, data order, dropout, drop path); another
// seed gives other weights; a fixed shard count gives the same bits on any thread count.
// Also trains a tiny model to check that learning happens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/check.h"
#include "core/file.h"
#include "core/threads.h"
#include "data/augment.h"
#include "data/synthetic.h"
#include "io/checkpoint.h"
#include "support/check.h"
#include "support/dataset_view.h"
#include "support/models.h"
#include "support/temp_dir.h"
#include "train/run_dir.h"
#include "train/trainer.h"

namespace vit {

namespace {
ViTConfig cfg() {
  ViTConfig c = test::mnist_seed_at(12, 4);
  c.pos_drop_rate = c.proj_drop_rate = c.attn_drop_rate = c.drop_rate = 0.1f;
  c.drop_path_rate = 0.2f;
  return c;
}

// shards 0: the default, one per thread. workers: the threads that load batches.
std::vector<float> run(uint64_t seed, int threads, int shards = 0, int workers = 1) {
  set_num_threads(threads);
  ViT m(cfg());
  m.init_weights(seed);
  m.set_shards(shards);
  SyntheticDataset data(96, 4, 1, 12, 12, 5);
  TrainConfig t;
  t.epochs = 2;
  t.batch_size = 32;
  t.seed = seed;
  t.sched.lr = 5e-3f;
  t.optim.weight_decay = 0.05f;
  t.clip_grad = 1.f;
  t.workers = workers;
  std::ostringstream log;
  train(m, data, nullptr, t, log);
  return std::vector<float>(m.params().data(), m.params().data() + m.table().total());
}
}  // namespace

// A NaN logit ranks above every number, as torch's topk and argmax rank it (NaN logits scored
// top-1 100%: no class scored above the label's NaN), and NaNs among themselves in class order,
// as the argmax takes the first: right where the NaN is the true class's, as the confusion
// matrix has it (the true class's own NaN counted against it: top-1 0% over a confusion
// matrix with a third of the images right).
TEST(Evaluate, NanLogitsRankFirst) {
  ViT m(test::tiny_vit());
  m.init_weights(1);
  const SyntheticDataset data(20, m.config().num_classes, m.config().in_chans, m.config().img_h,
                              m.config().img_w, 3);
  EvalResult ok = evaluate(m, data, 8);
  EXPECT_GT(ok.top5, 0.0);
  Tensor bias = m.param("head.bias");
  bias.data[2] = std::numeric_limits<float>::quiet_NaN();  // one class's logit: NaN, ranked first
  std::vector<float> image(size_t(m.config().in_chans * m.config().img_h * m.config().img_w));
  double of0 = 0, of2 = 0, below5 = 0;  // images of class 0, of class 2, of classes 0-4
  for (int64_t i = 0; i < data.size(); ++i) {
    const int64_t label = data.get(i, image.data());
    of0 += label == 0;
    of2 += label == 2;
    below5 += label < 5;
  }
  ASSERT_GT(of2, 0.0);
  ASSERT_LT(of2, double(data.size()));
  EvalResult one = evaluate(m, data, 8);
  EXPECT_DOUBLE_EQ(one.top1, of2 / double(data.size()));
  for (int32_t p : one.predictions) EXPECT_EQ(p, 2);
  for (int64_t k = 0; k < bias.numel(); ++k) bias.data[k] = std::numeric_limits<float>::quiet_NaN();
  EvalResult all = evaluate(m, data, 8);
  for (int32_t p : all.predictions) EXPECT_EQ(p, 0);  // the first NaN
  EXPECT_DOUBLE_EQ(all.top1, of0 / double(data.size()));
  EXPECT_DOUBLE_EQ(all.top5, below5 / double(data.size()));
}

// Equal logits rank in class order, as the argmax (and torch's) takes the first: a zero head
// scores top-1 on the images of class 0 and top-5 on those of classes 0-4 (ties counted as
// right: it scored 100%, and training ranked such a model best).
TEST(Evaluate, TiedLogitsRankInClassOrder) {
  ViTConfig c = test::tiny_vit();
  c.num_classes = 7;
  ViT m(c);
  m.init_weights(1);
  const SyntheticDataset data(40, c.num_classes, c.in_chans, c.img_h, c.img_w, 3);
  for (const char* name : {"head.weight", "head.bias"}) {
    Tensor t = m.param(name);
    std::fill(t.data, t.data + t.numel(), 0.f);
  }
  std::vector<float> image(size_t(c.in_chans * c.img_h * c.img_w));
  double first = 0, first5 = 0;
  for (int64_t i = 0; i < data.size(); ++i) {
    const int64_t label = data.get(i, image.data());
    first += label == 0;
    first5 += label < 5;
  }
  ASSERT_GT(first5, first);
  ASSERT_LT(first5, double(data.size()));
  const EvalResult r = evaluate(m, data, 8);
  EXPECT_DOUBLE_EQ(r.top1, first / double(data.size()));
  EXPECT_DOUBLE_EQ(r.top5, first5 / double(data.size()));
  for (int32_t p : r.predictions) EXPECT_EQ(p, 0);
}

TEST(Determinism, SameSeedAndThreadsGiveTheSameBits) {
  const int threads = num_threads() > 1 ? 2 : 1;
  auto a = run(11, threads), b = run(11, threads), c = run(12, threads);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)));
  const auto loaded_by_three = run(11, threads, 0, 3);  // vit train -j 3: the same batches
  EXPECT_EQ(0, std::memcmp(a.data(), loaded_by_three.data(), a.size() * sizeof(float)));
}

// With the shard count fixed (vit train --shards), the thread count changes only who runs
// what: every shard's operations give the same bits on one thread as on several (the
// kernels' reductions have fixed orders, the library products fixed tiles), and the shards'
// gradients are summed in shard order. 1 shard: every operation split across the threads;
// 3 shards of a batch of 32: uneven shards, more shards than threads. The default (one shard
// per thread) is what differs, so it is checked to differ: the test would pass vacuously if
// the thread count were not applied.
TEST(Determinism, AFixedShardCountGivesTheSameBitsOnAnyThreadCount) {
  const int saved = num_threads();
  for (int shards : {1, 2, 3}) {
    const auto one = run(11, 1, shards), two = run(11, 2, shards);
    ASSERT_EQ(one.size(), two.size());
    size_t bad = 0;
    while (bad < one.size() && one[bad] == two[bad]) ++bad;
    EXPECT_EQ(bad, one.size()) << shards << " shard(s): first difference at parameter " << bad << ": "
                               << (bad < one.size() ? one[bad] : 0.f) << " on 1 thread, "
                               << (bad < one.size() ? two[bad] : 0.f) << " on 2";
  }
  const auto one = run(11, 1), two = run(11, 2);  // 1 shard, then 2
  EXPECT_NE(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)))
      << "one shard per thread: 1 and 2 threads sum the gradients in other orders";
  set_num_threads(saved);
}

namespace {
// A run's summary.csv without its last column (seconds: no two runs share it).
std::string without_seconds(const std::string& path) {
  std::istringstream csv(read_text_file(path));
  std::string out;
  for (std::string line; std::getline(csv, line);) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

// A run killed after epoch 2's checkpoint and resumed gives the uninterrupted run's bits.
void resume_gives_the_same_bits(bool amp) {
  set_num_threads(num_threads() > 1 ? 2 : 1);
  SyntheticDataset data(96, 4, 1, 12, 12, 5);
  auto make_cfg = [](const std::string& out) {
    TrainConfig t;
    t.epochs = 4;
    t.batch_size = 32;
    t.seed = 21;
    t.sched.lr = 5e-3f;
    t.warmup_epochs = 1;
    t.optim.weight_decay = 0.05f;
    t.output = out;
    t.checkpoint_hist = 2;
    return t;
  };
  std::ostringstream log;
  test::TempDir a("resume_a"), b("resume_b");
  ViT straight(cfg());
  straight.init_weights(21);
  straight.set_amp(amp);
  train(straight, data, &data, make_cfg(a.str()), log);

  // The same run, killed when epoch 3 starts (after epoch 2's checkpoint)...
  ViT first(cfg());
  first.init_weights(21);
  first.set_amp(amp);
  TrainConfig t = make_cfg(b.str());
  t.on_epoch_start = [](int64_t e) {
    if (e == 2) throw std::runtime_error("simulated kill");
  };
  EXPECT_THROW(train(first, data, &data, t, log), std::runtime_error);
  // As if the kill had come after epoch 3 wrote its checkpoint but before its state: kept,
  // the file must be written again; not kept, it must go. And a file that was not pruned.
  write_file_atomic(b / "checkpoint-3.safetensors", "from an epoch the state does not have");
  write_file_atomic(b / "checkpoint-9.safetensors", "left by a crash before the prune");
  // ...then resumed by a fresh process (a new model with other initial weights).
  ViT resumed(cfg());
  resumed.init_weights(999);
  resumed.set_amp(amp);
  TrainConfig r = make_cfg(b.str());
  r.resume = true;
  auto hist = train(resumed, data, &data, r, log);
  ASSERT_EQ(hist.size(), 4u) << "the history must include the epochs before the interruption";
  for (auto& e : hist)  // as the state keeps them: the epochs resumed and trained alike
    EXPECT_TRUE(e.eval.confusion.empty()) << "epoch " << e.epoch;
  EXPECT_EQ(0, std::memcmp(straight.params().data(), resumed.params().data(),
                           straight.table().total() * sizeof(float)))
      << log.str();
  EXPECT_EQ(read_text_file(a / "summary.csv").substr(0, 60), read_text_file(b / "summary.csv").substr(0, 60));
  // The checkpoint history is the uninterrupted run's, file for file and byte for byte.
  const auto kept = kept_checkpoints(epoch_scores(hist, true), 2);
  std::vector<int64_t> sorted_kept(kept.begin(), kept.end());
  std::sort(sorted_kept.begin(), sorted_kept.end());
  EXPECT_EQ(checkpoint_epochs(a.str()), sorted_kept);
  EXPECT_EQ(checkpoint_epochs(b.str()), sorted_kept);
  for (int64_t e : kept)
    EXPECT_EQ(read_text_file(a / checkpoint_name(e)), read_text_file(b / checkpoint_name(e)))
        << "epoch " << e;
  // The best kept is best.safetensors; the last epoch's, if kept, is last.safetensors.
  EXPECT_EQ(read_text_file(b / checkpoint_name(kept.front())), read_text_file(b / "best.safetensors"));
  if (std::find(kept.begin(), kept.end(), 4) != kept.end()) {
    EXPECT_EQ(read_text_file(b / checkpoint_name(4)), read_text_file(b / "last.safetensors"));
  }
}
}  // namespace

TEST(Resume, InterruptedRunContinuesToTheSameBits) {
  resume_gives_the_same_bits(false);
}

// The same with mixed precision (--amp): its bf16 weights are made again from the resumed
// fp32 ones, so nothing of it needs saving.
TEST(Resume, InterruptedAmpRunContinuesToTheSameBits) {
  if (!ops::bf16_available()) GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU";
  resume_gives_the_same_bits(true);
}

namespace {
// Training data that fails once, at sample `victim` of epoch `epoch_to_fail`: a kill within
// an epoch (the prefetcher passes the error on at the step that loads it).
class FailsOnce : public test::DatasetView {
 public:
  using DatasetView::DatasetView;
  int64_t epoch = 0, epoch_to_fail = -1, victim = -1;
  int64_t get(int64_t i, float* image) const override {
    if (epoch == epoch_to_fail && i == victim) throw std::runtime_error("simulated kill");
    return base_.get(i, image);
  }
};
}  // namespace

namespace {
// Killed within an epoch, with augmentation, mixup, dropout and drop path on: the resumed
// run goes on after the last recovery state's step and ends with the uninterrupted bits.
// Global batches of 16 as `micro` x `accum` (accumulation steps).
// With `ema`, a model EMA (warmup on) is resumed to the same bits too.
void killed_within_an_epoch(int64_t micro, int64_t accum, bool ema) {
  set_num_threads(num_threads() > 1 ? 2 : 1);
  SyntheticDataset base(96, 4, 1, 12, 12, 5);
  AugmentConfig ac;
  ac.crop_pad = 2;
  ac.hflip = 0.5f;
  ac.mean = ac.std = {0.5f};
  AugmentedDataset augmented(base, ac, 21);
  FailsOnce data(augmented);
  auto make_cfg = [&](const std::string& out) {
    TrainConfig t;
    t.epochs = 3;
    t.batch_size = micro;  // 6 steps of 16 an epoch
    t.grad_accum_steps = accum;
    t.model_ema = ema;
    t.model_ema_decay = 0.9f;
    t.model_ema_warmup = true;
    t.seed = 21;
    t.sched.lr = 5e-3f;
    t.mixup.mixup_alpha = 0.4f;
    t.output = out;
    t.recovery_interval = 3;  // after global steps 3, 6, 9, ...: epoch 2's third step is one
    t.on_epoch_start = [&](int64_t e) {
      augmented.set_epoch(e);
      data.epoch = e;
    };
    return t;
  };
  std::ostringstream log;
  test::TempDir a("recover_a"), b("recover_b");
  ViT straight(cfg());
  straight.init_weights(21);
  train(straight, data, &base, make_cfg(a.str()), log);
  // Killed at epoch 2's step 5 (the sample it loads first fails).
  data.epoch_to_fail = 1;
  data.victim = epoch_order(96, 21, 1)[5 * 16];
  ViT first(cfg());
  first.init_weights(21);
  EXPECT_THROW(train(first, data, &base, make_cfg(b.str()), log), std::runtime_error);
  ASSERT_TRUE(std::filesystem::exists(b / "recovery.state.safetensors")) << log.str();
  data.epoch_to_fail = -1;
  ViT resumed(cfg());
  resumed.init_weights(999);
  TrainConfig r = make_cfg(b.str());
  r.resume = true;
  std::ostringstream rlog;
  auto hist = train(resumed, data, &base, r, rlog);
  EXPECT_NE(rlog.str().find("in epoch 2 after step 3 of 6 (global step 9, recovery.state.safetensors)"),
            std::string::npos)
      << rlog.str();
  ASSERT_EQ(hist.size(), 3u);
  EXPECT_EQ(0, std::memcmp(straight.params().data(), resumed.params().data(),
                           straight.table().total() * sizeof(float)));
  // The epoch's loss and accuracy count the steps before the kill too.
  EXPECT_EQ(without_seconds(a / "summary.csv"), without_seconds(b / "summary.csv"));
  EXPECT_FALSE(std::filesystem::exists(b / "recovery.state.safetensors")) << "removed at the epoch's end";
  if (ema) {
    for (const char* f : {"last_ema.safetensors", "best_ema.safetensors"})
      EXPECT_EQ(read_text_file(a / f), read_text_file(b / f)) << f;
    EXPECT_NE(read_text_file(b / "last_ema.safetensors"), read_text_file(b / "last.safetensors"));
  }
}
}  // namespace

TEST(Resume, KilledWithinAnEpochContinuesAfterItsRecoveryStateToTheSameBits) {
  killed_within_an_epoch(16, 1, false);
}

// With gradient accumulation the states follow optimizer steps: a run killed while it
// loads a step's micro-batches resumes at the step's start (after the last state) and ends
// with the uninterrupted bits.
TEST(Resume, KilledWithinAnAccumulatingEpochContinuesToTheSameBits) {
  killed_within_an_epoch(8, 2, false);
}

// The model EMA is in the training states: a resume gives its uninterrupted bits.
TEST(Resume, KilledWithinAnEpochContinuesTheModelEmaToTheSameBits) {
  killed_within_an_epoch(8, 2, true);
}

namespace {
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

// One optimizer step (32 samples, batch 32) with a model EMA of `decay`; returns the
// weights before and after the step and the EMA (last_ema.safetensors).
struct EmaStep {
  std::vector<float> before, after, ema;
  std::string summary;
};
EmaStep ema_step(float decay, bool warmup) {
  set_num_threads(num_threads() > 1 ? 2 : 1);
  test::TempDir out("ema_step");
  SyntheticDataset data(32, 4, 1, 12, 12, 5);
  ViT m(cfg());
  m.init_weights(3);
  EmaStep r;
  r.before.assign(m.params().data(), m.params().data() + m.table().total());
  TrainConfig t;
  t.epochs = 1;
  t.batch_size = 32;
  t.seed = 3;
  t.sched.lr = 5e-2f;
  t.model_ema = true;
  t.model_ema_decay = decay;
  t.model_ema_warmup = warmup;
  t.output = out.str();
  std::ostringstream log;
  train(m, data, &data, t, log);
  r.after.assign(m.params().data(), m.params().data() + m.table().total());
  auto e = load_checkpoint(out / "last_ema.safetensors");
  r.ema.assign(e->params().data(), e->params().data() + e->table().total());
  EXPECT_TRUE(std::filesystem::exists(out / "best_ema.safetensors"));
  r.summary = read_text_file(out / "summary.csv");
  return r;
}
}  // namespace

// timm's ModelEmaV3: ema = lerp(ema, weights, 1 - decay) after each optimizer step, from the
// initial weights; with warmup the first step's decay is 1 - 2^(-2/3).
TEST(ModelEma, FollowsTheWeightsByItsDecay) {
  for (bool warmup : {false, true}) {
    const EmaStep s = ema_step(0.75f, warmup);
    const float a = warmup ? 1.f - float(1.0 - std::pow(2.0, -2.0 / 3.0)) : 0.25f;
    double worst = 0;
    for (size_t i = 0; i < s.ema.size(); ++i) {
      const double want = double(s.before[i]) + double(a) * (double(s.after[i]) - double(s.before[i]));
      worst = std::max(worst, std::abs(double(s.ema[i]) - want));
    }
    EXPECT_LE(worst, 1e-6) << "warmup " << warmup;
    EXPECT_NE(s.ema, s.after);
    EXPECT_NE(s.summary.find("eval_top5,ema_eval_loss,ema_eval_top1,ema_eval_top5,lr,seconds\n"),
              std::string::npos)
        << s.summary;
  }
  // Decay 0 is the weights themselves (up to the rounding of e + (w - e)), decay 1 the
  // initial weights.
  const EmaStep zero = ema_step(0.f, false);
  EXPECT_LE(max_abs_diff(zero.ema, zero.after), 1e-6);
  const EmaStep one = ema_step(1.f, false);
  EXPECT_EQ(one.ema, one.before);
}

namespace {
// One optimizer step on the 128 samples of `data` (dropout, drop path and mixup on), as one
// batch of 128 or as `accum` micro-batches of 128 / accum.
std::vector<float> one_step(int64_t accum, const std::string& opt, int threads) {
  set_num_threads(threads);
  ViT m(cfg());
  m.init_weights(5);
  SyntheticDataset data(128, 4, 1, 12, 12, 5);
  TrainConfig t;
  t.epochs = 1;
  t.batch_size = 128 / accum;
  t.grad_accum_steps = accum;
  t.seed = 5;
  t.optim.name = opt;
  t.sched.lr = 0.1f;
  t.sched.name = "none";
  t.optim.weight_decay = 0.05f;
  t.smoothing = 0.1f;
  t.mixup.mixup_alpha = 0.4f;
  std::ostringstream log;
  train(m, data, nullptr, t, log);
  return std::vector<float>(m.params().data(), m.params().data() + m.table().total());
}
}  // namespace

// -b 64 --grad-accum-steps 2 is one step of -b 128: the same samples, mixup pairs and
// dropout / drop-path masks (drawn by the index in the global batch), gradients summed in
// another order. SGD moves each weight by lr x its gradient: the weights agree to float
// rounding (lr 0.1: max |difference| 5e-7, measured 3.7e-9; AdamW, whose first step divides
// by the gradient's size, measured 4.5e-6). Deterministic for a thread count
// (shards split each micro-batch).
TEST(GradAccum, TwoMicroBatchesOf64AreOneStepOf128) {
  const int threads = num_threads() > 1 ? 2 : 1;
  const auto one = one_step(1, "sgd", threads), two = one_step(2, "sgd", threads);
  const auto four = one_step(4, "sgd", threads), before = [] {
    ViT m(cfg());
    m.init_weights(5);
    return std::vector<float>(m.params().data(), m.params().data() + m.table().total());
  }();
  ASSERT_EQ(one.size(), two.size());
  EXPECT_GT(max_abs_diff(one, before), 1e-3) << "the step moved the weights";
  EXPECT_LE(max_abs_diff(one, two), 5e-7);
  EXPECT_LE(max_abs_diff(one, four), 5e-7);
  const auto again = one_step(2, "sgd", threads);
  EXPECT_EQ(0, std::memcmp(two.data(), again.data(), two.size() * sizeof(float)));
}

namespace {
// A short run in batches of 32, written to `out`.
TrainConfig short_run(const std::string& out, int64_t epochs) {
  TrainConfig t;
  t.epochs = epochs;
  t.batch_size = 32;
  t.output = out;
  return t;
}
}  // namespace

// --sched step --decay-epochs: the lr is multiplied by decay_rate every decay_epochs epochs,
// counted from the run's start as timm's StepLRScheduler counts them (a warmup only overrides
// the first steps), not every optimizer step as before the flag existed. 3 steps an epoch;
// EpochStats::lr is the epoch's last step's.
TEST(Schedule, StepDecaysEveryDecayEpochsCountedFromTheStartAsTimm) {
  SyntheticDataset data(96, 4, 1, 12, 12, 5);
  TrainConfig t = short_run("", 3);
  t.sched.name = "step";
  t.sched.lr = 1e-3f;
  t.sched.decay_rate = 0.5f;
  t.decay_epochs = 1;
  t.warmup_epochs = 1;
  std::ostringstream log;
  ViT m(cfg());
  auto h = train(m, data, nullptr, t, log);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_FLOAT_EQ(float(h[0].lr), 1e-3f * 2 / 3) << "step 2 of a 3-step warmup from 0";
  EXPECT_FLOAT_EQ(float(h[1].lr), 0.5e-3f) << "step 5: one decay (after the warmup: none)";
  EXPECT_FLOAT_EQ(float(h[2].lr), 0.25e-3f) << "step 8: two";
  t.warmup_epochs = 0;
  t.decay_epochs = 0.5f;  // 1.5 steps, timm's decay_t (it was rounded to 2)
  ViT n(cfg());
  h = train(n, data, nullptr, t, log);
  EXPECT_FLOAT_EQ(float(h[2].lr), 1e-3f / 32) << "step 8: 8 // 1.5 = 5 decays";
  t.decay_epochs = 0;
  EXPECT_THROW(t.validate(), Error);
  // --sched multistep --decay-milestones 1 2: steps 3 and 6, each applying a step early.
  t.decay_epochs = 1;
  t.sched.name = "multistep";
  t.decay_milestones = {1, 2};
  ViT ms(cfg());
  h = train(ms, data, nullptr, t, log);
  EXPECT_FLOAT_EQ(float(h[0].lr), 0.5e-3f) << "step 2: milestone 3 applies from step 2";
  EXPECT_FLOAT_EQ(float(h[1].lr), 0.25e-3f) << "step 5: milestone 6 too";
  EXPECT_FLOAT_EQ(float(h[2].lr), 0.25e-3f) << "step 8";
  t.decay_milestones = {2, 1};
  EXPECT_THROW(t.validate(), Error);
}

// --cooldown-epochs (timm's, DeiT's recipe): the cosine spans --epochs, then the run goes on
// at min_lr; the first epochs are the run without a cooldown, bit for bit.
TEST(Schedule, CooldownEpochsFollowTheCosineAtItsFloor) {
  SyntheticDataset data(96, 4, 1, 12, 12, 5);
  TrainConfig t = short_run("", 2);
  t.sched.lr = 1e-3f;
  t.sched.min_lr = 1e-5f;
  std::ostringstream log;
  ViT plain_model(cfg());
  const auto plain = train(plain_model, data, nullptr, t, log);
  t.cooldown_epochs = 2;
  ViT m(cfg());
  const auto h = train(m, data, nullptr, t, log);
  ASSERT_EQ(h.size(), 4u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(h[e].lr, plain[e].lr) << "epoch " << e + 1;
    EXPECT_EQ(h[e].train_loss, plain[e].train_loss) << "epoch " << e + 1;
  }
  EXPECT_GT(h[0].lr, 1e-5);
  EXPECT_FLOAT_EQ(float(h[2].lr), 1e-5f);
  EXPECT_FLOAT_EQ(float(h[3].lr), 1e-5f);
  EXPECT_EQ(t.total_epochs(), 4);
  t.sched.name = "step";
  EXPECT_THROW(t.validate(), Error);
  t.sched.name = "cosine";
  t.cooldown_epochs = -1;
  EXPECT_THROW(t.validate(), Error);
}

// --eval-metric loss (timm's): best.safetensors and the checkpoint history are the epochs with
// the lowest eval loss, and their files say what ranked them; top5 needs an eval set.
TEST(EvalMetric, LossPicksTheLowestEvalLossForTheBestAndTheHistory) {
  SyntheticDataset data(96, 4, 1, 12, 12, 5);
  test::TempDir dir("eval_metric");
  TrainConfig t = short_run(dir.str(), 4);
  // 4 epochs in which the eval top-1 stays where it is (31.25% on every path here) while the
  // loss falls: top-1 keeps the first epochs (ties), the loss the last.
  t.sched.lr = 2e-2f;
  t.eval_metric = "loss";
  t.checkpoint_hist = 2;
  std::ostringstream log;
  ViT m(cfg());
  m.init_weights(5);
  const auto h = train(m, data, &data, t, log);
  ASSERT_EQ(h.size(), 4u);
  std::vector<size_t> order = {0, 1, 2, 3};  // epochs by eval loss, lowest first, ties earliest first
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return h[a].eval.loss < h[b].eval.loss; });
  const auto best = read_safetensors_metadata(dir / "best.safetensors");
  EXPECT_EQ(best.at("epoch"), std::to_string(order[0] + 1)) << log.str();
  EXPECT_EQ(best.at("metric"), "eval_loss");
  std::vector<int64_t> kept = {int64_t(order[0]) + 1, int64_t(order[1]) + 1};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(checkpoint_epochs(dir.str()), kept);
  // Not what top-1 would pick: the test must tell the metrics apart.
  EXPECT_NE(kept_checkpoints(epoch_scores(h, true, "top1"), 2),
            kept_checkpoints(epoch_scores(h, true, "loss"), 2))
      << "choose a run whose top-1 and loss rank its epochs differently";
  t.eval_metric = "top5";
  t.output.clear();
  ViT n(cfg());
  EXPECT_THROW(train(n, data, nullptr, t, log), Error);
  t.eval_metric = "top3";
  EXPECT_THROW(t.validate(), Error);
}

// The state is written last at an epoch's end: a run stopped by a failed write before it
// (summary.csv cannot be replaced: a directory stands in its way) still has the previous
// epoch's state, and resuming writes the epoch's files again. Had the state gone first, the
// run would be "finished" with a summary that lacks its last epoch.
TEST(Resume, AnEpochWhoseFilesWereNotAllWrittenIsDoneAgain) {
  SyntheticDataset data(64, 4, 1, 12, 12, 5);
  test::TempDir dir("resume_commit");
  TrainConfig t = short_run(dir.str(), 2);
  t.on_epoch_start = [&](int64_t e) {
    if (e == 1) {
      std::filesystem::remove(dir / "summary.csv");
      std::filesystem::create_directories(dir / "summary.csv/x");
    }
  };
  std::ostringstream log;
  ViT m(cfg());
  m.init_weights(3);
  EXPECT_THROW(train(m, data, nullptr, t, log), Error);
  EXPECT_NE(
      read_safetensors_metadata(dir / "last.state.safetensors").at("vitcpp_state").find("\"epochs_done\":1"),
      std::string::npos);
  std::filesystem::remove_all(dir / "summary.csv");
  t.on_epoch_start = nullptr;
  t.resume = true;
  ViT resumed(cfg());
  std::ostringstream rlog;
  EXPECT_EQ(train(resumed, data, nullptr, t, rlog).size(), 2u);
  EXPECT_NE(rlog.str().find("after epoch 1"), std::string::npos) << rlog.str();
  EXPECT_NE(read_text_file(dir / "summary.csv").find("\n2,"), std::string::npos);
  EXPECT_EQ(0, std::memcmp(m.params().data(), resumed.params().data(), m.table().total() * sizeof(float)));
}

TEST(Resume, RefusesADifferentRun) {
  SyntheticDataset data(64, 4, 1, 12, 12, 5);
  test::TempDir dir("resume_bad");
  TrainConfig t = short_run(dir.str(), 1);
  std::ostringstream log;
  ViT m(cfg());
  train(m, data, nullptr, t, log);
  t.resume = true;
  t.batch_size = 16;
  try {
    train(m, data, nullptr, t, log);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch size"), std::string::npos) << e.what();
  }
  t.batch_size = 32;
  t.optim.name = "sgd";
  EXPECT_THROW(train(m, data, nullptr, t, log), Error);
}

namespace {
// A run asked to stop (TrainConfig::stop_requested answers 15 from its `ask`-th question on:
// one question per step, one after each epoch's files but the last) throws Stopped saying
// `where` with the state `state` it wrote, and --resume ends with the uninterrupted run's
// bits and summary. 3 epochs of 6 steps: question 8 is epoch 2's first step, 6 epoch 1's
// last step, 7 the one after epoch 1's files (a signal during its eval).
void stopped_then_resumed(int ask, const std::string& where, const std::string& state) {
  set_num_threads(num_threads() > 1 ? 2 : 1);
  SyntheticDataset data(96, 4, 1, 12, 12, 5);
  auto make_cfg = [](const std::string& out) {
    TrainConfig t;
    t.epochs = 3;
    t.batch_size = 16;
    t.seed = 5;
    t.sched.lr = 5e-3f;
    t.recovery_interval = 0;  // no recovery states but the one the stop writes
    t.output = out;
    return t;
  };
  std::ostringstream log;
  test::TempDir a("stop_a"), b("stop_b");
  ViT straight(cfg());
  straight.init_weights(5);
  train(straight, data, &data, make_cfg(a.str()), log);
  ViT first(cfg());
  first.init_weights(5);
  TrainConfig t = make_cfg(b.str());
  int asked = 0;
  t.stop_requested = [&] { return ++asked >= ask ? 15 : 0; };
  try {
    train(first, data, &data, t, log);
    FAIL() << "expected Stopped";
  } catch (const Stopped& e) {
    EXPECT_EQ(std::string(e.what()), "stopped " + where + ": the run's state is in " + (b / state));
    EXPECT_EQ(e.state_file, b / state);
    EXPECT_EQ(e.reason, 15);
  }
  EXPECT_EQ(asked, ask) << "asked again after it said stop";
  ASSERT_TRUE(std::filesystem::exists(b / state));
  EXPECT_EQ(std::filesystem::exists(b / "recovery.state.safetensors"), state == "recovery.state.safetensors");
  ViT resumed(cfg());
  resumed.init_weights(999);
  TrainConfig r = make_cfg(b.str());
  r.resume = true;
  std::ostringstream rlog;
  ASSERT_EQ(train(resumed, data, &data, r, rlog).size(), 3u) << rlog.str();
  EXPECT_EQ(0, std::memcmp(straight.params().data(), resumed.params().data(),
                           straight.table().total() * sizeof(float)))
      << rlog.str();
  EXPECT_EQ(without_seconds(a / "summary.csv"), without_seconds(b / "summary.csv"));
}
}  // namespace

TEST(Resume, AStopRequestWithinAnEpochWritesARecoveryStateThatResumesToTheSameBits) {
  stopped_then_resumed(8, "after step 1 of 6 in epoch 2", "recovery.state.safetensors");
}

TEST(Resume, AStopRequestAtAnEpochsLastStepEndsTheEpochFirst) {
  stopped_then_resumed(6, "after epoch 1", "last.state.safetensors");
}

TEST(Resume, AStopRequestDuringTheEvalStopsBeforeTheNextEpoch) {
  stopped_then_resumed(7, "after epoch 1", "last.state.safetensors");
}

// Asked at the last step of the last epoch, the run is complete: it ends as usual. Without an
// output directory a stop writes nothing and says so.
TEST(Resume, AStopRequestAtTheRunsEndOrWithoutAnOutputDirectory) {
  SyntheticDataset data(64, 4, 1, 12, 12, 5);
  test::TempDir dir("stop_end");
  TrainConfig t = short_run(dir.str(), 2);  // 2 epochs of 2 steps
  int asked = 0;
  t.stop_requested = [&] { return ++asked >= 5 ? SIGTERM : 0; };  // steps 1, 2, epoch 1, steps 3, 4
  std::ostringstream log;
  ViT m(cfg());
  EXPECT_EQ(train(m, data, nullptr, t, log).size(), 2u);
  EXPECT_EQ(asked, 5);
  t.output.clear();
  asked = 0;
  t.stop_requested = [&] { return ++asked >= 1 ? SIGINT : 0; };
  ViT n(cfg());
  try {
    train(n, data, nullptr, t, log);
    FAIL() << "expected Stopped";
  } catch (const Stopped& e) {
    EXPECT_EQ(std::string(e.what()),
              "stopped after step 1 of 2 in epoch 1: nothing written (no output directory)");
    EXPECT_EQ(e.state_file, "");
    EXPECT_EQ(e.reason, SIGINT);
  }
}

namespace {
// A dataset whose sample 5 turns to NaN from the second epoch on.
class PoisonedAfterEpoch : public SyntheticDataset {
 public:
  using SyntheticDataset::SyntheticDataset;
  int64_t epoch = 0;
  int64_t get(int64_t i, float* image) const override {
    const int64_t label = SyntheticDataset::get(i, image);
    if (epoch >= 1 && i == 5) image[0] = std::numeric_limits<float>::quiet_NaN();
    return label;
  }
};
}  // namespace

TEST(Training, NonFiniteLossStopsTheRunAndKeepsTheLastGoodCheckpoint) {
  PoisonedAfterEpoch data(64, 4, 1, 12, 12, 5);
  test::TempDir dir("nan");
  TrainConfig t;
  t.epochs = 3;
  t.batch_size = 16;
  t.output = dir.str();
  t.on_epoch_start = [&](int64_t e) { data.epoch = e; };
  std::ostringstream log;
  ViT m(cfg());
  const std::string msg = test::error_of([&] { train(m, data, nullptr, t, log); });
  EXPECT_NE(msg.find("not finite"), std::string::npos) << msg;
  // Epoch 1's checkpoint is intact and loads.
  const auto st = SafeTensors::open(dir / "last.safetensors");
  EXPECT_EQ(st.metadata().at("epoch"), "1");
  ViT again(cfg());
  load_weights(again, st);
}

TEST(Training, LearnsASyntheticTask) {
  const ViTConfig c = test::mnist_seed_at(16, 4);
  ViT m(c);
  m.init_weights(1);
  SyntheticDataset train_set(512, 4, 1, 16, 16, 9, 0.5f), eval_set(128, 4, 1, 16, 16, 9, 0.5f, 512);
  TrainConfig t;
  t.epochs = 6;
  t.batch_size = 32;
  t.optim.name = "adam";
  t.sched.lr = 5e-3f;
  std::ostringstream log;
  auto hist = train(m, train_set, &eval_set, t, log);
  // Chance is 25%; the classes differ by fixed patterns, so a working model gets far above.
  EXPECT_GT(hist.back().eval.top1, 0.8) << log.str();
  EXPECT_LT(hist.back().train_loss, hist.front().train_loss) << log.str();
}

}  // namespace vit
