// vit train: flags named as timm's train.py where one exists.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "commands.h"
#include "core/check.h"
#include "core/file.h"
#include "core/threads.h"
#include "core/utf8.h"
#include "data/augment.h"
#include "data/open.h"
#include "data/synthetic.h"
#include "model/params.h"
#include "model_flags.h"
#include "ops/ops.h"
#include "resume.h"
#include "stop_signals.h"
#include "train/memory.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/trainer.h"
#include "train_hooks.h"
#include "validators.h"

namespace vit::app {

namespace {
struct TrainFlags {
  ModelFlags model;
  std::string recipe;  // expanded before parsing (recipes.cpp); a flag here for --help
  TrainConfig train;
  std::string data_dir, dataset = "auto";
  double val_split = 0;
  int64_t synthetic = 0;
  AugFlags aug;
  std::vector<float> betas;
  float bce_target_thresh = 0.f;                      // --bce-target-thresh, when given
  float head_init_scale = 1.f, head_init_bias = 0.f;  // timm's, when given
  double lr_base = 0.1;                               // timm's --lr-base, --lr-base-size and --lr-base-scale
  int64_t lr_base_size = 256;
  std::string lr_base_scale;
  std::string opt =
      TrainConfig{}.optim.name;  // timm's name (sgd is Nesterov's), as train.optim.name takes it
  int threads = 0, shards = 0;
  double comm_timeout = 600;
  std::string resume, pretrained, teacher, progress = "auto", recovery = "auto", pos_resample;
  bool skip_bad_images = false, no_memory_check = false;
  bool amp = false;
  std::string amp_dtype = "bfloat16";
};
}  // namespace

namespace {
// "86.6M", "4.3K": a parameter count for the log.
std::string count_str(int64_t n) {
  char buf[32];
  if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  else if (n >= 1000)
    std::snprintf(buf, sizeof buf, "%.1fK", double(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%lld", (long long)n);
  return buf;
}

// The run's first line, before anything slow: what is trained, on what, with how many threads.
// The run's best epoch, as timm ends a run ("*** Best metric: ..."): "best: eval top-1
// 98.12% at epoch 4 of 5 (best.safetensors)", by the score that picks best.safetensors
// (--eval-metric on the eval set, or the training set without one; the first epoch that
// reached it), and the model EMA's likewise.
std::string best_line(const std::vector<EpochStats>& hist, bool eval, const TrainConfig& t, bool wrote) {
  if (hist.empty()) return "best: no epoch trained";
  const std::string name = std::string(eval ? "eval " : "training ") + metric_words(t.eval_metric);
  auto best = [&](const std::vector<double>& scores) {
    size_t at = 0;
    for (size_t i = 1; i < scores.size(); ++i)
      if (scores[i] > scores[at]) at = i;
    return std::make_pair(scores[at], hist[at].epoch);
  };
  const auto [score, epoch] = best(epoch_scores(hist, eval, t.eval_metric));
  std::ostringstream os;
  os << "best: " << name << " " << score_str(score, t.eval_metric) << " at epoch " << epoch << " of "
     << hist.back().epoch << (wrote ? " (best.safetensors)" : "");
  if (t.model_ema && eval) {
    const auto [ema_score, ema_epoch] = best(epoch_scores(hist, true, t.eval_metric, true));
    os << "; EMA " << name << " " << score_str(ema_score, t.eval_metric) << " at epoch " << ema_epoch
       << (wrote ? " (best_ema.safetensors)" : "");
  }
  return os.str();
}

// The checkpoint history kept (--checkpoint-hist), best first, as timm lists "Current
// checkpoints", and how to average it.
std::string history_line(const std::vector<EpochStats>& hist, bool eval, const TrainConfig& t) {
  const std::vector<double> scores = epoch_scores(hist, eval, t.eval_metric);
  std::ostringstream os;
  os << "kept the best epochs by " << metric_key(t.eval_metric, eval) << ":";
  const char* sep = " ";
  for (int64_t e : kept_checkpoints(scores, t.checkpoint_hist)) {
    os << sep << checkpoint_name(e) << " (" << score_str(scores[size_t(e - 1)], t.eval_metric) << ")";
    sep = ", ";
  }
  os << "; average them with: vit average " << shell_word(t.output) << " -o "
     << shell_word((std::filesystem::path(t.output) / "averaged.safetensors").string());
  return os.str();
}

std::string first_line(const TrainFlags& F, const Comm& comm, const TrainHooks* hooks) {
  std::string model;
  if (!F.pretrained.empty())
    model = "--pretrained " + F.pretrained;
  else
    model = (F.model.config_file.empty() ? F.model.model : F.model.config_file) + " (" +
            count_str(ParamTable(F.model.resolve()).total()) + " parameters)";
  const std::string data = hooks && hooks->data ? hooks->data_name
                           : F.synthetic > 0    ? std::to_string(F.synthetic) + " synthetic samples"
                                                : F.data_dir + " (" + F.dataset + ")";
  std::string line =
      "vit train: model " + model + ", data " + data + ", threads: " + std::to_string(num_threads());
  if (comm.size() > 1) line += " per process, " + std::to_string(comm.size()) + " processes";
  if (F.amp) line += "\nmixed precision (--amp): the blocks' matrix products in bfloat16, fp32 accumulation";
  if (F.amp && !ops::bf16_emulated().empty()) line += "\nwarning: --amp: " + ops::bf16_emulated();
  return line;
}

// A flag's value in args.json: a JSON number when the text is one exactly as written (it
// reads back to the same text), else the text.
nlohmann::json setting_value(const std::string& text) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.is_number() && j.dump() == text) return j;
  } catch (const nlohmann::json::exception&) {
  }
  return text;
}

// Flags whose default changed (2026-12-03 and 12-04), with the flag each qualifies: where that
// one is given, args.json keeps their value even when it is the default. resume.cpp reads a
// missing one as a run recorded before them, with the old fill; a run given the default then
// resumed with the old fill, other bits than the run uninterrupted.
constexpr std::pair<const char*, const char*> kKeptWith[] = {
    {"aa-fill", "aa"}, {"aa-ops", "aa"}, {"crop-fill", "crop-pad"}};

// Whether timm's --lr-base sets the lr: given, and no --lr (as timm's train.py; a recipe's
// --lr is left out beside --lr-base, recipes.cpp).
bool lr_from_base(const CLI::App& cmd) {
  return cmd.count("--lr-base") > 0 && cmd.count("--lr") == 0;
}

// args.json: the settings the run was given (a recipe's flags expanded, the last of a
// repeated flag), as {flag name without "--": value}: true for a switch, a number or text
// for one value, a list for several; --data-dir, --pretrained and --teacher as absolute paths;
// kKeptWith's flags and --seed also at their default. --resume turns it back into flags (resume.cpp).
// skip: flags left out.
nlohmann::json settings_json(const CLI::App& cmd, const std::vector<std::string>& skip = {}) {
  nlohmann::json j = nlohmann::json::object();
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() == 0 || o->get_lnames().empty()) continue;
    const std::string& name = o->get_lnames().front();
    if (name == "help" || name == "resume" || name == "recipe") continue;
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    if (o->get_expected_max() == 0) {  // a switch
      j[name] = true;
      continue;
    }
    std::vector<std::string> values = o->reduced_results();
    for (const std::string& v : values)
      VIT_USAGE_CHECK(is_utf8(v), "--", name,
                      ": a value that is not UTF-8 text cannot be kept in the run's args.json");
    // Paths as absolute ones: --resume DIR then finds the data and weights from any directory.
    if (name == "data-dir" || name == "pretrained" || name == "teacher")
      for (std::string& v : values) v = absolute_path(v);
    if (values.size() == 1 && o->get_expected_max() <= 1) {
      j[name] = setting_value(values.front());
    } else {
      j[name] = nlohmann::json::array();
      for (auto& v : values) j[name].push_back(setting_value(v));
    }
  }
  // --lr given beside --lr-base sets the lr: the run resumes with it alone.
  if (j.contains("lr") && j.contains("lr-base"))
    for (const char* flag : {"lr-base", "lr-base-size", "lr-base-scale"}) j.erase(flag);
  for (const auto& [flag, with] : kKeptWith)
    if (j.contains(with) && !j.contains(flag))
      j[flag] = setting_value(cmd.get_option(std::string("--") + flag)->get_default_str());
  // The seed, given or not: args.json alone then says how to draw the run again (it was in the
  // state file's binary header alone; timm's args.yaml holds every argument).
  if (!j.contains("seed") && std::find(skip.begin(), skip.end(), "seed") == skip.end())
    j["seed"] = setting_value(cmd.get_option("--seed")->get_default_str());
  j["args-version"] = kArgsVersion;
  return j;
}

