// The training loop: shuffled mini-batches per epoch from the seed, the schedule and
// optimizer per step, optional gradient clipping, evaluation after every epoch, and the
// run directory, each file written atomically:
//   config.json, summary.csv, last.safetensors, best.safetensors (weights, timm names; their
//   metadata has the epoch, its step, summary.csv's numbers of it and the `metric` that ranks
//   epochs), and with checkpoint_hist the best epochs' checkpoint-E.safetensors
//   last.state.safetensors: the weights again (param.<name>: the file alone is one
//   consistent step, whatever moment a crash hits), optimizer moments (exp_avg.<name>,
//   exp_avg_sq.<name> or momentum_buffer.<name>) and, in its metadata, the position (epochs done, global
//   step), best score, patience counter and history. Every random draw depends on (seed, epoch, step, index),
//   so a resumed run continues exactly where the interrupted one stopped.
//   recovery.state.safetensors: the same within an epoch (TrainConfig::recovery_interval),
//   with the step in the epoch and the epoch's loss and accuracy sums so far; removed once
//   the epoch's state is written. Resuming takes the newer of the two; with neither (the run
//   stopped before its first), training starts from step 0 with the model as given.
// Data-parallel (TrainConfig::comm with several ranks, docs/distributed.md): each rank
// computes its rows of every global batch, gradients are summed over ranks with one
// all-reduce of the gradient arena per step, evaluation is sharded and summed, and rank 0
// alone writes the run directory and the log.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "model/vit.h"
#include "train/comm.h"
#include "train/distill.h"
#include "train/mixup.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/schedule.h"
#include "train/step.h"

