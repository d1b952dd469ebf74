#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "core/check.h"
#include "core/decimal.h"
#include "core/file.h"
#include "core/json_number.h"
#include "core/json_parse.h"
#include "core/threads.h"
#include "data/prefetch.h"
#include "io/checkpoint.h"
#include "ops/ops.h"
#include "train/memory.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/shard.h"
#include "train/step.h"

namespace vit {

namespace fs = std::filesystem;

namespace {

// The teacher of DeiT's distillation: its logits on a micro-batch, its input converted from
// the student's normalization to its own where they differ.
class Teacher {
 public:
  Teacher(ViT* model, const ViTConfig& student, const DistillConfig& cfg) : model_(model), cfg_(cfg) {
    if (!model) return;
    const ViTConfig& t = model->config();
    check_teacher(t, student);
    for (int64_t c = 0; c < t.in_chans; ++c) {
      // x_teacher = (x * std_s + mean_s - mean_t) / std_t = x * a + b, per channel.
      scale_.push_back(student.std[size_t(c)] / t.std[size_t(c)]);
      shift_.push_back((student.mean[size_t(c)] - t.mean[size_t(c)]) / t.std[size_t(c)]);
      convert_ = convert_ || t.mean[size_t(c)] != student.mean[size_t(c)] ||
                 t.std[size_t(c)] != student.std[size_t(c)];
    }
    plane_ = t.img_h * t.img_w;
  }
  // The distillation of this micro-batch (null without a teacher), valid until the next call.
  const Distillation* logits(const Batch& b) {
    if (!model_) return nullptr;
    const int64_t C = int64_t(scale_.size()), K = model_->config().num_classes;
    logits_.resize(size_t(b.size * K));
    const float* x = b.images;
    if (convert_) {
      images_.resize(size_t(b.size * C * plane_));
      for (int64_t i = 0; i < b.size * C; ++i) {
        const float a = scale_[size_t(i % C)], s = shift_[size_t(i % C)];
        for (int64_t j = 0; j < plane_; ++j)
          images_[size_t(i * plane_ + j)] = b.images[i * plane_ + j] * a + s;
      }
      x = images_.data();
    }
    model_->infer(x, b.size, nullptr, logits_.data());
    kd_ = {logits_.data(), cfg_};
    return &kd_;
  }