// What every process of an MPI run must have been given alike (TrainConfig::agreed_settings):
// the settings but those a process may give its own of (resume_may_change's, but --epochs),
// and the paths, whose contents the start-up check compares instead (the data's sizes, the
// initial weights), as hosts may mount them apart.
// (Flags are compared as given: one given at its default on one rank and left out on
// another differ; give every rank the same command.)
std::string agreed_settings(const CLI::App& cmd) {
  return settings_json(cmd, {"threads", "workers", "comm-timeout", "progress", "log-every",
                             "recovery-interval", "data-dir", "output", "pretrained", "teacher", "config"})
      .dump();
}

// The model's, the data's and augmentation's flags (the model's own come first, from ModelFlags).
void add_model_and_data_flags(CLI::App& cmd, TrainFlags* f) {
  f->model.add_to(cmd);
  TrainConfig& t = f->train;
  t.sched.lr = 5e-3f;
  std::string recipes;
  for (auto& n : recipe_names()) recipes += (recipes.empty() ? "" : ", ") + n;
  cmd.add_option("--recipe", f->recipe, "a named set of flags that later flags override: " + recipes);
  cmd.add_option(
      "--pretrained", f->pretrained,
      "fine-tune these weights (vitcpp, timm or Hugging Face; file or directory); with --num-classes K "
      "a new zero-initialized head, with --img-size S the position embeddings are resampled; --model NAME "
      "beside it names the model the file is (a bare timm state dict takes the name's heads and "
      "preprocessing)");
  add_pos_resample(cmd, f->pos_resample);
  cmd.add_flag("--freeze-backbone", t.optim.freeze_backbone, "train the head alone (linear probe)");
  cmd.add_option(
      "--teacher", f->teacher,
      "distill this model's predictions, as DeiT (vitcpp, timm or Hugging Face; file or directory): "
      "into the distillation token's head of a distilled model (--distilled, deit_*_distilled), "
      "else into the class head; it must take the same images and classes");
  cmd.add_option("--distillation-type", t.distill.type,
                 "hard: cross entropy against the teacher's class; soft: KL divergence at --distillation-tau "
                 "(DeiT's)")
      ->check(CLI::IsMember({"hard", "soft"}))
      ->capture_default_str();
  cmd.add_option("--distillation-alpha", t.distill.alpha,
                 "the distillation term's weight: loss = (1 - alpha) x base + alpha x distillation")
      ->capture_default_str();
  cmd.add_option("--distillation-tau", t.distill.tau, "soft distillation's temperature")
      ->capture_default_str();
  cmd.add_flag("--amp", f->amp,
               "mixed precision: the blocks' matrix products on bf16 operands with fp32 accumulation "
               "(weights, gradients and optimizer stay fp32; needs AVX-512, fastest with AMX)");
  cmd.add_option("--amp-dtype", f->amp_dtype, "lower precision for --amp (bfloat16 only on the CPU)")
      ->transform(dtype_of({"bfloat16"}))
      ->capture_default_str();
  cmd.add_option("--layer-decay", t.optim.layer_decay,
                 "layer-wise lr decay: block i of D gets lr x decay^(D - i), the stem decay^(D + 1) (timm's; "
                 "0 = off)")
      ->capture_default_str();
  cmd.add_option("--data-dir", f->data_dir,
                 "dataset directory: IDX (MNIST, Fashion-MNIST), CIFAR-10/100 binary, or image folders "
                 "(DIR/train/<class>/*.png|jpg, DIR/val/ or valid/, validation/, ..., else DIR/test/)");
  cmd.add_option(
         "--dataset", f->dataset,
         "auto, idx, cifar10, cifar100 (its fine labels), cifar100-coarse (its 20 superclasses) or folder")
      ->capture_default_str();
  cmd.add_flag("--skip-bad-images", f->skip_bad_images,
               "image folders: decode every file first and leave out those that fail, with a count "
               "(default: stop at the first)");
  cmd.add_option("--val-split", f->val_split,
                 "hold out this fraction of train for evaluation (default: "
                 "evaluate on the test split; timm's --val-split names a split, which vit finds itself: "
                 "val/ or validation/ beside train/)")
      ->check(fraction());
  cmd.add_option("--synthetic", f->synthetic, "train on N synthetic samples (plus N/5 for evaluation)")
      ->check(positive());
  f->aug.add_to(cmd);
  cmd.add_option("--mixup", t.mixup.mixup_alpha, "mixup alpha (0 = off)")->capture_default_str();
  cmd.add_option("--cutmix", t.mixup.cutmix_alpha, "cutmix alpha (0 = off)")->capture_default_str();
  cmd.add_option("--cutmix-minmax", t.mixup.cutmix_minmax,
                 "CutMix's box sides drawn in [MIN, MAX) of the image's instead of from the cutmix lam "
                 "(timm's; turns CutMix on, alpha 1)")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd.add_option("--mixup-prob", t.mixup.prob, "chance a batch (pair, sample) is mixed")
      ->capture_default_str();
  cmd.add_option("--mixup-switch-prob", t.mixup.switch_prob, "chance of cutmix when both are on")
      ->capture_default_str();
  cmd.add_option("--mixup-mode", t.mixup.mode,
                 "how mixup and CutMix draw: batch (one draw for the batch), pair (one for each pair of "
                 "samples mixed together) or elem (one for each sample), as timm's")
      ->check(CLI::IsMember({"batch", "pair", "elem"}))
      ->capture_default_str();
  cmd.add_option("--mixup-off-epoch", t.mixup.off_epoch,
                 "stop mixing from this epoch on, counted from 0 as timm does: the run's last epochs train "
                 "on the images as they are (0 = never)")
      ->check(non_negative())
      ->capture_default_str();
}

