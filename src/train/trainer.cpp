#include "vit/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "vit/core/error.h"
#include "vit/core/file.h"
#include "vit/io/checkpoint.h"
#include "vit/train/step.h"

namespace vit {

namespace fs = std::filesystem;

void TrainConfig::validate() const {
  VIT_CHECK(epochs > 0, "epochs must be positive, got ", epochs);
  VIT_CHECK(batch_size > 0, "batch size must be positive, got ", batch_size);
  VIT_CHECK(warmup_epochs >= 0.f, "warmup epochs must be non-negative");
  VIT_CHECK(smoothing >= 0.f && smoothing < 1.f, "label smoothing must be in [0, 1), got ", smoothing);
  VIT_CHECK(clip_grad >= 0.f, "clip grad must be non-negative");
  optim.validate();
}

namespace {

void check_shapes(const ViT& model, const Dataset& d) {
  const ViTConfig& c = model.config();
  VIT_CHECK(d.channels() == c.in_chans && d.height() == c.img_h && d.width() == c.img_w, d.describe(),
            ": samples are ", d.channels(), "x", d.height(), "x", d.width(), " but the model takes ",
            c.in_chans, "x", c.img_h, "x", c.img_w);
  VIT_CHECK(d.num_classes() <= c.num_classes, d.describe(), " has ", d.num_classes(),
            " classes, the model's head has ", c.num_classes);
}

// Fills images[B,C,H,W] and labels[B] with samples order[first..first+B).
void load_batch(const Dataset& d, const std::vector<int64_t>& order, int64_t first, int64_t B, float* images,
                int64_t* labels) {
  const int64_t n = d.channels() * d.height() * d.width();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) labels[b] = d.get(order[first + b], images + b * n);
}

std::string summary_csv(const std::vector<EpochStats>& hist) {
  std::ostringstream os;
  os << "epoch,train_loss,train_top1,eval_loss,eval_top1,eval_top5,lr,seconds\n" << std::setprecision(6);
  for (auto& e : hist)
    os << e.epoch << ',' << e.train_loss << ',' << e.train_top1 << ',' << e.eval.loss << ',' << e.eval.top1
       << ',' << e.eval.top5 << ',' << e.lr << ',' << e.seconds << '\n';
  return os.str();
}

}  // namespace

std::vector<double> EvalResult::per_class() const {
  std::vector<double> acc(num_classes, 0.0);
  for (int64_t k = 0; k < num_classes; ++k) {
    int64_t total = 0;
    for (int64_t j = 0; j < num_classes; ++j) total += confusion[k * num_classes + j];
    acc[k] = total ? double(confusion[k * num_classes + k]) / double(total) : 0.0;
  }
  return acc;
}

EvalResult evaluate(ViT& model, const Dataset& data, int64_t batch_size) {
  check_shapes(model, data);
  const int64_t K = model.config().num_classes, n = data.channels() * data.height() * data.width();
  std::vector<float> images(batch_size * n), logits(batch_size * K);
  std::vector<int64_t> labels(batch_size), order(data.size());
  for (int64_t i = 0; i < data.size(); ++i) order[i] = i;
  EvalResult r;
  r.num_classes = K;
  r.confusion.assign(K * K, 0);
  double loss_sum = 0;
  int64_t top1 = 0, top5 = 0;
  for (int64_t first = 0; first < data.size(); first += batch_size) {
    const int64_t B = std::min(batch_size, data.size() - first);
    load_batch(data, order, first, B, images.data(), labels.data());
    model.infer(images.data(), B, nullptr, logits.data());
    for (int64_t b = 0; b < B; ++b) {
      const float* z = logits.data() + b * K;
      double mx = z[0], s = 0;
      for (int64_t k = 1; k < K; ++k) mx = std::max<double>(mx, z[k]);
      for (int64_t k = 0; k < K; ++k) s += std::exp(z[k] - mx);
      loss_sum += mx + std::log(s) - z[labels[b]];
      int64_t rank = 0, pred = 0;  // classes scoring above the true one; the argmax
      for (int64_t k = 0; k < K; ++k) {
        rank += z[k] > z[labels[b]];
        if (z[k] > z[pred]) pred = k;
      }
      ++r.confusion[labels[b] * K + pred];
      top1 += rank < 1;
      top5 += rank < 5;
    }
  }
  r.count = data.size();
  r.loss = loss_sum / double(r.count);
  r.top1 = double(top1) / double(r.count);
  r.top5 = double(top5) / double(r.count);
  return r;
}

