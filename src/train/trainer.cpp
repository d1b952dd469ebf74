#include "vit/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "vit/core/error.h"
#include "vit/core/file.h"
#include "vit/data/prefetch.h"
#include "vit/io/checkpoint.h"
#include "vit/train/progress.h"
#include "vit/train/step.h"

namespace vit {

namespace fs = std::filesystem;

void TrainConfig::validate() const {
  VIT_CHECK(epochs > 0, "epochs must be positive, got ", epochs);
  VIT_CHECK(batch_size > 0, "batch size must be positive, got ", batch_size);
  VIT_CHECK(warmup_epochs >= 0.f, "warmup epochs must be non-negative");
  VIT_CHECK(smoothing >= 0.f && smoothing < 1.f, "label smoothing must be in [0, 1), got ", smoothing);
  VIT_CHECK(clip_grad >= 0.f, "clip grad must be non-negative");
  VIT_CHECK(patience >= 0, "patience must be non-negative");
  VIT_CHECK(!resume || !output.empty(), "resuming needs the run directory");
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

// The moments' names in the state file: PyTorch's optimizer state keys.
std::vector<std::pair<std::string, Arena*>> moment_arenas(Optimizer& opt) {
  if (opt.config().name == "sgd") return {{"momentum_buffer.", &opt.moment1()}};
  return {{"exp_avg.", &opt.moment1()}, {"exp_avg_sq.", &opt.moment2()}};
}

struct Progress {
  int64_t epochs_done = 0, global_step = 0, since_best = 0;
  double best_top1 = -1;
  std::vector<EpochStats> hist;
};

nlohmann::json to_json(const EpochStats& e) {
  return {{"epoch", e.epoch},
          {"train_loss", e.train_loss},
          {"train_top1", e.train_top1},
          {"eval_loss", e.eval.loss},
          {"eval_top1", e.eval.top1},
          {"eval_top5", e.eval.top5},
          {"lr", e.lr},
          {"seconds", e.seconds}};
}

void save_state(const fs::path& dir, const ViT& model, Optimizer& opt, const Progress& p,
                const TrainConfig& cfg, int64_t steps_per_epoch) {
  nlohmann::json hist = nlohmann::json::array();
  for (auto& e : p.hist) hist.push_back(to_json(e));
  nlohmann::json st = {{"epochs_done", p.epochs_done},
                       {"global_step", p.global_step},
                       {"optimizer_steps", opt.steps()},
                       {"best_top1", p.best_top1},
                       {"since_best", p.since_best},
                       {"optimizer", cfg.optim.name},
                       {"seed", cfg.seed},
                       {"batch_size", cfg.batch_size},
                       {"steps_per_epoch", steps_per_epoch},
                       {"history", hist}};
  std::vector<TensorOut> out;
  for (auto& [prefix, arena] : moment_arenas(opt))
    for (auto& s : model.table().specs())
      if (s.trainable) out.push_back({prefix + s.name, s.shape, DType::F32, arena->data() + s.offset});
  write_safetensors((dir / "last.state.safetensors").string(), out, {{"vitcpp_state", st.dump()}});
}

// Restores the weights, moments and position; checks that the run is the same run.
Progress load_state(const fs::path& dir, ViT& model, Optimizer& opt, const TrainConfig& cfg,
                    int64_t steps_per_epoch) {
  const std::string sp = (dir / "last.state.safetensors").string(), wp = (dir / "last.safetensors").string();
  SafeTensors state = SafeTensors::open(sp), weights = SafeTensors::open(wp);
  auto it = state.metadata().find("vitcpp_state");
  VIT_CHECK(it != state.metadata().end(), sp, ": not a vitcpp training state (no vitcpp_state metadata)");
  const auto st = nlohmann::json::parse(it->second);
  Progress p;
  p.epochs_done = st.at("epochs_done");
  p.global_step = st.at("global_step");
  p.best_top1 = st.at("best_top1");
  p.since_best = st.at("since_best");
  const auto wstep = weights.metadata().find("global_step");
  VIT_CHECK(
      wstep != weights.metadata().end() && std::stoll(wstep->second) == p.global_step, wp, " and ", sp,
      " are from different steps (the run was interrupted between the two writes); restore both from one "
      "epoch");
  VIT_CHECK(st.at("optimizer") == cfg.optim.name, sp, ": the run used optimizer ",
            st.at("optimizer").get<std::string>(), ", this one ", cfg.optim.name);
  VIT_CHECK(st.at("batch_size") == cfg.batch_size && st.at("steps_per_epoch") == steps_per_epoch, sp,
            ": batch size or dataset size differ from the interrupted run (",
            st.at("batch_size").get<int64_t>(), " x ", st.at("steps_per_epoch").get<int64_t>(),
            " steps per epoch); an exact resume needs the same");
  VIT_CHECK(st.at("seed") == cfg.seed, sp, ": the run used seed ", st.at("seed").get<uint64_t>());
  load_weights(model, weights);
  for (auto& [prefix, arena] : moment_arenas(opt))
    for (auto& s : model.table().specs())
      if (s.trainable) {
        VIT_CHECK(state.at(prefix + s.name).shape == s.shape, sp, ": ", prefix + s.name,
                  " has the wrong shape");
        state.copy_float(prefix + s.name, arena->data() + s.offset);
      }
  opt.set_steps(st.at("optimizer_steps"));
  for (auto& h : st.at("history")) {
    EpochStats e;
    e.epoch = h.at("epoch");
    e.train_loss = h.at("train_loss");
    e.train_top1 = h.at("train_top1");
    e.eval.loss = h.at("eval_loss");
    e.eval.top1 = h.at("eval_top1");
    e.eval.top5 = h.at("eval_top5");
    e.lr = h.at("lr");
    e.seconds = h.at("seconds");
    p.hist.push_back(e);
  }
  return p;
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
  const int64_t K = model.config().num_classes;
  std::vector<float> targets(cfg.mixup.active() ? B * K : 0);
  const fs::path dir(cfg.output);
  Progress p;
  if (cfg.resume) {
    p = load_state(dir, model, opt, cfg, steps_per_epoch);
    log << "resuming " << cfg.output << " after epoch " << p.epochs_done << " (step " << p.global_step
        << ")\n";
  } else if (!cfg.output.empty()) {
    fs::create_directories(dir);
    model.config().save((dir / "config.json").string());
  }
  log << "training " << train_set.describe() << ", " << cfg.epochs << " epochs of " << steps_per_epoch
      << " steps, batch " << B << ", " << cfg.optim.name << " lr " << cfg.sched.lr << "\n";

  for (int64_t epoch = p.epochs_done; epoch < cfg.epochs; ++epoch) {
    if (cfg.patience > 0 && p.since_best >= cfg.patience) {
      log << "early stopping: no better eval top-1 for " << cfg.patience << " epochs\n";
      break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto order = epoch_order(N, cfg.seed, epoch);
    if (cfg.on_epoch_start) cfg.on_epoch_start(epoch);
    double loss_sum = 0;
    int64_t correct_sum = 0, seen = 0;
    float lr = 0;
    ProgressLine bar(log, cfg.progress_bar, cfg.log_every);
    bar.start(epoch, cfg.epochs, steps_per_epoch);
    Prefetcher batches(train_set, order, B);
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++p.global_step) {
      float* images = nullptr;
      const int64_t* labels = nullptr;
      const int64_t bs = batches.next(s, &images, &labels);
      model.zero_grad();
      int64_t correct = 0;
      Batch batch{images, bs, labels, nullptr, nullptr};
      if (cfg.mixup.active()) {  // soft targets replace the labels (smoothing folded in)
        mix_batch(cfg.mixup, images, labels, targets.data(), bs, train_set.channels(), train_set.height(),
                  train_set.width(), K, cfg.smoothing, cfg.seed, uint64_t(p.global_step));
        batch.labels = nullptr;
        batch.targets = targets.data();
      }
      const double loss = loss_step.run(model, batch, cfg.smoothing,
                                        ForwardMode{true, cfg.seed, uint64_t(p.global_step)}, &correct);
      if (cfg.clip_grad > 0) clip_grad_norm(model.table(), model.grads().data(), cfg.clip_grad);
      lr = lr_at(sched, p.global_step);
      opt.step(model.params().data(), model.grads().data(), lr);
      loss_sum += loss * bs;
      correct_sum += correct;
      seen += bs;
      bar.update(s, loss_sum / double(seen), double(correct_sum) / double(seen), seen, lr);
    }
    bar.finish();
    EpochStats e;
    e.epoch = epoch + 1;
    e.train_loss = loss_sum / double(N);
    e.train_top1 = double(correct_sum) / double(N);
    if (eval_set) e.eval = evaluate(model, *eval_set, B);
    e.lr = lr;
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    p.hist.push_back(e);
    p.epochs_done = epoch + 1;
    log << "epoch " << e.epoch << "/" << cfg.epochs << ": train loss " << std::setprecision(4) << e.train_loss
        << " top1 " << 100 * e.train_top1 << "%";
    if (eval_set) log << ", eval loss " << e.eval.loss << " top1 " << 100 * e.eval.top1 << "%";
    log << ", " << std::setprecision(3) << double(N) / e.seconds << " img/s, " << e.seconds << " s"
        << std::endl;
    const double score = eval_set ? e.eval.top1 : e.train_top1;
    const bool better = score > p.best_top1;
    if (better) {
      p.best_top1 = score;
      p.since_best = 0;
    } else {
      ++p.since_best;
    }
    if (!cfg.output.empty()) {
      // Weights first, then the state naming the same step: a crash between the two is
      // detected on resume rather than silently mixing two epochs.
      std::map<std::string, std::string> meta = {{"global_step", std::to_string(p.global_step)},
                                                 {"epoch", std::to_string(p.epochs_done)}};
      if (!cfg.class_names.empty()) meta["class_names"] = nlohmann::json(cfg.class_names).dump();
      save_checkpoint((dir / "last.safetensors").string(), model, meta, false);
      save_state(dir, model, opt, p, cfg, steps_per_epoch);
      if (better) save_checkpoint((dir / "best.safetensors").string(), model, meta, false);
      write_file_atomic((dir / "summary.csv").string(), summary_csv(p.hist));
    }
  }
  return p.hist;
}

}  // namespace vit