// The optimizer's, the schedule's and the loss's flags.
void add_optimizer_flags(CLI::App& cmd, TrainFlags* f) {
  TrainConfig& t = f->train;
  cmd.add_option("--epochs", t.epochs, "epochs")->capture_default_str();
  cmd.add_option("--aug-repeats", t.aug_repeats,
                 "repeated augmentation (timm's, DeiT's): each image N times an epoch, each with its own "
                 "augmentation, side by side in the batches; an epoch is then the largest multiple of 256 "
                 "samples the training set holds (about 1/N of its images; 0: off)")
      ->capture_default_str();
  cmd.add_option("-b,--batch-size", t.batch_size, "batch size (of a micro-batch with --grad-accum-steps)")
      ->capture_default_str();
  cmd.add_option("--grad-accum-steps", t.grad_accum_steps,
                 "gradient accumulation: each optimizer step sums the gradients of N micro-batches of -b "
                 "(the global batch is -b x N; same result as one batch of -b x N up to float rounding)")
      ->capture_default_str();
  cmd.add_option("--lr", t.sched.lr, "learning rate")->capture_default_str();
  cmd.add_option("--head-init-scale", f->head_init_scale,
                 "multiply the classifier head's initial weights and bias by this (timm's; a new head of "
                 "--pretrained starts at zero, which this leaves at zero)");
  cmd.add_option(
      "--head-init-bias", f->head_init_bias,
      "set the classifier head's initial bias to this value, every class (timm's; e.g. -log(K - 1) "
      "for BCE's prior)");
  cmd.add_option(
         "--lr-base", f->lr_base,
         "the lr from a base lr for a batch of --lr-base-size, scaled to the global batch (-b x "
         "--grad-accum-steps), as timm's train.py does where --lr is not given (a recipe's --lr gives "
         "way to it)")
      ->check(positive());
  cmd.add_option("--lr-base-size", f->lr_base_size, "--lr-base's batch size")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--lr-base-scale", f->lr_base_scale,
                 "--lr-base's scaling: linear (lr-base x batch / size) or sqrt (x its square root); default "
                 "timm's: sqrt for the Adam family (--opt adam, adamw, lamb, lambc), linear for SGD and Lion")
      ->check(CLI::IsMember({"linear", "sqrt"}));
  cmd.add_option("--opt", f->opt,
                 "optimizer, as timm names them: sgd and nesterov (SGD with Nesterov momentum), momentum "
                 "(plain momentum SGD), adam, adamw, lamb (timm's Lamb: Adam's moments, a trust ratio "
                 "||w|| / ||update|| on each tensor with weight decay, the gradients' global norm clipped "
                 "at 1; --opt-eps 1e-6 unless given), lambc (lamb with the ratios held to 1), lion (timm's "
                 "Lion: steps of lr times the sign of a momentum blend, decoupled weight decay; --opt-betas "
                 "0.9 0.99 unless given; it wants a smaller lr than adamw, 3-10x in its paper)")
      ->check(CLI::IsMember({"sgd", "nesterov", "momentum", "adam", "adamw", "lamb", "lambc", "lion"}))
      ->capture_default_str();
  cmd.add_option("--momentum", t.optim.momentum, "SGD momentum")->capture_default_str();
  cmd.add_flag("--nesterov", t.optim.nesterov, "Nesterov momentum for --opt momentum too");
  cmd.add_option("--opt-eps", t.optim.eps, "Adam epsilon")->capture_default_str();
  cmd.add_option("--opt-betas", f->betas,
                 "Adam/AdamW/Lamb/Lion betas: B1 B2 (default 0.9 0.999; Lion's 0.9 0.99)")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--weight-decay", t.optim.weight_decay, "weight decay")->capture_default_str();
  cmd.add_option("--sched", t.sched.name, "lr schedule")
      ->check(CLI::IsMember({"cosine", "step", "multistep", "none"}))
      ->capture_default_str();
  cmd.add_option("--warmup-epochs", t.warmup_epochs, "linear warmup epochs")->capture_default_str();
  cmd.add_option(
         "--cooldown-epochs", t.cooldown_epochs,
         "epochs at --min-lr after the cosine ends: the run trains --epochs + these (timm's, DeiT's 10)")
      ->check(non_negative())
      ->capture_default_str();
  cmd.add_option("--warmup-lr", t.sched.warmup_lr, "lr at the start of warmup")->capture_default_str();
  cmd.add_option("--min-lr", t.sched.min_lr, "cosine floor")->capture_default_str();
  cmd.add_option("--decay-rate", t.sched.decay_rate, "step and multistep schedules: the factor")
      ->capture_default_str();
  cmd.add_option("--decay-epochs", t.decay_epochs,
                 "step schedule: epochs between decays, counted from the start (timm's; fractions allowed)")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--decay-milestones", t.decay_milestones,
                 "multistep schedule: the epochs at which the lr is multiplied by --decay-rate (timm's; its "
                 "convention: milestone M applies from the step before it)")
      ->expected(1, -1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->capture_default_str();
  cmd.add_option("--smoothing", t.smoothing, "label smoothing")->capture_default_str();
  cmd.add_flag("--bce-loss", t.bce_loss,
               "binary cross-entropy (a sigmoid per class) in place of softmax cross-entropy, as timm's "
               "BinaryCrossEntropy (DeiT III's recipe); it takes --smoothing and mixup's targets (timm's "
               "train.py trains cross-entropy instead when neither is on); evaluation's loss stays "
               "cross-entropy");
  cmd.add_option("--bce-target-thresh", f->bce_target_thresh,
                 "--bce-loss: binarize the targets, 1 where above this, else 0 (timm's; e.g. 0.2 with "
                 "mixup)");
  cmd.add_option("--bce-pos-weight", t.bce.pos_weight,
                 "--bce-loss: the weight of each class's positive term (BCEWithLogitsLoss's pos_weight)")
      ->capture_default_str();
  cmd.add_flag("--bce-sum", t.bce.sum_classes,
               "--bce-loss: sum over the classes and average over the batch (timm's; by default the mean of "
               "every class's loss)");
  cmd.add_option("--clip-grad", t.clip_grad,
                 "clip the gradients (0 = off): the global norm's maximum, or what --clip-mode says")
      ->capture_default_str();
  cmd.add_option("--clip-mode", t.clip_mode,
                 "norm: the global L2 norm at most --clip-grad; value: each gradient clamped to "
                 "[-clip, clip]; agc: adaptive clipping (NFNets'), each output row's gradient norm at most "
                 "--clip-grad x its weights' norm, the head left out (timm's)")
      ->check(CLI::IsMember({"norm", "value", "agc"}))
      ->capture_default_str();
  cmd.add_flag(
      "--model-ema", t.model_ema,
      "keep an EMA of the weights (timm's): updated after every optimizer step, evaluated each epoch "
      "(summary.csv's ema_* columns), saved as last_ema.safetensors and best_ema.safetensors");
  cmd.add_option("--model-ema-decay", t.model_ema_decay, "the EMA's decay per optimizer step")
      ->capture_default_str();
  cmd.add_flag("--model-ema-warmup", t.model_ema_warmup,
               "timm's EMA warmup: step t's decay is min(decay, 1 - (1 + t)^(-2/3))");
}

