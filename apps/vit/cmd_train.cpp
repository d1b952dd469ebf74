// vit train: flags named as timm's train.py where one exists.
#include <iostream>
#include <memory>

#include "commands.h"
#include "model_flags.h"
#include "vit/core/error.h"
#include "vit/core/threads.h"
#include "vit/data/synthetic.h"
#include "vit/train/trainer.h"

namespace vit::app {

namespace {
struct TrainFlags {
  ModelFlags model;
  TrainConfig train;
  std::string data_dir;
  int64_t synthetic = 0;
  int threads = 0;
};
}  // namespace

Run add_train(CLI::App& cmd) {
  auto f = std::make_shared<TrainFlags>();
  f->model.add_to(cmd);
  TrainConfig& t = f->train;
  t.sched.lr = 5e-3f;
  cmd.add_option("--data-dir", f->data_dir, "dataset directory (datasets arrive in a later release)");
  cmd.add_option("--synthetic", f->synthetic, "train on N synthetic samples (plus N/5 for evaluation)");
  cmd.add_option("--epochs", t.epochs, "epochs")->capture_default_str();
  cmd.add_option("-b,--batch-size", t.batch_size, "batch size")->capture_default_str();
  cmd.add_option("--lr", t.sched.lr, "learning rate")->capture_default_str();
  cmd.add_option("--opt", t.optim.name, "optimizer")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->capture_default_str();
  cmd.add_option("--momentum", t.optim.momentum, "SGD momentum")->capture_default_str();
  cmd.add_flag("--nesterov", t.optim.nesterov, "Nesterov momentum for SGD");
  cmd.add_option("--opt-eps", t.optim.eps, "Adam epsilon")->capture_default_str();
  cmd.add_option("--weight-decay", t.optim.weight_decay, "weight decay")->capture_default_str();
  cmd.add_option("--sched", t.sched.name, "lr schedule")
      ->check(CLI::IsMember({"cosine", "step", "none"}))
      ->capture_default_str();
  cmd.add_option("--warmup-epochs", t.warmup_epochs, "linear warmup epochs")->capture_default_str();
  cmd.add_option("--warmup-lr", t.sched.warmup_lr, "lr at the start of warmup")->capture_default_str();
  cmd.add_option("--min-lr", t.sched.min_lr, "cosine floor")->capture_default_str();
  cmd.add_option("--decay-rate", t.sched.decay_rate, "step schedule factor")->capture_default_str();
  cmd.add_option("--smoothing", t.smoothing, "label smoothing")->capture_default_str();
  cmd.add_option("--clip-grad", t.clip_grad, "clip the global gradient norm (0 = off)")
      ->capture_default_str();
  cmd.add_option("--seed", t.seed, "random seed (weights, data order, dropout)")->capture_default_str();
  cmd.add_option("--threads", f->threads, "threads (default: all cores)");
  cmd.add_option("--output", t.output, "run directory for config.json, summary.csv, checkpoints");
  cmd.add_option("--log-every", t.log_every, "steps between log lines")->capture_default_str();
  return [f] {
    TrainFlags& F = *f;
    VIT_CHECK(F.data_dir.empty(),
              "--data-dir: dataset readers are not yet available in this build; use "
              "--synthetic N for now");
    VIT_CHECK(F.synthetic > 0, "give --synthetic N (dataset readers are not yet available)");
    set_num_threads(F.threads);
    ViTConfig cfg = F.model.resolve();
    ViT model(cfg);
    model.init_weights(F.train.seed);
    const int64_t K = std::min<int64_t>(cfg.num_classes, 10);
    SyntheticDataset train_set(F.synthetic, K, cfg.in_chans, cfg.img_h, cfg.img_w, F.train.seed);
    SyntheticDataset eval_set(std::max<int64_t>(1, F.synthetic / 5), K, cfg.in_chans, cfg.img_h, cfg.img_w,
                              F.train.seed, 0.5f, F.synthetic);
    std::cout << "model: " << cfg.to_json(-1) << "\nthreads: " << num_threads() << "\n";
    train(model, train_set, &eval_set, F.train, std::cout);
    if (!F.train.output.empty())
      std::cout << "wrote " << F.train.output
                << "/{config.json,summary.csv,last.safetensors,best.safetensors}\n";
    return 0;
  };
}

}  // namespace vit::app