 private:
  ViT* model_;
  DistillConfig cfg_;
  std::vector<float> scale_, shift_, images_, logits_;
  int64_t plane_ = 0;
  bool convert_ = false;
  Distillation kd_;
};

}  // namespace

void TrainConfig::validate() const {
  // Counts of steps are exact in a double up to 2^53: epochs, batches and their products stay
  // below it (2^63 - 1 cooldown epochs printed "-9223372036854775808 epochs" and trained none).
  constexpr int64_t kMost = int64_t(1) << 53;
  VIT_VALUE_CHECK(epochs > 0, "--epochs must be positive, got ", epochs);
  VIT_VALUE_CHECK(epochs <= kMost, "--epochs must be at most 2^53, got ", epochs);
  VIT_VALUE_CHECK(cooldown_epochs >= 0, "--cooldown-epochs must be non-negative, got ", cooldown_epochs);
  VIT_VALUE_CHECK(aug_repeats >= 0 && aug_repeats <= 100, "--aug-repeats must be 0 (off) to 100, got ",
                  aug_repeats);
  VIT_VALUE_CHECK(cooldown_epochs <= kMost, "--cooldown-epochs must be at most 2^53, got ", cooldown_epochs);
  VIT_VALUE_CHECK(batch_size <= kMost / std::max<int64_t>(grad_accum_steps, 1),
                  "--batch-size times --grad-accum-steps must be at most 2^53, got ", batch_size, " x ",
                  grad_accum_steps);
  VIT_VALUE_CHECK(std::isfinite(warmup_epochs) && std::isfinite(decay_epochs) && std::isfinite(clip_grad),
                  "--warmup-epochs, --decay-epochs and --clip-grad must be finite numbers");
  for (float m : decay_milestones)
    VIT_VALUE_CHECK(std::isfinite(m), "--decay-milestones must be finite epochs, got ", m);
  VIT_VALUE_CHECK(cooldown_epochs == 0 || sched.name == "cosine",
                  "--cooldown-epochs follow the cosine schedule (timm's), not --sched ", sched.name);
  VIT_VALUE_CHECK(batch_size > 0, "--batch-size must be positive, got ", batch_size);
  VIT_VALUE_CHECK(grad_accum_steps > 0, "--grad-accum-steps must be positive, got ", grad_accum_steps);
  VIT_VALUE_CHECK(warmup_epochs >= 0.f, "--warmup-epochs must be non-negative");
  VIT_VALUE_CHECK(decay_epochs > 0.f, "--decay-epochs must be positive, got ", decay_epochs);
  VIT_VALUE_CHECK(std::is_sorted(decay_milestones.begin(), decay_milestones.end()) &&
                      (decay_milestones.empty() || decay_milestones.front() > 0.f),
                  "--decay-milestones must be positive epochs in ascending order");
  VIT_VALUE_CHECK(smoothing >= 0.f && smoothing < 1.f, "--smoothing must be in [0, 1), got ", smoothing);
  VIT_VALUE_CHECK(clip_grad >= 0.f, "--clip-grad must be non-negative");
  VIT_VALUE_CHECK(clip_mode == "norm" || clip_mode == "value" || clip_mode == "agc",
                  "--clip-mode must be norm, value or agc, got '", clip_mode, "'");
  VIT_VALUE_CHECK(std::isfinite(bce.pos_weight) && bce.pos_weight >= 0.f,
                  "--bce-pos-weight must be a finite number >= 0, got ", bce.pos_weight);
  VIT_VALUE_CHECK(std::isfinite(bce.target_threshold), "--bce-target-thresh must be a finite number, got ",
                  bce.target_threshold);
  VIT_VALUE_CHECK(patience >= 0, "--patience must be non-negative");
  VIT_VALUE_CHECK(eval_metric == "top1" || eval_metric == "top5" || eval_metric == "loss",
                  "--eval-metric must be top1, top5 or loss, got '", eval_metric, "'");
  VIT_VALUE_CHECK(checkpoint_hist >= 0, "--checkpoint-hist must be a number of checkpoints (0: none), got ",
                  checkpoint_hist);
  VIT_VALUE_CHECK(workers >= 1, "--workers must be at least 1, got ", workers);
  VIT_VALUE_CHECK(log_every >= 0, "--log-interval must be a number of steps (0: none), got ", log_every);
  mixup.validate();
  VIT_VALUE_CHECK(recovery_interval >= -1,
                  "--recovery-interval must be a number of steps, 0 (none) or -1 (by time), got ",
                  recovery_interval);
  VIT_VALUE_CHECK(recovery_seconds > 0, "recovery seconds must be positive");
  if (teacher) distill.validate();
  VIT_VALUE_CHECK(model_ema_decay >= 0.f && model_ema_decay <= 1.f,
                  "--model-ema-decay must be in [0, 1], got ", model_ema_decay);
  VIT_VALUE_CHECK(!resume || !output.empty(), "resuming needs the run directory");
  optim.validate();
}

namespace {

// A non-finite value as a person reads it: nan, inf or -inf (printf's sign of a NaN, "-nan",
// means nothing).
std::string nonfinite_name(double v) {
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

void check_shapes(const ViT& model, const Dataset& d) {
  const ViTConfig& c = model.config();
  VIT_CHECK(d.channels() == c.in_chans && d.height() == c.img_h && d.width() == c.img_w, d.describe(),
            ": samples are ", d.channels(), "x", d.height(), "x", d.width(), " but the model takes ",
            c.in_chans, "x", c.img_h, "x", c.img_w);
  VIT_CHECK(d.num_classes() <= c.num_classes, d.describe(), " has ", d.num_classes(),
            " classes, the model's head has ", c.num_classes);
}

// Fills images[B,C,H,W] and labels[B] with samples order[first..first+B), on the threads. A
// sample that fails (an image folder's file that does not decode) is rethrown here, the
// first in the batch's order: an exception leaving an OpenMP loop would end the program
// ("terminate called", SIGABRT) instead of giving vit's one-line error.
void load_batch(const Dataset& d, const std::vector<int64_t>& order, int64_t first, int64_t B, float* images,
                int64_t* labels) {
  const int64_t n = d.channels() * d.height() * d.width();
  for_items_on_threads(B, [&](int64_t b) { labels[b] = d.get(order[size_t(first + b)], images + b * n); });
}

// Without evaluation data the eval columns stay empty (a 0% top-1 would read as a result;
// timm leaves them out, and vitcpp's readers take an empty field as none).
std::string summary_csv(const std::vector<EpochStats>& hist, bool ema, bool evaluates) {
  std::ostringstream os;
  os << std::setprecision(6);
  const char* sep = "";
  for (const auto& [name, v] : summary_row(EpochStats{}, ema)) {
    os << sep << name;
    sep = ",";
  }
  os << '\n';
  for (auto& e : hist) {
    sep = "";
    for (const auto& [name, v] : summary_row(e, ema)) {
      os << sep;
      if (evaluates || (name.rfind("eval_", 0) != 0 && name.rfind("ema_eval_", 0) != 0)) os << v;
      sep = ",";
    }
    os << '\n';
  }
  return os.str();
}

// A number for metadata, in full (accuracies in percent, as summary.csv and timm's
// checkpoints give them).
std::string full(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

// The model EMA's decay after optimizer step `step` (1-based): timm's ModelEmaV3.get_decay.
float ema_decay(const TrainConfig& cfg, int64_t step) {
  if (!cfg.model_ema_warmup) return cfg.model_ema_decay;
  const double d = 1.0 - std::pow(1.0 + double(step), -2.0 / 3.0);
  return float(std::clamp(d, 0.0, double(cfg.model_ema_decay)));
}

// ema += (1 - decay) x (w - ema): torch.lerp as timm's ModelEmaV3 applies it.
void ema_update(std::vector<float>& ema, const float* w, float decay) {
  const float a = 1.f - decay;
  const int64_t n = int64_t(ema.size());
  float* e = ema.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) e[i] += a * (w[i] - e[i]);
}

// Exchanges the model's weights with the EMA's (bit for bit; twice restores both).
void swap_weights(ViT& model, std::vector<float>& ema) {
  std::swap_ranges(ema.begin(), ema.end(), model.params().data());
}

// The moments' names in the state file: PyTorch's optimizer state keys.
std::vector<std::pair<std::string, Arena*>> moment_arenas(Optimizer& opt) {
  if (opt.config().name == "sgd") return {{"momentum_buffer.", &opt.moment1()}};
  if (!opt.config().second_moment()) return {{"exp_avg.", &opt.moment1()}};  // lion
  return {{"exp_avg.", &opt.moment1()}, {"exp_avg_sq.", &opt.moment2()}};
}

constexpr const char* kParamPrefix = "param.";
constexpr const char* kEmaPrefix = "ema.";

struct Progress {
  int64_t epochs_done = 0, global_step = 0, since_best = 0;
  double best_top1 = -1, best_ema_top1 = -1;
  std::vector<EpochStats> hist;
  // Within epoch epochs_done + 1 (a recovery state): the steps done and their sums so far.
  int64_t step_in_epoch = 0, correct_sum = 0, seen = 0;
  double loss_sum = 0, seconds = 0;
  // How the run splits a micro-batch: over processes, then into shards in each. Another split
  // gives other bits (within float rounding), so a resume says when it differs. 0: a state
  // from before these were kept.
  int64_t processes = 0, shards = 0;
  // The training images, and the CPU path and matrix-product library the run computed with:
  // other data cannot resume exactly (refused), another path rounds otherwise (said). -1 and
  // "": a state from before these were kept.
  int64_t train_size = -1;
  std::string isa, gemm_library;
  // The weights of --teacher (params_hash): a file replaced since cannot resume exactly.
  // "": no teacher, or a state from before it was kept.
  std::string teacher_hash;
};

// FNV-1a: a cheap 64-bit fingerprint to compare between ranks (not for security).
std::string hash_hex(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  std::ostringstream os;
  os << std::hex << h;
  return os.str();
}

std::string params_hash(const ViT& model) {
  return hash_hex(model.params().data(), model.params().size() * sizeof(float));
}

nlohmann::json to_json(const EpochStats& e) {
  return {{"epoch", e.epoch},
          {"train_loss", e.train_loss},
          {"train_top1", e.train_top1},
          {"eval_loss", e.eval.loss},
          {"eval_top1", e.eval.top1},
          {"eval_top5", e.eval.top5},
          {"ema_eval_loss", e.ema.loss},
          {"ema_eval_top1", e.ema.top1},
          {"ema_eval_top5", e.ema.top5},
          {"lr", e.lr},
          {"seconds", e.seconds}};
}

// Writes the training state to `path` (atomically); returns its size in bytes.
size_t save_state(const fs::path& path, const ViT& model, Optimizer& opt, const std::vector<float>* ema,
                  const Progress& p, const TrainConfig& cfg, int64_t steps_per_epoch, bool evaluates) {
  nlohmann::json hist = nlohmann::json::array();
  for (auto& e : p.hist) hist.push_back(to_json(e));
  // Nothing else is needed for an exact resume, within an epoch too: the epoch's order,
  // augmentation, mixup and dropout draws all follow from (seed, epoch, step, index).
  nlohmann::json st = {{"epochs_done", p.epochs_done},
                       {"global_step", p.global_step},
                       {"step_in_epoch", p.step_in_epoch},
                       {"epoch_loss_sum", p.loss_sum},
                       {"epoch_correct", p.correct_sum},
                       {"epoch_seen", p.seen},
                       {"epoch_seconds", p.seconds},
                       {"optimizer_steps", opt.steps()},
                       {"best_top1", p.best_top1},
                       {"best_ema_top1", p.best_ema_top1},
                       {"since_best", p.since_best},
                       {"optimizer", cfg.optim.name},
                       {"seed", cfg.seed},
                       {"batch_size", cfg.batch_size},
                       {"grad_accum_steps", cfg.grad_accum_steps},
                       {"steps_per_epoch", steps_per_epoch},
                       {"processes", p.processes},
                       {"shards", p.shards},
                       {"train_size", p.train_size},
                       {"isa", p.isa},
                       {"gemm_library", p.gemm_library},
                       {"history", hist}};
  if (!cfg.class_names.empty()) st["class_names"] = cfg.class_names;  // what each label meant
  if (!p.teacher_hash.empty()) st["teacher_hash"] = p.teacher_hash;
  st["evaluates"] = evaluates;  // whether the scores that rank the epochs are eval's or train's
  std::vector<TensorOut> out;
  // The weights too: the state file alone is then one consistent step, whatever moment a
  // kill -9 interrupts the epoch's writes (last.safetensors is for users and timm).
  for (auto& s : model.table().specs())
    out.push_back({kParamPrefix + s.name, s.shape, DType::F32, model.params().data() + s.offset});
  for (auto& [prefix, arena] : moment_arenas(opt))
    for (auto& s : model.table().specs())
      if (s.trainable) out.push_back({prefix + s.name, s.shape, DType::F32, arena->data() + s.offset});
  if (ema)
    for (auto& s : model.table().specs())
      out.push_back({kEmaPrefix + s.name, s.shape, DType::F32, ema->data() + s.offset});
  write_safetensors(path.string(), out, {{"vitcpp_state", st.dump()}});
  return fs::file_size(path);
}

// The run's position and history from a state's vitcpp_state metadata (file `sp`).
Progress read_progress(const nlohmann::json& st, const std::string& sp) {
  Progress p;
  p.epochs_done = json_int(st.at("epochs_done"), sp + ": epochs_done");
  p.global_step = json_int(st.at("global_step"), sp + ": global_step");
  p.best_top1 = st.at("best_top1");
  p.since_best = json_int(st.at("since_best"), sp + ": since_best");
  if (st.contains("best_ema_top1")) p.best_ema_top1 = st.at("best_ema_top1");
  if (st.contains("shards")) {
    p.processes = json_int(st.at("processes"), sp + ": processes");
    p.shards = json_int(st.at("shards"), sp + ": shards");
  }
  if (st.contains("train_size")) {
    p.train_size = json_int(st.at("train_size"), sp + ": train_size");
    p.isa = st.at("isa").get<std::string>();
    p.gemm_library = st.at("gemm_library").get<std::string>();
  }
  if (st.contains("teacher_hash")) p.teacher_hash = st.at("teacher_hash").get<std::string>();
  if (st.contains("step_in_epoch")) {  // states from before recovery states end their epoch
    p.step_in_epoch = json_int(st.at("step_in_epoch"), sp + ": step_in_epoch");
    p.loss_sum = st.at("epoch_loss_sum");
    p.correct_sum = json_int(st.at("epoch_correct"), sp + ": epoch_correct");
    p.seen = json_int(st.at("epoch_seen"), sp + ": epoch_seen");
    p.seconds = st.at("epoch_seconds");
  }
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
    if (h.contains("ema_eval_top1")) {
      e.ema.loss = h.at("ema_eval_loss");
      e.ema.top1 = h.at("ema_eval_top1");
      e.ema.top5 = h.at("ema_eval_top5");
    }
    p.hist.push_back(e);
  }
  return p;
}

// The class names the run trained on: its state's (since 2026-12-06), else its
// last.safetensors' metadata, else none.
std::vector<std::string> trained_classes(const fs::path& dir, const nlohmann::json& st,
                                         const std::string& sp) {
  const auto as_names = [](const nlohmann::json& j, const std::string& where) {
    VIT_CHECK(j.is_array(), where, ": class_names is not a list");
    std::vector<std::string> names;
    for (auto& n : j) {
      VIT_CHECK(n.is_string(), where, ": class_names holds a non-string");
      names.push_back(n.get<std::string>());
    }
    return names;
  };
  if (st.contains("class_names")) return as_names(st.at("class_names"), sp);
  const fs::path last = dir / "last.safetensors";
  if (!fs::exists(last)) return {};
  const auto meta = SafeTensors::open(last.string()).metadata();
  const auto it = meta.find("class_names");
  if (it == meta.end()) return {};
  try {
    return as_names(parse_json(it->second, last.string() + ": class_names"), last.string());
  } catch (const nlohmann::json::exception&) {
    throw Error(last.string() + ": class_names is not valid JSON");
  }
}

// A resumed run must read its labels as the run did: class folders renamed, added or
// removed give the same labels other meanings (a sorted folder list shifts), and training
// would go on silently from the wrong start.
void check_same_classes(const fs::path& dir, const nlohmann::json& st, const std::string& sp,
                        const std::vector<std::string>& now) {
  const std::vector<std::string> then = trained_classes(dir, st, sp);
  if (then.empty() || now.empty() || then == now) return;
  size_t i = 0;
  while (i < then.size() && i < now.size() && then[i] == now[i]) ++i;
  auto name = [](const std::vector<std::string>& v, size_t k) {
    return k < v.size() ? "'" + v[k] + "'" : std::string("none");
  };
  throw Error(detail::concat(
      "--resume ", dir.string(), ": the run trained on ", then.size(), " classes, the data now has ",
      now.size(), "; label ", i, " was ", name(then, i), " and is now ", name(now, i),
      ", so resuming would give the labels other meanings. Give the data the run's class names, or start a "
      "new run from its weights (--pretrained ",
      (dir / "last.safetensors").string(), ")"));
}

// Restores the weights, moments and position from the state file `sp` of the run in `dir`;
// checks that the run is the same run.
Progress load_state(const fs::path& dir, const std::string& sp, ViT& model, Optimizer& opt,
                    std::vector<float>* ema, const TrainConfig& cfg, int64_t steps_per_epoch,
                    int64_t train_size, bool evaluates) {
  const std::string wp = (dir / "last.safetensors").string();
  SafeTensors state = SafeTensors::open(sp);
  auto it = state.metadata().find("vitcpp_state");
  VIT_CHECK(it != state.metadata().end(), sp, ": not a vitcpp training state (no vitcpp_state metadata)");
  const auto st = parse_json(it->second, sp + ": vitcpp_state");
  Progress p = read_progress(st, sp);
  // States written since the weights moved into the state file need nothing else; older
  // ones pair with last.safetensors, which must then be from the same step.
  const bool self_contained = !model.table().specs().empty() &&
                              state.find(kParamPrefix + model.table().specs().front().name) != nullptr;
  if (!self_contained) {
    SafeTensors weights = SafeTensors::open(wp);
    const auto wstep = weights.metadata().find("global_step");
    VIT_CHECK(wstep != weights.metadata().end() && wstep->second == std::to_string(p.global_step), wp,
              " and ", sp,
              " are from different steps (the run was interrupted between the two writes); restore both from "
              "one epoch");
    load_weights(model, weights);
  }
  VIT_CHECK(st.at("optimizer") == cfg.optim.name, sp, ": the run used optimizer ",
            st.at("optimizer").get<std::string>(), ", this one ", cfg.optim.name);
  const int64_t accum = st.contains("grad_accum_steps") ? json_int(st.at("grad_accum_steps"), sp) : 1;
  VIT_CHECK(st.at("batch_size") == cfg.batch_size && accum == cfg.grad_accum_steps &&
                st.at("steps_per_epoch") == steps_per_epoch,
            sp, ": batch size, accumulation steps or dataset size differ from the interrupted run (",
            st.at("batch_size").get<int64_t>(), " x ", accum, " accumulation step(s), ",
            st.at("steps_per_epoch").get<int64_t>(), " steps per epoch); an exact resume needs the same");
  // Another N with as many steps (images added to a folder) gave no error: the epoch went on
  // over another permutation, repeating or skipping images.
  VIT_CHECK(
      p.train_size < 0 || p.train_size == train_size, sp, ": the run trained on ", p.train_size,
      " images, this data has ", train_size,
      "; an exact resume needs the same data (a folder changed, or --skip-bad-images left out other files)");
  VIT_CHECK(st.at("seed") == cfg.seed, sp, ": the run used seed ", st.at("seed").get<uint64_t>());
  VIT_CHECK(p.teacher_hash.empty() || !cfg.teacher || p.teacher_hash == params_hash(*cfg.teacher), sp,
            ": --teacher holds other weights than the teacher the run distilled from (was its file replaced "
            "since?); an exact resume needs the same teacher");
  check_same_classes(dir, st, sp, cfg.class_names);
  // The best checkpoint, early stopping and the kept checkpoints rank epochs by eval scores
  // when there is evaluation data, else by train's: one run must not mix the two.
  if (st.contains("evaluates") && st.at("evaluates").is_boolean())
    VIT_CHECK(st.at("evaluates").get<bool>() == evaluates, "--resume ", dir.string(), ": the run ",
              evaluates ? "had no evaluation data and this one has"
                        : "evaluated after each epoch and this one cannot",
              " (its best checkpoint and early stopping rank epochs by ", evaluates ? "train" : "eval",
              " scores); resume it with the data it ran on",
              evaluates ? "" : " (Python: val= the arrays it was given)");
  // step_in_epoch = steps_per_epoch: the epoch's steps are done, its evaluation failed.
  VIT_CHECK(p.step_in_epoch >= 0 && p.step_in_epoch <= steps_per_epoch, sp, ": step_in_epoch ",
            p.step_in_epoch, " is outside an epoch of ", steps_per_epoch, " steps");
  // Every tensor is checked before any is copied: a refused state leaves the model as it was
  // (Python's model object, trained in place).
  struct Part {
    std::string name;
    const ParamSpec* spec;
    float* into;
  };
  std::vector<Part> parts;
  for (auto& s : model.table().specs()) {
    if (self_contained) parts.push_back({kParamPrefix + s.name, &s, model.params().data()});
    for (auto& [prefix, arena] : moment_arenas(opt))
      if (s.trainable) parts.push_back({prefix + s.name, &s, arena->data()});
    if (ema) parts.push_back({kEmaPrefix + s.name, &s, ema->data()});
  }
  const std::string differs = " (the model args.json describes is not the run's: was " +
                              (dir / "args.json").string() + " or config.json changed?)";
  for (const Part& t : parts) {
    const TensorInfo* info = state.find(t.name);
    VIT_CHECK(info || !t.name.starts_with(kEmaPrefix), sp, ": no model EMA (", t.name,
              "); the run was trained without --model-ema");
    VIT_CHECK(info, sp, ": no ", t.name, " for the model's ", t.spec->name, " ", shape_str(t.spec->shape),
              differs);
    VIT_CHECK(info->shape == t.spec->shape, sp, ": ", t.name, " has shape ", shape_str(info->shape),
              ", the model's ", t.spec->name, " ", shape_str(t.spec->shape), differs);
  }
  for (const Part& t : parts) {
    state.copy_float(t.name, t.into + t.spec->offset);
    state.release(t.name);  // the state's pages go as the arenas fill (docs/reliability.md)
  }
  opt.set_steps(st.at("optimizer_steps"));
  return p;
}

std::string describe_shape(const Dataset& d) {
  std::ostringstream os;
  os << d.size() << " samples of " << d.channels() << "x" << d.height() << "x" << d.width() << ", "
     << d.num_classes() << " classes";
  return os.str();
}

// What every rank of a run must agree on before the first step.
std::vector<std::pair<std::string, std::string>> run_fingerprint(const ViT& model, const Dataset& train_set,
                                                                 const Dataset* eval_set,
                                                                 const TrainConfig& c) {
  std::ostringstream tc;
  tc << c.epochs << ' ' << c.cooldown_epochs << ' ' << c.batch_size << ' ' << c.grad_accum_steps << ' '
     << c.optim.name << ' ' << c.optim.momentum << ' ' << c.optim.nesterov << ' ' << c.optim.beta1 << ' '
     << c.optim.beta2 << ' ' << c.optim.eps << ' ' << c.optim.weight_decay << ' ' << c.sched.name << ' '
     << c.sched.lr << ' ' << c.sched.min_lr << ' ' << c.sched.warmup_lr << ' ' << c.sched.decay_rate << ' '
     << c.decay_epochs << ' ' << nlohmann::json(c.decay_milestones).dump() << ' ' << c.warmup_epochs << ' '
     << c.smoothing << ' ' << c.clip_grad << ' ' << c.clip_mode << ' ' << c.mixup.mixup_alpha << ' '
     << c.mixup.cutmix_alpha << ' ' << c.mixup.prob << ' ' << c.mixup.switch_prob << ' ' << c.mixup.mode
     << ' ' << nlohmann::json(c.mixup.cutmix_minmax).dump() << ' ' << c.mixup.off_epoch << ' ' << c.seed
     << ' ' << c.patience << ' ' << c.eval_metric << ' ' << c.resume << ' ' << model.amp() << ' '
     << c.model_ema << ' ' << c.model_ema_decay << ' ' << c.model_ema_warmup << ' ' << c.bce_loss << ' '
     << c.bce.threshold << ' ' << c.bce.target_threshold << ' ' << c.bce.pos_weight << ' '
     << c.bce.sum_classes << ' ' << c.agreed_settings;
  const std::string model_json = model.config().to_json(-1), train_str = tc.str();
  return {{"build id", build_id()},
          {"model config hash", hash_hex(model_json.data(), model_json.size())},
          {"training flags hash", hash_hex(train_str.data(), train_str.size())},
          {"train data", describe_shape(train_set)},
          {"eval data", eval_set ? describe_shape(*eval_set) : "none"},
          {"initial weights hash", params_hash(model)}};
}

bool all_finite(const float* x, int64_t n) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= std::isfinite(x[i]);
  return ok;
}

// The message when training diverges: where, and what the run directory still holds.
std::string diverged(const TrainConfig& cfg, const std::string& what, const Progress& p, int64_t epoch,
                     int64_t step) {
  std::string kept = "nothing was written (no --output)";
  if (!cfg.output.empty())
    kept = p.epochs_done > 0 ? detail::concat("the last good checkpoint, ",
                                              (fs::path(cfg.output) / "last.safetensors").string(),
                                              " (epoch ", p.epochs_done, "), is kept")
                             : "no checkpoint was written yet";
  return detail::concat("training diverged: ", what, " at epoch ", epoch + 1, ", step ", step + 1, "; ", kept,
                        ". Lower --lr, add --warmup-epochs or --clip-grad");
}

// When a recovery state is due within an epoch: every cfg.recovery_interval optimizer steps,
// or (-1) once cfg.recovery_seconds have passed since the last state was written, or 20
// times that write's duration if longer, so that writing costs at most 5% of the time.
class RecoveryClock {
 public:
  explicit RecoveryClock(const TrainConfig& cfg) : cfg_(cfg), last_(Clock::now()) {}
  // After optimizer step `step` (global, 0-based).
  bool due(int64_t step) const {
    if (cfg_.recovery_interval > 0) return (step + 1) % cfg_.recovery_interval == 0;
    if (cfg_.recovery_interval == 0) return false;
    const double since = std::chrono::duration<double>(Clock::now() - last_).count();
    return since >= std::max(cfg_.recovery_seconds, 20 * write_seconds_);
  }
  // A state (recovery or epoch end) was written, taking `seconds`.
  void wrote(double seconds) {
    last_ = Clock::now();
    write_seconds_ = seconds;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const TrainConfig& cfg_;
  Clock::time_point last_;
  double write_seconds_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
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

EvalResult evaluate(ViT& model, const Dataset& data, int64_t batch_size, Comm* comm, EvalProgress* progress) {
  check_shapes(model, data);
  const int64_t K = model.config().num_classes, n = data.channels() * data.height() * data.width();
  const Rows mine = comm ? shard_rows(data.size(), comm->rank(), comm->size()) : Rows{0, data.size()};
  std::vector<float> images(batch_size * n), logits(batch_size * K);
  std::vector<int64_t> labels(batch_size), order(data.size());
  for (int64_t i = 0; i < data.size(); ++i) order[i] = i;
  // Sums: loss, top-1 and top-5 counts, then the confusion matrix [K, K].
  std::vector<double> sums(3 + K * K, 0.0);
  double& loss_sum = sums[0];
  double* confusion = sums.data() + 3;
  int64_t top1 = 0, top5 = 0;
  std::vector<int32_t> predictions(comm ? 0 : size_t(data.size())), truth(predictions.size());
  // This rank's progress stands for every rank's, which go at one pace: its share's images
  // scaled to the whole set (a bar drawn by rank 0 then ends at the set's size).
  auto shown = [&](int64_t done) { return mine.size() > 0 ? done * data.size() / mine.size() : 0; };
  auto run = [&] {
    if (progress) progress->start(data.size());
    for (int64_t first = mine.lo; first < mine.hi; first += batch_size) {
      const int64_t B = std::min(batch_size, mine.hi - first);
      load_batch(data, order, first, B, images.data(), labels.data());
      model.infer(images.data(), B, nullptr, logits.data());
      for (int64_t b = 0; b < B; ++b) {
        const float* z = logits.data() + b * K;
        double mx = z[0], s = 0;
        for (int64_t k = 1; k < K; ++k) mx = std::max<double>(mx, z[k]);
        for (int64_t k = 0; k < K; ++k) s += std::exp(z[k] - mx);
        loss_sum += mx + std::log(s) - z[labels[b]];
        // Classes ranked before the true one: those scoring above it, NaN above every number
        // (torch's topk and argmax rank it first; `z[k] > z[label]` counted none, and NaN
        // logits scored 100%), and those tied with it at a lower index, as the argmax takes
        // the first of equal scores (a tie counted as right: equal logits scored 100%), NaNs
        // among themselves too. The true class is not before itself: a NaN there counted
        // itself, and top-1 said 0% where the confusion matrix had the argmax right.
        const int64_t label = labels[b];
        const bool label_nan = std::isnan(z[label]);
        int64_t rank = 0, pred = 0;
        for (int64_t k = 0; k < K; ++k) {
          const bool nan = std::isnan(z[k]);
          if (k != label)
            rank += nan || label_nan ? nan && (!label_nan || k < label)
                                     : z[k] > z[label] || (k < label && z[k] == z[label]);
          if (z[k] > z[pred] || (nan && !std::isnan(z[pred]))) pred = k;
        }
        ++confusion[labels[b] * K + pred];
        if (!comm)
          predictions[size_t(first + b)] = int32_t(pred), truth[size_t(first + b)] = int32_t(labels[b]);
        top1 += rank < 1;
        top5 += rank < 5;
      }
      if (progress) progress->update(shown(first + B - mine.lo), double(top1) / double(first + B - mine.lo));
    }
    if (progress) progress->finish();
    sums[1] = double(top1);
    sums[2] = double(top5);
  };
  // The sums travel with the status exchange. Counts are exact in doubles (below 2^53);
  // the loss sum's rounding depends on the number of ranks.
  if (comm)
    run_agreed(*comm, "evaluating " + data.describe(), run, sums.data(), int64_t(sums.size()));
  else
    run();
  EvalResult r;
  r.num_classes = K;
  r.confusion.resize(K * K);
  for (int64_t i = 0; i < K * K; ++i) r.confusion[i] = int64_t(confusion[i]);
  r.count = data.size();
  r.loss = loss_sum / double(r.count);
  r.top1 = sums[1] / double(r.count);
  r.top5 = sums[2] / double(r.count);
  r.predictions = std::move(predictions);
  r.labels = std::move(truth);
  return r;
}

namespace {
// The Stopped a run asked to stop throws, `where` ("after step 3 of 6 in epoch 2") it stopped.
Stopped stopped(const TrainConfig& cfg, const std::string& where, const fs::path& state, int reason) {
  const bool wrote = !cfg.output.empty();
  return Stopped(wrote ? detail::concat("stopped ", where, ": the run's state is in ", state.string())
                       : detail::concat("stopped ", where, ": nothing written (no output directory)"),
                 wrote ? state.string() : "", reason);
}
}  // namespace

std::vector<std::pair<std::string, double>> summary_row(const EpochStats& e, bool ema) {
  // Accuracies in percent, as timm's summary.csv has them under the same names; the model
  // EMA's evaluation in ema_* columns.
  std::vector<std::pair<std::string, double>> row = {
      {"epoch", double(e.epoch)}, {"train_loss", e.train_loss},     {"train_top1", 100 * e.train_top1},
      {"eval_loss", e.eval.loss}, {"eval_top1", 100 * e.eval.top1}, {"eval_top5", 100 * e.eval.top5}};
  if (ema)
    row.insert(row.end(), {{"ema_eval_loss", e.ema.loss},
                           {"ema_eval_top1", 100 * e.ema.top1},
                           {"ema_eval_top5", 100 * e.ema.top5}});
  row.insert(row.end(), {{"lr", e.lr}, {"seconds", e.seconds}});
  return row;
}

double epoch_score(const EpochStats& e, bool eval, const std::string& metric, bool ema) {
  const EvalResult& r = ema ? e.ema : e.eval;
  if (metric == "loss") return -(eval ? r.loss : e.train_loss);
  return eval ? (metric == "top5" ? r.top5 : r.top1) : e.train_top1;
}

std::vector<double> epoch_scores(const std::vector<EpochStats>& hist, bool eval, const std::string& metric,
                                 bool ema) {
  std::vector<double> s;
  for (auto& e : hist) s.push_back(epoch_score(e, eval, metric, ema));
  return s;
}

std::string metric_key(const std::string& metric, bool eval) {
  return std::string(eval ? "eval_" : "train_") + metric;
}

std::string metric_words(const std::string& metric) {
  return metric == "loss" ? "loss" : metric == "top5" ? "top-5" : "top-1";
}

std::string score_str(double score, const std::string& metric) {
  std::ostringstream os;
  if (metric == "loss")
    os << std::setprecision(4) << -score;
  else
    os << std::fixed << std::setprecision(2) << 100 * score << "%";
  return os.str();
}

namespace {

using SteadyClock = std::chrono::steady_clock;

// The running sums of an epoch's steps.
struct EpochSums {
  double loss = 0;
  int64_t correct = 0, seen = 0;
  float lr = 0;
};

// train()'s run, in parts: what every part shares is here, set up once.
class TrainLoop {
 public:
  TrainLoop(ViT& model, const Dataset& train_set, const Dataset* eval_set, const TrainConfig& cfg,
            std::ostream& log_any);
  std::vector<EpochStats> run();

 private:
  void resume();  // cfg.resume: the newest state, and the notes it needs
  void begin();   // a fresh run's EMA and config.json; the ranks' agreement; the first line
  // The epoch's steps from step `first`; throws Stopped when asked to stop within it.
  EpochSums train_epoch(int64_t epoch, int64_t first, SteadyClock::time_point t0);
  // One optimizer step's forward and backward on this rank's rows: stats[0] += the loss
  // sum, stats[1] = the correct count.
  void forward_backward(const Rows& mine, int64_t bs, Prefetcher& batches, int64_t epoch, int64_t s,
                        double* stats);
  // After step s: a recovery state when due (stats[3]) or asked to stop; then Stopped if asked.
  void after_step(int64_t epoch, int64_t s, const double* stats, const EpochSums& sums,
                  SteadyClock::time_point t0, ProgressLine& bar);
  Progress progress_at(int64_t step_in_epoch, const EpochSums& sums, SteadyClock::time_point t0) const;
  // The epoch's numbers with its evaluations; a failed evaluation keeps the epoch's training.
  EpochStats evaluate_epoch(int64_t epoch, const EpochSums& sums, SteadyClock::time_point t0);
  void commit_epoch(const EpochStats& e);    // history, log line, best, files
  std::string run_eta(int64_t epoch) const;  // ", run ETA H:MM:SS" while epochs remain
  void write_epoch_files(const EpochStats& e, bool better, bool ema_better);
  void stop_if_asked(int64_t epoch);  // after an epoch's files

  ViT& model;
  const Dataset& train_set;
  const Dataset* eval_set;
  const TrainConfig& cfg;
  Comm& comm;
  const int rank, ranks;
  std::ostream quiet{nullptr};  // ranks other than 0 log nothing
  std::ostream& log;
  const bool write;
  // B: the global batch of an optimizer step; micro-batches of cfg.batch_size make it up.
  const int64_t N, A, B, steps_per_epoch, shards, K, C, H, W;
  ScheduleConfig sched;
  Optimizer opt;
  LossStep loss_step;
  Teacher teacher;
  std::vector<float> targets;
  const fs::path dir;
  // The model EMA, laid out as the parameters: from the state on a resume, else the weights
  // training starts with.
  std::vector<float> ema_store;
  std::vector<float>* ema;
  Progress p;
  bool fresh;
  RecoveryClock recovery;
  int stop_reason = 0;        // this rank's answer to stop_requested
  bool stop_pending = false;  // the ranks asked at an epoch's last step
  const bool partners;        // mixing pairs row b with row bs-1-b: a shard also loads its partners' rows
};

TrainLoop::TrainLoop(ViT& model_, const Dataset& train_set_, const Dataset* eval_set_,
                     const TrainConfig& cfg_, std::ostream& log_any)
    : model(model_),
      train_set(train_set_),
      eval_set(eval_set_),
      cfg(cfg_),
      comm(cfg_.comm ? *cfg_.comm : world()),
      rank(comm.rank()),
      ranks(comm.size()),
      log(comm.root() ? log_any : quiet),
      write(comm.root() && !cfg_.output.empty()),
      N(cfg_.aug_repeats > 0 ? repeated_epoch_size(train_set_.size() / cfg_.aug_repeats) : train_set_.size()),
      A(cfg_.grad_accum_steps),
      B(cfg_.batch_size * cfg_.grad_accum_steps),
      steps_per_epoch((N + B - 1) / B),
      // The shards of this process's first micro-batch (ViT::shards_for: one per thread unless
      // a count is asked for).
      shards(model_.shards_for(shard_rows(shard_rows(B, 0, ranks).size(), 0, int(A)).size())),
      K(model_.config().num_classes),
      C(train_set_.channels()),
      H(train_set_.height()),
      W(train_set_.width()),
      sched(cfg_.sched),
      opt(model_.table(), cfg_.optim),
      teacher(cfg_.teacher, model_.config(), cfg_.distill),
      targets(cfg_.mixup.active() ? B * K : 0),
      dir(cfg_.output),
      ema_store(cfg_.model_ema ? model_.params().size() : 0),
      ema(cfg_.model_ema ? &ema_store : nullptr),
      fresh(!cfg_.resume),
      recovery(cfg_),
      partners(cfg_.mixup.active() && ranks > 1) {
  // Steps past 2^53 are not counted exactly (nor past 2^63 at all: --epochs 2^62 + 1 wrapped to
  // 4 steps, and a milestone of 1e30 epochs to step 0).
  const auto steps_of = [&](double epochs, const char* flag) {
    VIT_CHECK(epochs * double(steps_per_epoch) <= 0x1p53, flag, " ", epochs, ": ",
              epochs * double(steps_per_epoch), " steps of ", steps_per_epoch,
              " an epoch; a run counts at most 2^53");
    return int64_t(std::llround(epochs * double(steps_per_epoch)));
  };
  steps_of(double(cfg.total_epochs()), "--epochs (with --cooldown-epochs)");
  sched.total_steps = cfg.epochs * steps_per_epoch;
  sched.warmup_steps = steps_of(cfg.warmup_epochs, "--warmup-epochs");
  // As timm's decay_t: the flag's decimal (2.4, not float's 2.4000001) times the epoch's steps.
  sched.decay_steps = shortest_decimal(cfg.decay_epochs) * double(steps_per_epoch);
  for (float m : cfg.decay_milestones)
    sched.milestones.push_back(std::max<int64_t>(1, steps_of(m, "--decay-milestones")));
  sched.validate();
}

void TrainLoop::resume() {
  // Every rank reads the run directory (it must be shared between hosts to resume). The
  // newest state wins: a recovery state within an epoch, or the last epoch's.
  std::optional<StateInfo> newest;
  run_agreed(comm, "resuming", [&] {
    newest = newest_state(dir.string());
    if (!newest) return;
    try {
      p = load_state(dir, newest->path, model, opt, ema, cfg, steps_per_epoch, N, eval_set != nullptr);
    } catch (const nlohmann::json::exception& e) {  // a vitcpp_state that is not what save_state writes
      throw Error(detail::concat(newest->path, ": corrupt training state: ", e.what()));
    }
  });
  // A killed run can leave write_file_atomic's temporaries (NAME.tmp.PID) behind.
  if (write) {
    int64_t stale = 0;
    for (auto& f : fs::directory_iterator(dir))
      if (f.path().filename().string().find(".tmp.") != std::string::npos) stale += fs::remove(f.path());
    if (stale > 0)
      log << "removed " << stale << " unfinished temporary file(s) of the interrupted run" << std::endl;
  }
  if (!newest) {
    // Stopped before its first state: the model is as the run began (the vit program
    // builds it from the seed again), so starting over gives the same run.
    fresh = true;
    log << cfg.output
        << " holds no training state yet (the run stopped before its first): starting from step 0"
        << std::endl;
  } else if (p.step_in_epoch > 0) {
    log << "resuming " << cfg.output << " in epoch " << p.epochs_done + 1 << " after step " << p.step_in_epoch
        << " of " << steps_per_epoch << " (global step " << p.global_step << ", "
        << fs::path(newest->path).filename().string() << ")" << std::endl;
  } else {
    log << "resuming " << cfg.output << " after epoch " << p.epochs_done << " (step " << p.global_step << ")"
        << std::endl;
  }
  if (newest && p.shards > 0 && (p.processes != ranks || p.shards != shards)) {
    auto split = [](int64_t procs, int64_t n) {
      return (procs > 1 ? std::to_string(procs) + " processes x " : "") + std::to_string(n) +
             (n == 1 ? " shard" : " shards");
    };
    log << "note: the interrupted run split each batch into " << split(p.processes, p.shards)
        << ", this one into " << split(ranks, shards)
        << ": training goes on within float rounding of the uninterrupted run, not bit for bit ("
        << (p.processes != ranks ? "mpirun -np " + std::to_string(p.processes)
                                 : "VIT_SHARDS=" + std::to_string(p.shards))
        << " keeps the weights' bits)" << std::endl;
  }
  // Another CPU (a requeue on another node) or VIT_ISA: other kernels, other rounding.
  if (newest && !p.isa.empty() && (p.isa != ops::cpu_isa() || p.gemm_library != ops::cpu_gemm_library()))
    log << "note: the interrupted run computed on the " << p.isa << " path with " << p.gemm_library
        << ", this one on " << ops::cpu_isa() << " with " << ops::cpu_gemm_library()
        << ": training goes on within float rounding of the uninterrupted run, not bit for bit" << std::endl;
  // A state from before these were kept: neither can be checked, and the run takes on the
  // ones of this resume.
  if (newest && p.isa.empty())
    log << "note: this state, from an older vitcpp, does not record its training images' count or CPU "
           "path: a resume on other data, or on another CPU, could not be checked"
        << std::endl;
}

void TrainLoop::begin() {
  p.processes = ranks, p.shards = shards;
  p.train_size = N, p.isa = ops::cpu_isa(), p.gemm_library = ops::cpu_gemm_library();
  if (cfg.teacher && p.teacher_hash.empty()) p.teacher_hash = params_hash(*cfg.teacher);
  if (fresh && ema) std::copy(model.params().data(), model.params().data() + ema->size(), ema->begin());
  if (fresh && write) {
    fs::create_directories(dir);
    model.config().save((dir / "config.json").string());
  }
  check_agreement(comm, run_fingerprint(model, train_set, eval_set, cfg));
  log << "training " << train_set.describe() << ", " << cfg.total_epochs()
      << (cfg.total_epochs() == 1 ? " epoch of " : " epochs of ") << steps_per_epoch
      << (steps_per_epoch == 1 ? " step, batch " : " steps, batch ") << B;
  if (A > 1) log << " (" << cfg.batch_size << " x " << A << " accumulation steps)";
  log << ", " << cfg.optim.name << " lr " << cfg.sched.lr;
  if (cfg.cooldown_epochs > 0)
    log << " (cosine over " << cfg.epochs << " epochs, then " << cfg.cooldown_epochs << " at "
        << cfg.sched.min_lr << ")";
  if (cfg.bce_loss) log << ", binary cross-entropy";
  if (cfg.clip_grad > 0) log << ", " << cfg.clip_mode << " clipping at " << cfg.clip_grad;
  if (cfg.aug_repeats > 0)
    log << ", repeated augmentation (" << N << " samples an epoch, each image " << cfg.aug_repeats
        << (cfg.aug_repeats == 1 ? " time)" : " times)");
  if (cfg.teacher)
    log << ", " << cfg.distill.type << " distillation from a teacher (alpha " << cfg.distill.alpha << ")";
  if (ranks > 1) log << ", " << comm.describe();
  log << std::endl;
  if (cfg.output.empty()) log << "note: no --output: nothing of this run is saved" << std::endl;
}

void TrainLoop::forward_backward(const Rows& mine, int64_t bs, Prefetcher& batches, int64_t epoch, int64_t s,
                                 double* stats) {
  float* images = nullptr;
  const int64_t* labels = nullptr;
  batches.next(s, &images, &labels);
  model.zero_grad();
  if (mine.size() == 0) return;
  int64_t correct = 0;
  Batch batch{images, mine.size(), labels, nullptr, nullptr};
  if (cfg.mixup.active_in(epoch)) {  // soft targets replace the labels (smoothing folded in)
    if (partners)
      mix_shard(cfg.mixup, images, images + mine.size() * C * H * W, labels, labels + mine.size(),
                targets.data(), mine.lo, mine.size(), bs, C, H, W, K, cfg.smoothing, cfg.seed,
                uint64_t(p.global_step));
    else
      mix_batch(cfg.mixup, images, labels, targets.data(), bs, C, H, W, K, cfg.smoothing, cfg.seed,
                uint64_t(p.global_step));
    batch.labels = nullptr;
    batch.targets = targets.data();
  }
  // The micro-batches: this rank's rows in A contiguous parts, each drawing its dropout and
  // drop-path masks by its rows' indices in the global batch.
  for (int64_t k = 0; k < A; ++k) {
    const Rows part = shard_rows(mine.size(), int(k), int(A));
    if (part.size() == 0) continue;
    Batch micro = batch;
    micro.images = images + part.lo * C * H * W;
    micro.size = part.size();
    if (batch.labels) micro.labels = batch.labels + part.lo;
    if (batch.targets) micro.targets = batch.targets + part.lo * K;
    const ForwardMode mode{true, cfg.seed, uint64_t(p.global_step), mine.lo + part.lo};
    int64_t part_correct = 0;
    const double loss = loss_step.run(model, micro, cfg.loss(), mode, &part_correct,
                                      float(part.size()) / float(bs), teacher.logits(micro));
    stats[0] += loss * double(part.size());
    correct += part_correct;
    if (!std::isfinite(loss)) break;
  }
  stats[1] = double(correct);
}

Progress TrainLoop::progress_at(int64_t step_in_epoch, const EpochSums& sums,
                                SteadyClock::time_point t0) const {
  Progress r = p;
  r.step_in_epoch = step_in_epoch;
  r.loss_sum = sums.loss;
  r.correct_sum = sums.correct;
  r.seen = sums.seen;
  r.seconds = seconds_since(t0);
  return r;
}

void TrainLoop::after_step(int64_t epoch, int64_t s, const double* stats, const EpochSums& sums,
                           SteadyClock::time_point t0, ProgressLine& bar) {
  // Asked to stop: within the epoch after a recovery state; at its last step once the
  // epoch has ended as usual.
  const bool stop = stats[4] > 0 && s + 1 < steps_per_epoch;
  stop_pending = stats[4] > 0;
  if (stats[3] > 0 || stop) {  // a recovery state: everything to go on after this step
    if (!all_finite(model.params().data(), int64_t(model.params().size())))
      throw Error(diverged(cfg, "a weight is not finite", p, epoch, s));
    Progress r = progress_at(s + 1, sums, t0);
    r.global_step = p.global_step + 1;
    run_agreed(comm, "writing a recovery state to " + cfg.output, [&] {
      if (!write) return;
      const auto w0 = SteadyClock::now();
      const size_t bytes =
          save_state(dir / kRecoveryFile, model, opt, ema, r, cfg, steps_per_epoch, eval_set != nullptr);
      recovery.wrote(seconds_since(w0));
      if (!cfg.progress_bar)
        log << "recovery state after step " << s + 1 << " of epoch " << epoch + 1 << ": "
            << (dir / kRecoveryFile).string() << " (" << format_bytes(bytes) << " in " << std::setprecision(3)
            << seconds_since(w0) << " s)" << std::endl;
    });
  }
  if (stop) {
    bar.finish();
    throw stopped(cfg,
                  "after step " + std::to_string(s + 1) + " of " + std::to_string(steps_per_epoch) +
                      " in epoch " + std::to_string(epoch + 1),
                  dir / kRecoveryFile, stop_reason);
  }
}

EpochSums TrainLoop::train_epoch(int64_t epoch, int64_t first, SteadyClock::time_point t0) {
  const auto order = cfg.aug_repeats > 0 ? repeated_epoch_order(train_set.size() / cfg.aug_repeats,
                                                                cfg.aug_repeats, cfg.seed, epoch)
                                         : epoch_order(N, cfg.seed, epoch);
  if (cfg.on_epoch_start) cfg.on_epoch_start(epoch);
  EpochSums sums;
  if (first > 0) sums = {p.loss_sum, p.correct_sum, p.seen, 0};
  // (A state at the epoch's last step, whose evaluation failed, runs no step: its lr.)
  sums.lr = first > 0 ? lr_at(sched, p.global_step - 1) : 0;
  ProgressLine bar(log, cfg.progress_bar, cfg.log_every);
  bar.start(epoch, cfg.total_epochs(), steps_per_epoch, first, sums.seen);
  ShardPlan plan = ranks > 1 ? shard_epoch(order, B, rank, ranks, partners) : ShardPlan{order, {}};
  std::unique_ptr<Prefetcher> batches =
      ranks > 1 ? std::make_unique<Prefetcher>(train_set, std::move(plan.order), std::move(plan.ends), first,
                                               cfg.workers)
                : std::make_unique<Prefetcher>(train_set, std::move(plan.order), B, first, cfg.workers);
  for (int64_t s = first; s < steps_per_epoch; ++s, ++p.global_step) {
    const int64_t bs = std::min(B, N - s * B);
    const Rows mine = shard_rows(bs, rank, ranks);
    // This rank's loss sum, correct count and rows, and whether a recovery state is due
    // after the step (rank 0's clock decides); summed over ranks with the status.
    const bool recover = write && s + 1 < steps_per_epoch && recovery.due(p.global_step);
    // stats[4]: the ranks asked to stop (TrainConfig::stop_requested) during the step.
    double stats[5] = {0, 0, double(mine.size()), recover ? 1.0 : 0.0, 0};
    // Every rank learns whether all are fine here, before the large all-reduce.
    run_agreed(
        comm, "epoch " + std::to_string(epoch + 1) + " step " + std::to_string(s),
        [&] {
          forward_backward(mine, bs, *batches, epoch, s, stats);
          stop_reason = cfg.stop_requested ? cfg.stop_requested() : 0;
          stats[4] = stop_reason != 0;
        },
        stats, 5);
    if (ranks > 1) comm.sum(model.grads().data(), int64_t(model.grads().size()));
    // The summed loss is the same on every rank, so all stop together.
    if (!std::isfinite(stats[0]))
      throw Error(
          diverged(cfg, "the loss is " + nonfinite_name(stats[0] / std::max(stats[2], 1.0)) + " (not finite)",
                   p, epoch, s));
    if (cfg.clip_grad > 0) {
      if (cfg.clip_mode == "value")
        clip_grad_value(model.table(), model.grads().data(), cfg.clip_grad);
      else if (cfg.clip_mode == "agc")
        adaptive_clip_grad(model.table(), model.params().data(), model.grads().data(), cfg.clip_grad);
      else
        clip_grad_norm(model.table(), model.grads().data(), cfg.clip_grad);
    }
    sums.lr = lr_at(sched, p.global_step);
    opt.step(model.params().data(), model.grads().data(), sums.lr);
    if (ema) ema_update(*ema, model.params().data(), ema_decay(cfg, p.global_step + 1));
    sums.loss += stats[0];
    sums.correct += int64_t(stats[1]);
    sums.seen += int64_t(stats[2]);
    bar.update(s, sums.loss / double(sums.seen), double(sums.correct) / double(sums.seen), sums.seen,
               sums.lr);
    after_step(epoch, s, stats, sums, t0, bar);
  }
  batches.reset();
  bar.finish();
  // A finite loss can still leave an infinite weight after the last step's update;
  // such weights must not replace the last good checkpoint.
  if (!all_finite(model.params().data(), int64_t(model.params().size())))
    throw Error(diverged(cfg, "a weight is not finite", p, epoch, steps_per_epoch - 1));
  return sums;
}

EpochStats TrainLoop::evaluate_epoch(int64_t epoch, const EpochSums& sums, SteadyClock::time_point t0) {
  EpochStats e;
  e.epoch = epoch + 1;
  e.train_loss = sums.loss / double(N);
  e.train_top1 = double(sums.correct) / double(N);
  // A long evaluation shows it is alive: a bar, or a line every 30 s in a log (none where
  // the log has no step lines either).
  const std::string at = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(cfg.total_epochs());
  const double eval_log_seconds = cfg.log_every > 0 ? 30 : 0;
  EvalProgress eval_bar(log, cfg.progress_bar, eval_log_seconds, at + " eval"),
      ema_bar(log, cfg.progress_bar, eval_log_seconds, at + " EMA eval");
  try {
    if (eval_set) e.eval = evaluate(model, *eval_set, cfg.batch_size, &comm, &eval_bar);
    if (eval_set && ema) {
      swap_weights(model, *ema);
      try {
        e.ema = evaluate(model, *eval_set, cfg.batch_size, &comm, &ema_bar);
      } catch (...) {
        swap_weights(model, *ema);
        throw;
      }
      swap_weights(model, *ema);
    }
  } catch (const Error& err) {
    // An evaluation that fails (an image that does not decode; every rank fails together)
    // loses no training: a recovery state at the epoch's last step, from which --resume
    // evaluates the epoch and goes on once the file is mended or removed.
    const Progress r = progress_at(steps_per_epoch, sums, t0);
    run_agreed(comm, "writing a recovery state to " + cfg.output, [&] {
      if (write)
        save_state(dir / kRecoveryFile, model, opt, ema, r, cfg, steps_per_epoch, eval_set != nullptr);
    });
    if (!write) throw;
    throw Error(detail::concat(err.what(), "\nthe training of epoch ", epoch + 1, " is kept in ",
                               (dir / kRecoveryFile).string(), ": mend or remove the file, then --resume ",
                               cfg.output, " evaluates the epoch and goes on"));
  }
  // Finite weights can still make a model whose every output is NaN (|w| ~ 1e30 after --lr
  // 1e30): its evaluation shows it, and such an epoch must not become the best or the last
  // checkpoint (it did, and the run ended with exit 0).
  for (const EvalResult* r : {&e.eval, &e.ema})
    if (r->count > 0 && !std::isfinite(r->loss))
      throw Error(diverged(cfg, "the evaluation loss is " + nonfinite_name(r->loss) + " (not finite)", p,
                           epoch, steps_per_epoch - 1));
  e.lr = sums.lr;
  e.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return e;
}

// The time the run's remaining epochs take at the pace of its last (up to) five, evaluation
// included: the step lines' ETA covers one epoch only, which says little on day one of a
// 300-epoch run.
std::string TrainLoop::run_eta(int64_t epoch) const {
  const int64_t left = cfg.total_epochs() - epoch, n = std::min<int64_t>(5, int64_t(p.hist.size()));
  if (left <= 0 || n == 0) return "";
  double seconds = 0;
  for (int64_t i = 0; i < n; ++i) seconds += p.hist[p.hist.size() - 1 - size_t(i)].seconds;
  return ", run ETA " + clock_str(seconds / double(n) * double(left));
}

void TrainLoop::commit_epoch(const EpochStats& e) {
  // The history keeps the epoch's numbers, as the training state does, not its confusion
  // matrices (8 MB each at 1000 classes, every epoch of a run): a resumed run's history is
  // then the same as an uninterrupted one's.
  p.hist.push_back(e);
  p.hist.back().eval.confusion = std::vector<int64_t>();
  p.hist.back().ema.confusion = std::vector<int64_t>();
  p.epochs_done = e.epoch;
  p.step_in_epoch = p.correct_sum = p.seen = 0;
  p.loss_sum = p.seconds = 0;
  // Fixed decimals, as the step lines and the best: line print them (not 1.9 beside 1.712).
  auto figures = [](const char* what, double loss, double top1) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s loss %.4f top1 %.2f%%", what, loss, 100 * top1);
    return std::string(buf);
  };
  const double rate = double(N) / e.seconds;
  char rate_text[32], seconds_text[32];  // two digits below 10, whole numbers above
  std::snprintf(rate_text, sizeof rate_text, rate < 10 ? "%.2g" : "%.0f", rate);
  std::snprintf(seconds_text, sizeof seconds_text, e.seconds < 10 ? "%.2g" : "%.0f", e.seconds);
  const std::string tail = std::string(", ") + rate_text + " img/s, " + seconds_text + " s";
  log << "epoch " << e.epoch << "/" << cfg.total_epochs() << ": "
      << figures("train", e.train_loss, e.train_top1);
  if (eval_set) log << ", " << figures("eval", e.eval.loss, e.eval.top1);
  if (eval_set && ema) log << ", " << figures("EMA eval", e.ema.loss, e.ema.top1);
  log << tail << run_eta(e.epoch) << std::endl;
  // The score (p.best_top1 holds the best of it, whatever the metric); the first epoch
  // is the best so far whatever its score.
  const double score = epoch_score(e, eval_set != nullptr, cfg.eval_metric);
  const bool better = p.hist.size() == 1 || score > p.best_top1;
  if (better) {
    p.best_top1 = score;
    p.since_best = 0;
  } else {
    ++p.since_best;
  }
  const double ema_score = epoch_score(e, true, cfg.eval_metric, true);
  const bool ema_better = eval_set && ema && (p.hist.size() == 1 || ema_score > p.best_ema_top1);
  if (ema_better) p.best_ema_top1 = ema_score;
  // The ranks hold the same weights (identical sums, identical updates); checked once an
  // epoch so that a divergence cannot go unnoticed into a checkpoint.
  if (ranks > 1)
    check_agreement(comm, {{"weights after epoch " + std::to_string(e.epoch), params_hash(model)}});
  run_agreed(comm, "writing " + cfg.output, [&] {
    if (write) write_epoch_files(e, better, ema_better);
  });
}

void TrainLoop::write_epoch_files(const EpochStats& e, bool better, bool ema_better) {
  // The state last: it commits the epoch. A crash before it resumes from the previous
  // state and writes this epoch's files again, with the same bits; a crash after it
  // finds every file of the epoch written (a finished run is then complete).
  // The epoch's numbers, as summary.csv has them, and the name of the one the run
  // ranks by (vit average ranks by it too).
  std::map<std::string, std::string> meta = {{"global_step", std::to_string(p.global_step)},
                                             {"epoch", std::to_string(p.epochs_done)},
                                             {"metric", metric_key(cfg.eval_metric, eval_set != nullptr)}};
  auto add_eval = [](std::map<std::string, std::string>& m, const EvalResult& r) {
    m["eval_top1"] = full(100 * r.top1);
    m["eval_top5"] = full(100 * r.top5);
    m["eval_loss"] = full(r.loss);
  };
  meta["train_top1"] = full(100 * e.train_top1);
  meta["train_loss"] = full(e.train_loss);
  if (eval_set) add_eval(meta, e.eval);
  if (!cfg.class_names.empty()) meta["class_names"] = nlohmann::json(cfg.class_names).dump();
  save_checkpoint((dir / "last.safetensors").string(), model, meta, false);
  if (better) save_checkpoint((dir / "best.safetensors").string(), model, meta, false);
  const auto kept =
      kept_checkpoints(epoch_scores(p.hist, eval_set != nullptr, cfg.eval_metric), cfg.checkpoint_hist);
  if (std::find(kept.begin(), kept.end(), e.epoch) != kept.end())
    copy_file_atomic((dir / "last.safetensors").string(), (dir / checkpoint_name(e.epoch)).string());
  if (ema) {
    auto ema_meta = meta;
    ema_meta.erase("train_top1");  // the EMA is not what trained
    ema_meta.erase("train_loss");
    if (eval_set) add_eval(ema_meta, e.ema);
    swap_weights(model, *ema);
    save_checkpoint((dir / "last_ema.safetensors").string(), model, ema_meta, false);
    if (ema_better) save_checkpoint((dir / "best_ema.safetensors").string(), model, ema_meta, false);
    swap_weights(model, *ema);
  }
  write_file_atomic((dir / "summary.csv").string(),
                    summary_csv(p.hist, ema != nullptr && eval_set != nullptr, eval_set != nullptr));
  const auto w0 = SteadyClock::now();
  save_state(dir / kStateFile, model, opt, ema, p, cfg, steps_per_epoch, eval_set != nullptr);
  recovery.wrote(seconds_since(w0));
  fs::remove(dir / kRecoveryFile);  // older than the state now: space back (1 GB for ViT-B)
  // Committed: the epochs that left the history go, and any file a killed run wrote for
  // an epoch its state did not have yet. (A crash just before this leaves them to the
  // next epoch's pass; after a run's last epoch, one checkpoint too many.)
  if (cfg.checkpoint_hist > 0) prune_checkpoints(dir.string(), kept);
}

void TrainLoop::stop_if_asked(int64_t epoch) {
  // Asked to stop at the epoch's last step or since (during its eval): the epoch is
  // committed; the ranks agree before any starts the next.
  if (epoch + 1 >= cfg.total_epochs() || !cfg.stop_requested) return;
  if (!stop_pending) stop_reason = cfg.stop_requested();
  double asked = stop_pending || stop_reason != 0;
  if (ranks > 1) comm.sum(&asked, 1);
  if (asked > 0)
    throw stopped(cfg, "after epoch " + std::to_string(epoch + 1), dir / kStateFile, stop_reason);
}

std::vector<EpochStats> TrainLoop::run() {
  if (cfg.resume) {
    resume();
    if (cfg.on_resumed) cfg.on_resumed();
  }
  begin();
  for (int64_t epoch = p.epochs_done; epoch < cfg.total_epochs(); ++epoch) {
    if (cfg.patience > 0 && p.since_best >= cfg.patience) {
      // The model's scores, not its EMA's (which may still be improving): said, with the way on.
      log << "early stopping: no better " << (eval_set ? "eval " : "training ")
          << metric_words(cfg.eval_metric) << (ema ? " of the model (not its EMA)" : "") << " for "
          << cfg.patience << (cfg.patience == 1 ? " epoch" : " epochs")
          << (cfg.output.empty()
                  ? ""
                  : "; vit train --resume " + shell_word(cfg.output) + " --patience N (0: none) goes on")
          << std::endl;
      break;
    }
    // Resumed from a recovery state: the epoch goes on after its step, with its sums so far.
    const int64_t first = epoch == p.epochs_done ? p.step_in_epoch : 0;
    const auto t0 = SteadyClock::now() - std::chrono::duration_cast<SteadyClock::duration>(
                                             std::chrono::duration<double>(first > 0 ? p.seconds : 0));
    const EpochSums sums = train_epoch(epoch, first, t0);
    const EpochStats e = evaluate_epoch(epoch, sums, t0);
    commit_epoch(e);
    if (cfg.on_epoch_end) cfg.on_epoch_end(e);
    stop_if_asked(epoch);
  }
  return p.hist;
}

}  // namespace

std::vector<EpochStats> train(ViT& model, const Dataset& train_set, const Dataset* eval_set,
                              const TrainConfig& cfg, std::ostream& log_any) {
  cfg.validate();
  VIT_CHECK(eval_set || cfg.eval_metric != "top5",
            "eval metric top5 needs an eval set: without one the score is the training set's, which counts "
            "no top-5");
  check_shapes(model, train_set);
  if (eval_set) check_shapes(model, *eval_set);
  if (cfg.aug_repeats > 0) {
    VIT_CHECK(train_set.size() % cfg.aug_repeats == 0, "--aug-repeats ", cfg.aug_repeats,
              ": the training set's ", train_set.size(), " samples are not that many repeats of its images");
    const int64_t images = train_set.size() / cfg.aug_repeats;
    VIT_VALUE_CHECK(repeated_epoch_size(images) > 0,
                    "--aug-repeats: timm's sampler takes the largest multiple of "
                    "256 samples the ",
                    images, " training images hold, and ", images, " hold none");
  }
  return TrainLoop(model, train_set, eval_set, cfg, log_any).run();
}

}  // namespace vit