// The run's flags: seed, threads, output, resume, checkpoints, logging.
void add_run_flags(CLI::App& cmd, TrainFlags* f) {
  TrainConfig& t = f->train;
  cmd.add_option("--seed", t.seed, "random seed (weights, data order, dropout)")
      ->check(seed_value())
      ->capture_default_str();
  cmd.add_option(
         "--threads", f->threads,
         "threads per process (default: all cores, shared by the processes of mpirun on a host); with "
         "the default one shard per thread, the count changes the results' rounding (--shards N keeps "
         "the bits on any count)")
      ->check(thread_count());
  cmd.add_option("--shards", f->shards,
                 "data-parallel shards per process: each batch split into this many, one thread each, their "
                 "gradients summed in order (default 0: one per thread, or VIT_SHARDS). A fixed count gives "
                 "the same bits on any --threads, a resumed run's included; 1 splits every operation across "
                 "the threads instead")
      ->check(non_negative());
  cmd.add_option("--comm-timeout", f->comm_timeout,
                 "under mpirun: seconds a rank waits for the others in one collective before ending the job")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option(
      "--output", t.output,
      "run directory for config.json, summary.csv, checkpoints: new, or one without a run in it (a "
      "directory that holds a run is refused, see --resume); without it nothing is saved");
  cmd.add_option(
      "--resume", f->resume,
      "continue the interrupted run in DIR (or DIR/last.state.safetensors) exactly (Ctrl-C, SIGTERM or "
      "SIGHUP "
      "stops a run after its step with a state to go on from; its flags come from "
      "DIR/args.json; --threads, -j/--workers, --comm-timeout, --progress, --log-every (--log-interval) and "
      "--recovery-interval may change; "
      "a larger --epochs trains a finished run longer, and --patience may change: an early-stopped run goes "
      "on with a larger one, or 0)");
  cmd.add_option(
         "--recovery-interval", f->recovery,
         "write a recovery state (DIR/recovery.state.safetensors, for --resume within an epoch) every N "
         "optimizer steps; 0: none; auto: every 5 minutes, or 20x the last state's write time if longer")
      ->capture_default_str();
  cmd.add_flag(
      "--no-memory-check", f->no_memory_check,
      "start even when the planned memory (weights, gradients, optimizer state, activations) exceeds "
      "MemAvailable or VIT_MEMORY_LIMIT");
  cmd.add_option("--patience", t.patience, "early stopping: epochs without a better --eval-metric (0 = off)")
      ->capture_default_str();
  cmd.add_option("--eval-metric", t.eval_metric,
                 "what picks best.safetensors, --checkpoint-hist and --patience: top1, top5 or loss (lowest "
                 "best), on the eval set (timm's)")
      ->check(CLI::IsMember({"top1", "top5", "loss"}))
      ->capture_default_str();
  cmd.add_option("--checkpoint-hist", t.checkpoint_hist,
                 "keep the weights of the N best epochs (by --eval-metric, as best.safetensors) as "
                 "DIR/checkpoint-EPOCH.safetensors, for vit average (timm's; 0 = off)")
      ->check(non_negative())
      ->capture_default_str();
  cmd.add_option("-j,--workers", t.workers,
                 "threads that load and augment batches beside the compute threads (timm's; more for image "
                 "folders on many cores; the same results on any count)")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--log-every,--log-interval", t.log_every,
                 "steps between log lines when output is not a terminal (and lines after the first and "
                 "last step; 0: none, nor the evaluation's every 30 s)")
      ->capture_default_str();
  cmd.add_option("--progress", f->progress,
                 "auto: a progress bar when stdout is a terminal, else log lines; bar; log (use log under "
                 "mpirun with redirected output: Open MPI gives every rank a terminal); none: the epochs' "
                 "lines alone")
      ->check(CLI::IsMember({"auto", "bar", "log", "none"}))
      ->capture_default_str();
}

// One `vit train` run, in parts: the flags' checks, the run directory, the model, the
// teacher, the data, the run's setup, and training with its last lines.
class TrainCommand {
 public:
  TrainCommand(TrainFlags& F, const CLI::App& cmd, TrainHooks* hooks)
      : F(F), cmd(cmd), hooks(hooks), arrays(hooks && hooks->data), comm(world()) {}
  int run();

 private:
  void check_flags();
  void note_flags_without_effect() const;
  bool open_run_dir();  // false: --resume of a finished run, left as it is
  void check_fits(const ViTConfig& c) const;
  void make_model();
  void init_head();
  std::string lr_line;  // how --lr-base set the lr, said after the first line
  void load_teacher();
  void load_data();
  void prepare();
  int train_and_report();

  TrainFlags& F;
  const CLI::App& cmd;
  TrainHooks* hooks;
  const bool arrays;            // the caller's data, not a directory's
  Comm& comm;                   // several processes under mpirun (docs/distributed.md)
  std::ostream quiet{nullptr};  // only rank 0 prints
  std::ostream* out = &std::cout;
  std::optional<RunDirLock> lock;  // rank 0 holds the run directory from its creation to the end
  bool made_dir = false;           // this run made --output (it did not exist)
  size_t available = 0;
  AugmentConfig aug_flags;
  std::unique_ptr<ViT> owned, teacher;
  std::unique_ptr<Dataset> train_set, eval_set;
  std::unique_ptr<AugmentedDataset> augmented;
};