std::vector<EpochStats> train(ViT& model, const Dataset& train_set, const Dataset* eval_set,
                              const TrainConfig& cfg, std::ostream& log) {
  cfg.validate();
  check_shapes(model, train_set);
  if (eval_set) check_shapes(model, *eval_set);
  const int64_t N = train_set.size(), B = cfg.batch_size;
  const int64_t steps_per_epoch = (N + B - 1) / B;
  ScheduleConfig sched = cfg.sched;
  sched.total_steps = cfg.epochs * steps_per_epoch;
  sched.warmup_steps = int64_t(std::llround(cfg.warmup_epochs * steps_per_epoch));
  sched.validate();
  Optimizer opt(model.table(), cfg.optim);
  LossStep loss_step;
  const int64_t n = train_set.channels() * train_set.height() * train_set.width();
  std::vector<float> images(B * n);
  std::vector<int64_t> labels(B);
  if (!cfg.output.empty()) {
    fs::create_directories(cfg.output);
    model.config().save((fs::path(cfg.output) / "config.json").string());
  }
  log << "training " << train_set.describe() << ", " << cfg.epochs << " epochs of " << steps_per_epoch
      << " steps, batch " << B << ", " << cfg.optim.name << " lr " << cfg.sched.lr << "\n";

  std::vector<EpochStats> hist;
  double best_top1 = -1;
  int64_t step = 0;
  for (int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto order = epoch_order(N, cfg.seed, epoch);
    if (cfg.on_epoch_start) cfg.on_epoch_start(epoch);
    double loss_sum = 0;
    int64_t correct_sum = 0;
    float lr = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
      const int64_t first = s * B, bs = std::min(B, N - first);
      load_batch(train_set, order, first, bs, images.data(), labels.data());
      model.zero_grad();
      int64_t correct = 0;
      Batch batch{images.data(), bs, labels.data(), nullptr, nullptr};
      const double loss =
          loss_step.run(model, batch, cfg.smoothing, ForwardMode{true, cfg.seed, uint64_t(step)}, &correct);
      if (cfg.clip_grad > 0) clip_grad_norm(model.table(), model.grads().data(), cfg.clip_grad);
      lr = lr_at(sched, step);
      opt.step(model.params().data(), model.grads().data(), lr);
      loss_sum += loss * bs;
      correct_sum += correct;
      if (cfg.log_every > 0 && (s + 1) % cfg.log_every == 0)
        log << "epoch " << epoch + 1 << " step " << s + 1 << "/" << steps_per_epoch << " loss "
            << std::setprecision(4) << loss << " lr " << lr << "\n";
    }
    EpochStats e;
    e.epoch = epoch + 1;
    e.train_loss = loss_sum / double(N);
    e.train_top1 = double(correct_sum) / double(N);
    if (eval_set) e.eval = evaluate(model, *eval_set, B);
    e.lr = lr;
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    hist.push_back(e);
    log << "epoch " << e.epoch << "/" << cfg.epochs << ": train loss " << std::setprecision(4) << e.train_loss
        << " top1 " << 100 * e.train_top1 << "%";
    if (eval_set) log << ", eval loss " << e.eval.loss << " top1 " << 100 * e.eval.top1 << "%";
    log << ", " << std::setprecision(3) << double(N) / e.seconds << " img/s, " << e.seconds << " s\n";
    if (!cfg.output.empty()) {
      const fs::path dir(cfg.output);
      save_checkpoint((dir / "last.safetensors").string(), model, {}, false);
      const double score = eval_set ? e.eval.top1 : e.train_top1;
      if (score > best_top1) {
        best_top1 = score;
        save_checkpoint((dir / "best.safetensors").string(), model, {}, false);
      }
      write_file_atomic((dir / "summary.csv").string(), summary_csv(hist));
    }
  }
  return hist;
}

}  // namespace vit