namespace vit {

struct EpochStats;

struct TrainConfig {
  int64_t epochs = 5;
  // Epochs at the cosine's floor after it ends (timm's --cooldown-epochs, as in DeiT's
  // recipe): the cosine spans `epochs`, and the run trains epochs + cooldown_epochs.
  int64_t cooldown_epochs = 0;
  int64_t total_epochs() const { return epochs + cooldown_epochs; }
  int64_t batch_size = 128;
  // Gradient accumulation (timm's --grad-accum-steps): an optimizer step takes a global batch
  // of batch_size x grad_accum_steps samples, run as grad_accum_steps micro-batches whose
  // gradients are summed (each scaled by its share of the global batch: the sum is the
  // gradient of the global batch's mean loss). Every random draw uses the sample's index in
  // the global batch, so the step is one step at the global batch size up to float rounding.
  // Steps (schedule, logging, recovery states, resume) are optimizer steps.
  int64_t grad_accum_steps = 1;
  OptimConfig optim;
  ScheduleConfig sched;  // lr, min_lr, name; lengths are filled in from epochs
  float warmup_epochs = 0.f;
  // The step schedule multiplies the lr by sched.decay_rate every decay_epochs epochs
  // (timm's --decay-epochs, 90 by default there and here), counted from the run's start as
  // timm counts them (the warmup overrides the first epochs). Fractions of an epoch count as
  // timm's: a period of 4.5 steps decays at steps 5, 9 and 14 (t // 4.5).
  float decay_epochs = 90.f;
  // The multistep schedule's milestones in epochs (timm's --decay-milestones, 90 180 270 by
  // default there and here), rounded to optimizer steps, at least one.
  std::vector<float> decay_milestones = {90.f, 180.f, 270.f};
  float smoothing = 0.f;
  // Binary cross-entropy in place of softmax cross-entropy (timm's --bce-loss, DeiT III's
  // recipe), with bce's threshold (--bce-target-thresh), positive weight (--bce-pos-weight)
  // and sum over classes (--bce-sum). Evaluation's loss stays cross-entropy, as timm's.
  bool bce_loss = false;
  BceOptions bce;
  LossConfig loss() const {
    LossConfig l(smoothing);
    if (bce_loss) l.bce = bce;
    return l;
  }
  // Gradient clipping (timm's --clip-grad and --clip-mode; 0 = off): "norm" holds the global
  // norm to clip_grad, "value" clamps each gradient to [-clip_grad, clip_grad], "agc" is
  // adaptive clipping with clip_grad the factor (train/optimizer.h), the head left out.
  float clip_grad = 0.f;
  std::string clip_mode = "norm";
  MixupConfig mixup;
  // A model EMA (timm's --model-ema, ModelEmaV3): after every optimizer step
  // ema += (1 - decay) x (weights - ema), starting from the weights training starts with.
  // With model_ema_warmup the decay of step t (1-based) is min(decay, 1 - (1 + t)^(-2/3)),
  // timm's warmup. Evaluated beside the model each epoch (summary.csv's ema_* columns),
  // saved as last_ema.safetensors and best_ema.safetensors (by the EMA's eval top-1) and
  // kept in the training states (ema.<name>) so that a resume is exact.
  bool model_ema = false;
  float model_ema_decay = 0.9998f;
  bool model_ema_warmup = false;
  uint64_t seed = 42;
  // timm's --aug-repeats (DeiT's repeated augmentation): > 0 when the training set holds
  // aug_repeats samples of each of its size() / aug_repeats images, the k-th of image i at
  // i + k n (AugmentedDataset's repeats); each epoch then takes repeated_epoch_order's
  // samples (n // 256 * 256 of them). 0: off, each image once an epoch.
  int64_t aug_repeats = 0;
  std::string output;                    // run directory; empty = write nothing
  std::vector<std::string> class_names;  // saved in checkpoints' metadata when known
  bool progress_bar = false;             // redraw one line in place (a terminal) instead of log lines
  bool resume = false;                   // continue from output/last.state.safetensors
  int64_t patience = 0;                  // stop after this many epochs without a better score; 0 = off
  // The score that picks best.safetensors (best_ema too), the checkpoint history and early
  // stopping (timm's --eval-metric): "top1", "top5" or "loss" (lower is better), on the eval
  // set, or without one on the training set (top1 or loss: training counts no top-5).
  std::string eval_metric = "top1";
  // Keep the weights of the checkpoint_hist best epochs (by the score that picks
  // best.safetensors) as checkpoint-E.safetensors (run_dir.h; timm's --checkpoint-hist); 0 = off.
  int64_t checkpoint_hist = 0;
  int64_t log_every = 50;  // steps between log lines
  // Threads that load and augment each batch while the model computes (timm's -j): one by
  // default, beside the compute threads; more where decoding and augmentation outrun it
  // (image folders on many cores). Batches and results are the same on any count.
  int workers = 1;
  // Recovery states (run_dir.h's kRecoveryFile) within an epoch, so that a run killed
  // mid-epoch resumes after its last one: every this many optimizer steps; 0 = none; -1 =
  // by time, once recovery_seconds have passed since the last state (or 20 times that
  // state's write time, if longer: writing then costs at most 5% of the time).
  int64_t recovery_interval = -1;
  double recovery_seconds = 300;
  std::function<void(int64_t)> on_epoch_start;  // e.g. tells augmentation the epoch
  // On a resume, once the run's state is read and found to be this run's, before training
  // goes on: a resume refused leaves the run's files as they were (vit train records a new
  // --epochs in args.json here).
  std::function<void()> on_resumed;
  // After each epoch's files are written (its state committed), before a stop request is
  // asked: the epoch's numbers (Python's callback). An exception it throws ends train().
  std::function<void(const EpochStats&)> on_epoch_end;
  // Asked on every rank after each optimizer step's work and after each epoch's files: a
  // nonzero answer (the vit program's: the signal that asked, SIGINT or SIGTERM) stops the
  // run there, on every rank at the same step. Within an epoch a recovery state is written
  // after the step; at an epoch's last step the epoch ends as usual (eval, files, state).
  // Then train() throws Stopped. A run that has just finished its last epoch ends normally.
  std::function<int()> stop_requested;
  Comm* comm = nullptr;  // the processes of a data-parallel run; null: one
  // DeiT's distillation (distill.h): a teacher's logits on each micro-batch's images (as
  // augmented and mixed) join the loss; null: none. The teacher takes the model's input
  // (channels, size, classes); another mean and std are converted to. It only infers.
  ViT* teacher = nullptr;
  DistillConfig distill;
  // What else every process of a data-parallel run must have been given alike (the CLI: its
  // settings but those a process may have its own of, such as --threads): hashed into the
  // start-up check with the fields above. The augmentation and teacher flags are not fields
  // here; a rank given another --hflip trained without a word.
  std::string agreed_settings;
  void validate() const;
};

// Thrown by train() when TrainConfig::stop_requested asked it to stop: the run's state is
// written (unless there is no output directory) and --resume continues it exactly.
class Stopped : public Error {
 public:
  Stopped(const std::string& what, std::string state_file, int reason)
      : Error(what), state_file(std::move(state_file)), reason(reason) {}
  std::string state_file;  // the state a resume continues from; "" when nothing was written
  int reason;              // this rank's stop_requested() answer (0: another rank asked)
};

struct EvalResult {
  double loss = 0, top1 = 0, top5 = 0;
  int64_t count = 0;
  int64_t num_classes = 0;
  std::vector<int64_t> confusion;  // [K, K]: row = true class, column = predicted
  // Per sample in dataset order (single process only): the argmax and the true label.
  std::vector<int32_t> predictions, labels;
  std::vector<double> per_class() const;  // accuracy per true class (0 where it has no samples)
};

// One epoch of train()'s history: its numbers, as summary.csv and the training state keep
// them (the evaluations without their confusion matrices).
struct EpochStats {
  int64_t epoch = 0;
  double train_loss = 0, train_top1 = 0;
  EvalResult eval;
  EvalResult ema;  // the model EMA's evaluation (TrainConfig::model_ema with an eval set)
  double lr = 0, seconds = 0;
};

// An epoch's row of summary.csv: (column, value) in the file's order, accuracies in
// percent; the model EMA's ema_* columns with `ema`.
std::vector<std::pair<std::string, double>> summary_row(const EpochStats& e, bool ema);

// An epoch's score by TrainConfig::eval_metric, higher is better (the loss negated): the
// eval set's, or the training set's without one; of the model EMA's evaluation with `ema`.
double epoch_score(const EpochStats& e, bool eval, const std::string& metric = "top1", bool ema = false);
// Every epoch's.
std::vector<double> epoch_scores(const std::vector<EpochStats>& hist, bool eval,
                                 const std::string& metric = "top1", bool ema = false);
// The metric's name in summary.csv and checkpoints' metadata: "eval_top1", "train_loss", ...
std::string metric_key(const std::string& metric, bool eval);
// The metric in words: "top-1", "top-5" or "loss".
std::string metric_words(const std::string& metric);
// A score as a person reads it: "98.12%" for an accuracy, "0.0312" for a loss.
std::string score_str(double score, const std::string& metric);

// With comm (several ranks), each rank evaluates a contiguous share of data and every
// rank receives the summed result. progress (optional) follows this rank's share, scaled to
// the whole set (its top-1 is the share's).
EvalResult evaluate(ViT& model, const Dataset& data, int64_t batch_size, Comm* comm = nullptr,
                    EvalProgress* progress = nullptr);

std::vector<EpochStats> train(ViT& model, const Dataset& train_set, const Dataset* eval_set,
                              const TrainConfig& cfg, std::ostream& log);

}  // namespace vit