void TrainCommand::check_flags() {
  if (arrays)
    VIT_USAGE_CHECK(F.data_dir.empty() && F.synthetic == 0, "the data is ", hooks->data_name,
                    ": --data-dir and --synthetic do not apply");
  else
    VIT_USAGE_CHECK(F.data_dir.empty() != (F.synthetic == 0), "give either --data-dir DIR or --synthetic N");
  VIT_USAGE_CHECK(F.betas.empty() || F.betas.size() == 2, "--opt-betas wants two values, B1 B2 (got ",
                  F.betas.size(), ")");
  if (F.betas.size() == 2) {
    F.train.optim.beta1 = F.betas[0];
    F.train.optim.beta2 = F.betas[1];
  } else if (F.opt == "lion") {
    F.train.optim.beta2 = 0.99f;  // timm's Lion's default betas (0.9, 0.99)
  }
  // timm's optimizer names: sgd and nesterov are SGD with Nesterov momentum, momentum without.
  const bool sgd = F.opt == "sgd" || F.opt == "nesterov" || F.opt == "momentum";
  F.train.optim.name = sgd ? "sgd" : F.opt;
  if (F.opt != "momentum" && sgd) F.train.optim.nesterov = true;
  if (F.opt.rfind("lamb", 0) == 0 && cmd.count("--opt-eps") == 0)
    F.train.optim.eps = 1e-6f;  // timm's Lamb's default
  VIT_USAGE_CHECK(
      !F.train.optim.nesterov || F.train.optim.momentum > 0, "--opt ", F.opt,
      F.opt == "momentum" ? " --nesterov" : "",
      " is SGD with Nesterov momentum (timm's), which needs --momentum above 0; --opt momentum --momentum 0 "
      "is plain SGD");
  if (lr_from_base(cmd)) {
    // timm's train.py: lr = lr_base x (global batch / lr_base_size), or its square root for
    // optimizers named with "ada" or "lamb" unless --lr-base-scale says.
    const int64_t batch = F.train.batch_size * F.train.grad_accum_steps;
    const bool adaptive = F.opt.find("ada") != std::string::npos || F.opt.find("lamb") != std::string::npos;
    const std::string scale = !F.lr_base_scale.empty() ? F.lr_base_scale : adaptive ? "sqrt" : "linear";
    const double ratio = double(batch) / double(F.lr_base_size);
    F.train.sched.lr = float(F.lr_base * (scale == "sqrt" ? std::sqrt(ratio) : ratio));
    std::ostringstream line;
    line << "lr " << F.train.sched.lr << " from --lr-base " << F.lr_base << " x "
         << (scale == "sqrt" ? "sqrt" : "") << "(batch " << batch << " / " << F.lr_base_size << "), timm's "
         << scale << " scaling";
    lr_line = line.str();
  }
  VIT_USAGE_CHECK(std::isfinite(F.head_init_scale) && std::isfinite(F.head_init_bias),
                  "--head-init-scale and --head-init-bias must be finite numbers");
  F.train.bce.threshold = cmd.count("--bce-target-thresh") > 0;
  F.train.bce.target_threshold = F.bce_target_thresh;
  comm.set_timeout(F.comm_timeout);
  if (F.threads == 0 && comm.local_size() > 1) F.threads = std::max(1, num_threads() / comm.local_size());
  use_threads(F.threads, true);  // free unless VIT_BIND=on (commands.h)
  out = !comm.root() ? &quiet : hooks && hooks->log ? hooks->log : &std::cout;
  F.train.comm = &comm;
  if (F.recovery != "auto") {
    char* end = nullptr;
    F.train.recovery_interval = std::strtoll(F.recovery.c_str(), &end, 10);
    VIT_USAGE_CHECK(!F.recovery.empty() && *end == '\0' && F.train.recovery_interval >= 0,
                    "--recovery-interval wants a number of steps (0: none) or auto, got '", F.recovery, "'");
  }
  // Impossible flags fail here, before anything is loaded or written; so does an --output
  // that holds another run (never overwritten).
  F.train.validate();
  // Before the first line says "mixed precision (--amp)" (ViT::set_amp says the same later).
  VIT_CHECK(!F.amp || ops::bf16_available(), "--amp: ", ops::bf16_missing());
  if (!F.teacher.empty()) F.train.distill.validate();
  for (const char* flag : {"--distillation-type", "--distillation-alpha", "--distillation-tau"})
    VIT_USAGE_CHECK(!F.teacher.empty() || cmd.count(flag) == 0, flag,
                    " needs --teacher (the model to distill)");
  aug_flags = F.aug.config();  // also the flags of augmentations that are off
  F.train.sched.validate();
  if (F.resume.empty() && !F.train.output.empty()) settings_json(cmd);  // what args.json cannot hold
  if (comm.size() > 1) F.train.agreed_settings = agreed_settings(cmd);
  if (F.resume.empty()) note_flags_without_effect();  // a resumed run said them when it began
}

// Flags given that change nothing in this run, each said once as a note (timm's train.py
// takes them silently; a misread run costs hours). Not errors: a recipe's flag may be moot
// after a flag given after it (--recipe finetune --opt adamw leaves its --momentum unused).
void TrainCommand::note_flags_without_effect() const {
  const TrainConfig& t = F.train;
  const std::string& opt = t.optim.name;
  const std::string& sched = t.sched.name;
  const bool mixing = t.mixup.active();
  struct Moot {
    std::vector<std::string> flags;  // said when one of them is given
    bool unused;
    std::string why;
  };
  const Moot moot[] = {
      {{"--freeze-backbone"},
       F.pretrained.empty(),
       "the head trains on a randomly initialized backbone (no --pretrained)"},
      {{"--force-color-jitter"},
       F.aug.aug.auto_augment.empty() || F.aug.color_jitter.empty() || F.aug.three_augment(),
       "no effect, it keeps --color-jitter beside RandAugment's --aa and one is not given (3a keeps it "
       "anyway)"},
      {{"--crop-fill"}, F.aug.aug.crop_pad == 0, "no effect, the padded crop is off (--crop-pad)"},
      {{"--momentum", "--nesterov"}, opt != "sgd", "no effect, SGD's and --opt is " + opt},
      {{"--nesterov"},
       F.opt == "sgd" || F.opt == "nesterov",
       "no effect, --opt " + F.opt + " is Nesterov's already (timm's; --opt momentum is the plain one)"},
      {{"--opt-betas", "--opt-eps"}, opt == "sgd", "no effect, Adam's, AdamW's and Lamb's and --opt is sgd"},
      {{"--opt-eps"}, opt == "lion", "no effect, Lion has no epsilon"},
      {{"--model-ema-decay", "--model-ema-warmup"},
       !t.model_ema,
       "no effect, the model EMA is off (--model-ema)"},
      {{"--clip-mode"}, t.clip_grad <= 0.f, "no effect, clipping is off (--clip-grad)"},
      {{"--lr-base", "--lr-base-size", "--lr-base-scale"},
       cmd.count("--lr-base") > 0 && cmd.count("--lr") > 0,
       "no effect, --lr is given and sets the lr (timm's)"},
      {{"--lr-base-size", "--lr-base-scale"}, cmd.count("--lr-base") == 0, "no effect without --lr-base"},
      {{"--cutmix"},
       !t.mixup.cutmix_minmax.empty() && t.mixup.cutmix_alpha != 1.f,
       "no effect with --cutmix-minmax, which draws CutMix's boxes with alpha 1 (timm's)"},
      {{"--bce-target-thresh", "--bce-pos-weight", "--bce-sum"},
       !t.bce_loss,
       "no effect, the binary cross-entropy's and --bce-loss is not given"},
      {{"--mixup-prob", "--mixup-switch-prob", "--mixup-mode", "--mixup-off-epoch"},
       !mixing,
       "no effect, mixup and CutMix are off (--mixup, --cutmix)"},
      {{"--mixup-off-epoch"},
       mixing && t.mixup.off_epoch >= t.total_epochs(),
       "no effect, the run ends before epoch " + std::to_string(t.mixup.off_epoch) + " (counted from 0)"},
      {{"--decay-rate"},
       sched != "step" && sched != "multistep",
       "no effect, the step and multistep schedules' and --sched is " + sched},
      {{"--decay-epochs"}, sched != "step", "no effect, the step schedule's and --sched is " + sched},
      {{"--min-lr"}, sched != "cosine", "no effect, the cosine schedule's floor and --sched is " + sched},
      {{"--warmup-lr"},
       t.warmup_epochs <= 0.f,
       "no effect, the warmup's start and there is none (--warmup-epochs)"},
      {{"--decay-milestones"},
       sched != "multistep",
       "no effect, the multistep schedule's and --sched is " + sched},
      {{"--pos-resample"},
       F.pretrained.empty(),
       "no effect, it resamples --pretrained weights and none are given"},
      {{"--val-split"}, F.synthetic > 0, "no effect, --synthetic makes its own evaluation samples"},
      {{"--mean", "--std"},
       F.synthetic > 0,
       "no effect on --synthetic's samples (made as the model's input); kept in the model's config"},
  };
  for (const Moot& m : moot) {
    std::string given;
    for (const std::string& flag : m.flags)
      if (cmd.count(flag) > 0) given += (given.empty() ? "" : ", ") + flag;
    if (m.unused && !given.empty()) *out << "note: " << given << ": " << m.why << std::endl;
  }
  for (const std::string& n : F.aug.notes(cmd)) *out << "note: " << n << std::endl;
  // Mixing pairs each sample with the one at the other end of its batch (timm's flip): an odd
  // batch's middle sample is its own partner, and a batch of 1 mixes nothing (timm refuses them).
  if (mixing && t.batch_size % 2 == 1)
    *out << "note: -b " << t.batch_size << " with --mixup or --cutmix: "
         << (t.batch_size == 1 ? "a batch of 1 is mixed with itself, so nothing is mixed"
                               : "each batch's middle sample is mixed with itself")
         << " (timm asks for an even batch)" << std::endl;
  if ((opt == "lamb" || opt == "lambc") && t.optim.weight_decay == 0.f)
    *out << "note: --opt " << opt
         << " with --weight-decay 0: no tensor gets a trust ratio (timm's Lamb adapts the "
            "tensors with weight decay; timm's train.py decays 2e-5 by default), so it steps as Adam with "
            "the gradients clipped at norm 1"
         << std::endl;
  if (t.warmup_epochs >= float(t.epochs))
    *out << "note: --warmup-epochs " << t.warmup_epochs << " is not shorter than --epochs " << t.epochs
         << ": the lr never reaches --lr " << t.sched.lr << std::endl;
}

bool TrainCommand::open_run_dir() {
  if (F.resume.empty() && !F.train.output.empty())
    run_agreed(comm, "checking --output", [&] {
      if (comm.root()) check_new_run_dir(F.train.output);
    });
  if (F.resume.empty()) return true;
  // A finished run is left as it is, before anything is loaded.
  bool finished = false;
  run_agreed(comm, "resuming " + F.resume, [&] {
    if (comm.root()) lock.emplace(F.resume);
    finished = resume_finished(F.resume, F.train, *out);
    // A directory the run cannot write (read-only, full) fails now, not after an epoch's work.
    if (comm.root() && !finished) check_writable_dir(F.resume);
  });
  return !finished;
}

// The memory available was read before the model was made or loaded (make_model), so the
// plan counts all of it, a loaded model's weights and gradients too (they were left out, as
// if read after the load: a fine-tune of ViT-L planned 2.6 GiB and took 4.9).
void TrainCommand::check_fits(const ViTConfig& c) const {
  MemoryPlan plan = plan_training_memory(c, F.train.batch_size, F.train.optim.name, F.shards, F.amp);
  // The prefetcher holds whole global batches (-b x --grad-accum-steps); a model EMA is
  // one more copy of the weights, counted with the optimizer's state.
  plan.batches *= size_t(F.train.grad_accum_steps);
  if (F.train.model_ema) plan.optimizer += plan.params;
  check_memory(plan, available, detail::concat("training this model at batch size ", F.train.batch_size));
}

void TrainCommand::make_model() {
  available = F.no_memory_check ? 0 : available_memory_bytes();
  // A resumed run with a state takes its model from config.json: the state replaces every
  // weight, so the --pretrained file (moved, deleted, or a Python model's copy inside a run
  // that moved) is not read again.
  const std::string own_config =
      F.resume.empty() ? "" : (std::filesystem::path(F.resume) / "config.json").string();
  const bool has_state = !F.resume.empty() && run_has_state(F.resume);
  const bool from_state = !F.pretrained.empty() && has_state && std::filesystem::exists(own_config);
  if (F.pretrained.empty() || from_state) {
    const ViTConfig c = from_state ? ViTConfig::load(own_config) : F.model.resolve();
    check_fits(c);
    // Drawn once, from the seed (the constructor drew them from seed 0 first, then again:
    // ViT-H's 632M weights took 20 s more), and not at all where a state replaces them all.
    owned = std::make_unique<ViT>(c, /*randomize=*/false);
    if (has_state) return;
    // ViT-B/16's 86M weights take seconds to draw: say so first.
    if (const int64_t n = ParamTable(c).total(); n >= 10000000)
      *out << "initialising " << count_str(n) << " parameters (seed " << F.train.seed << ")" << std::endl;
    owned->init_weights(F.train.seed);
    return;
  }
  const std::string arch = F.model.architecture_flag();
  VIT_USAGE_CHECK(arch.empty(), arch, " cannot change the architecture of --pretrained ", F.pretrained,
                  " (only --model NAME, the model the file is, --img-size, --num-classes, --num-heads and "
                  "dropout rates apply)");
  // --model NAME: the model the file is (a bare timm state dict takes its heads and
  // preprocessing; another model is refused). Runs of args.json before version 6 resume without
  // the recipe's --model they recorded (resume.cpp).
  const std::string name = cmd.count("--model") > 0 ? F.model.model : "";
  VIT_USAGE_CHECK(name.empty() || F.model.num_heads == 0,
                  "--num-heads with --model: the model's name gives its heads");
  LoadOptions o = load_options(F.model.img_size, F.model.num_heads, F.pos_resample);
  o.num_classes = F.model.num_classes;
  o.adjust = [&](ViTConfig& c) { F.model.apply_training_overrides(c); };
  *out << "loading the pretrained weights from " << F.pretrained << (name.empty() ? "" : " as " + name)
       << std::endl;
  run_agreed(comm, "loading the pretrained weights", [&] {
    Pretrained p = load_checkpoint(F.pretrained, name, o, "--model");
    if (comm.root()) print_notes(p, hooks && hooks->log ? *hooks->log : std::cerr);
    *out << "pretrained: " << p.file << " (" << p.format << ")" << std::endl;
    owned = std::move(p.model);
    check_fits(owned->config());
  });
}

// timm's --head-init-scale and --head-init-bias on the classifier as training starts (a
// resumed run's state then replaces every weight with the ones it trained).
void TrainCommand::init_head() {
  const bool scale = cmd.count("--head-init-scale") > 0, bias = cmd.count("--head-init-bias") > 0;
  if (!scale && !bias) return;
  const ParamSpec* w = owned->table().find("head.weight");
  const ParamSpec* b = owned->table().find("head.bias");
  VIT_USAGE_CHECK(w && b, "--head-init-scale and --head-init-bias need a classifier head (--num-classes)");
  float* p = owned->params().data();
  if (scale) {
    for (int64_t i = 0; i < w->numel(); ++i) p[w->offset + i] *= F.head_init_scale;
    for (int64_t i = 0; i < b->numel(); ++i) p[b->offset + i] *= F.head_init_scale;
  }
  if (bias) std::fill_n(p + b->offset, b->numel(), F.head_init_bias);
}

void TrainCommand::load_teacher() {
  if (F.teacher.empty()) return;
  const ViTConfig& cfg = owned->config();
  // At the model's input size (a ViT teacher's position grid resampled, as timm would).
  LoadOptions o;
  o.img_h = cfg.img_h;
  o.img_w = cfg.img_w;
  *out << "loading the teacher from " << F.teacher << std::endl;
  run_agreed(comm, "loading the teacher", [&] {
    Pretrained p = [&] {
      try {
        return load_pretrained(F.teacher, o);
      } catch (const Error& e) {
        // Where the file loads at its own size, the student's size is what failed: say so
        // (else the error is the file's, as it stands).
        try {
          load_pretrained(F.teacher);
        } catch (const Error&) {
          throw e;
        }
        throw Error(detail::concat("--teacher ", F.teacher, " at the student's input size ", cfg.img_h, "x",
                                   cfg.img_w, " (the teacher sees the student's images): ", e.what()));
      }
    }();
    if (comm.root()) print_notes(p, hooks && hooks->log ? *hooks->log : std::cerr);
    *out << "teacher: " << p.file << " (" << p.format << ", " << count_str(p.model->table().total())
         << " parameters), " << F.train.distill.type << " distillation, alpha " << F.train.distill.alpha;
    if (F.train.distill.type == "soft") *out << ", tau " << F.train.distill.tau;
    *out << (cfg.head_dist ? ", into the distillation token's head" : ", into the class head") << std::endl;
    check_teacher(p.model->config(), cfg);  // before any data is read or file written
    teacher = std::move(p.model);
    teacher->set_shards(F.shards);
  });
  F.train.teacher = teacher.get();
}

void TrainCommand::load_data() {
  const ViTConfig& cfg = owned->config();
  run_agreed(comm, "loading the data", [&] {
    if (F.synthetic > 0) {
      VIT_CHECK(cfg.num_classes > 0, "the model has no classifier head (num_classes 0): set --num-classes K");
      const int64_t K = std::min<int64_t>(cfg.num_classes, 10);
      train_set = std::make_unique<SyntheticDataset>(F.synthetic, K, cfg.in_chans, cfg.img_h, cfg.img_w,
                                                     F.train.seed);
      eval_set = std::make_unique<SyntheticDataset>(std::max<int64_t>(1, F.synthetic / 5), K, cfg.in_chans,
                                                    cfg.img_h, cfg.img_w, F.train.seed, 0.5f, F.synthetic);
      return;
    }
    const std::string& source = arrays ? hooks->data_name : F.data_dir;
    *out << "loading " << source << std::endl;
    DataSources d = arrays ? hooks->data(input_spec(cfg), F.val_split, F.train.seed)
                           : make_datasets(F.data_dir, F.dataset, input_spec(cfg), F.val_split, F.train.seed,
                                           F.skip_bad_images);
    print_data_notes(d, *out);
    VIT_CHECK(d.train->num_classes() <= cfg.num_classes, source, " has ", d.train->num_classes(),
              " classes; the model's head has ", cfg.num_classes, " (set --num-classes ",
              d.train->num_classes(), ")");
    // What a preset meant for another dataset would do quietly (mnist-seed, the default,
    // is gray with 10 classes): said once, with the flag that changes it.
    if (d.train->num_classes() < cfg.num_classes)
      *out << "note: " << source << " has " << d.train->num_classes() << " classes, the model's head "
           << cfg.num_classes << " (--num-classes " << d.train->num_classes() << " fits it to the data)"
           << std::endl;
    if (d.kind == "folder" && cfg.in_chans == 1)  // (a pretrained model's channels are its own)
      *out << "note: the model takes 1 channel: color images are read as gray"
           << (F.pretrained.empty() ? " (--in-chans 3 keeps color)" : "") << std::endl;
    train_set = std::move(d.train);
    eval_set = std::move(d.eval);
    F.train.class_names = d.class_names;
  });
}

void TrainCommand::prepare() {
  const ViTConfig& cfg = owned->config();
  AugmentConfig aug = aug_flags;
  aug.mean = cfg.mean;
  aug.std = cfg.std;
  if (F.resume.empty() && aug.grayscale_prob > 0.f && cfg.in_chans == 1)  // (out: rank 0's log alone)
    *out << "note: --grayscale-prob: no effect, the model's images have 1 channel" << std::endl;
  if (aug.active() || F.train.aug_repeats > 0) {
    augmented = std::make_unique<AugmentedDataset>(*train_set, aug, F.train.seed,
                                                   std::max<int64_t>(1, F.train.aug_repeats));
    F.train.on_epoch_start = [a = augmented.get()](int64_t e) { a->set_epoch(e); };
  }
  if (!F.resume.empty()) {
    F.train.output = F.resume;
    F.train.resume = true;
    F.train.on_resumed = [this] {  // --epochs N extends the run, --patience P changes its stop
      if (comm.root()) record_resumed(F.resume, F.train);
    };
  } else if (!F.train.output.empty()) {
    run_agreed(comm, "creating " + F.train.output, [&] {
      if (comm.root()) {
        made_dir = !std::filesystem::exists(F.train.output);
        create_run_dir(F.train.output, settings_json(cmd).dump(1) + "\n");
        lock.emplace(F.train.output);
      }
    });
  }
  const bool terminal = hooks && hooks->log ? hooks->log_is_terminal : redraws_on(STDOUT_FILENO);
  F.train.progress_bar = F.progress == "bar" || (F.progress == "auto" && terminal);
  if (F.progress == "none") F.train.log_every = 0;
  *out << "model: " << cfg.summary() << std::endl;  // config.json holds every field
  if (const int shards = owned->shards_for(F.train.batch_size); shards > 1)
    *out << "batch split into " << shards << " shards, "
         << (F.shards > 0              ? "one thread each (--shards: the same bits on any --threads)"
             : shards == num_threads() ? "one per thread"
                                       : "one thread each (VIT_SHARDS: the same bits on any --threads)")
         << std::endl;
  // (Without hooks, run() caught SIGINT and SIGTERM before any thread started.)
  if (hooks && hooks->stop_requested)
    F.train.stop_requested = hooks->stop_requested;
  else
    F.train.stop_requested = stop_signal;
  if (hooks) {
    F.train.on_epoch_end = hooks->on_epoch_end;
    hooks->has_eval = eval_set != nullptr;
    hooks->model_ema = F.train.model_ema;
    hooks->class_names = F.train.class_names;
  }
}

int TrainCommand::train_and_report() {
  std::vector<EpochStats> hist;
  try {
    hist = train(*owned, augmented ? *augmented : *train_set, eval_set.get(), F.train, *out);
  } catch (const Stopped& e) {
    // Every rank stopped at the same step; rank 0 says where and how to go on. The exit status
    // is the shell's for the signal (128 + its number: 130 SIGINT, 143 SIGTERM, 129 SIGHUP).
    const int sig = e.reason ? e.reason : SIGTERM;  // 0: another rank was signalled
    if (hooks) {
      hooks->stopped = e.what();
      hooks->model = std::move(owned);
      return 128 + sig;
    }
    if (comm.root())
      *out << "vit train: " << stop_signal_name(e.reason) << ": " << e.what()
           << (e.state_file.empty() ? ""
                                    : "; continue with: vit train --resume " + shell_word(F.train.output))
           << std::endl;
    return 128 + sig;
  } catch (...) {
    // Failed (a bad image, NaN in the loss) before a state to resume from: the directory is
    // given back, so the command, mended, runs again under its name.
    if (F.resume.empty() && !F.train.output.empty() && comm.root()) {
      lock.reset();  // the directory may go
      if (remove_untrained_run(F.train.output, made_dir))
        *out << "removed " << F.train.output << "'s files: the run failed before it had anything to resume"
             << std::endl;
      else if (!run_has_state(F.train.output) &&
               std::filesystem::exists(std::filesystem::path(F.train.output) / "last.safetensors"))
        *out << "kept " << F.train.output
             << "/last.safetensors: an epoch's weights, though no state to resume "
             << "from (fine-tune them with --pretrained, or start anew with another --output)" << std::endl;
    }
    // A run with a state to go on from (a full disk, a file that went bad): said so, once its
    // cause is mended. Not where the error says how already, nor after a divergence, which a
    // resume would repeat.
    if (!F.train.output.empty() && comm.root() && run_has_state(F.train.output)) {
      try {
        throw;
      } catch (const RankFailure&) {
        throw;  // rank 0 reports it as it is
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("--resume") == std::string::npos && what.find("diverged") == std::string::npos)
          throw Error(what + "; once mended, the run continues from its last state: vit train --resume " +
                      shell_word(F.train.output));
        throw;
      }
    }
    throw;
  }
  *out << best_line(hist, eval_set != nullptr, F.train, !F.train.output.empty()) << std::endl;
  if (!F.train.output.empty()) {
    *out << "wrote " << F.train.output
         << "/{args.json,config.json,summary.csv,last.safetensors,best.safetensors,last.state.safetensors"
         << (F.train.model_ema ? ",last_ema.safetensors,best_ema.safetensors" : "") << "}" << std::endl;
    if (F.train.checkpoint_hist > 0) *out << history_line(hist, eval_set != nullptr, F.train) << std::endl;
  }
  if (hooks) {
    // Early stopping ended it before its epochs: said as a stop is (Python's history.stopped).
    if (F.train.patience > 0 && !hist.empty() && hist.back().epoch < F.train.total_epochs())
      hooks->stopped = detail::concat("early stopping after epoch ", hist.back().epoch, " of ",
                                      F.train.total_epochs(), ": no better score for ", F.train.patience,
                                      F.train.patience == 1 ? " epoch" : " epochs", " (patience)");
    hooks->history = std::move(hist);
    hooks->model = std::move(owned);
  }
  return 0;
}

int TrainCommand::run() {
  // First, so that every thread the run starts (OpenMP's, the prefetcher's) blocks them and
  // only stop_signals.cpp's own thread takes them.
  if (!(hooks && hooks->stop_requested)) catch_stop_signals(!comm.root());
  check_flags();
  // Then a first line at once (a redirected log shows it too: every line is flushed).
  *out << first_line(F, comm, hooks) << std::endl;
  if (!open_run_dir()) return 0;
  if (!lr_line.empty()) *out << lr_line << std::endl;
  make_model();
  init_head();
  // (The model's depth is known once it is made, a --pretrained one's too.)
  if (F.resume.empty() && cmd.count("--drop-path") > 0 && owned->config().depth == 1)
    *out << "note: --drop-path: no effect on a model of one block (timm's rates, linspace(0, rate, depth), "
            "are [0])"
         << std::endl;
  load_teacher();
  owned->set_backbone_frozen(F.train.optim.freeze_backbone);
  owned->set_amp(F.amp);
  owned->set_shards(F.shards);
  load_data();
  prepare();
  return train_and_report();
}

}  // namespace

Run add_train(CLI::App& cmd) {
  return add_train(cmd, nullptr);
}

Run add_train(CLI::App& cmd, TrainHooks* hooks) {
  // A flag given twice takes its last value: recipes and resumed runs put their flags first.
  cmd.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto f = std::make_shared<TrainFlags>();
  add_model_and_data_flags(cmd, f.get());
  add_optimizer_flags(cmd, f.get());
  add_run_flags(cmd, f.get());
  return [f, &cmd, hooks] { return TrainCommand(*f, cmd, hooks).run(); };
}

int run_train(const std::vector<std::string>& args, TrainHooks* hooks) {
  CLI::App app{"vit train", "vit"};
  CLI::App* cmd = app.add_subcommand("train", "train a model");
  const Run run = add_train(*cmd, hooks);
  integers_in_decimal(app);
  std::vector<std::string> all{"train"};
  all.insert(all.end(), args.begin(), args.end());
  all = expand_recipe(expand_resume(all));
  std::reverse(all.begin(), all.end());  // CLI11 takes them last first
  app.parse(all);
  return run();
}

}  // namespace vit::app
