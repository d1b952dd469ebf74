// vit eval: top-1, top-5, loss, per-class accuracy and the confusion matrix of a checkpoint
// on a dataset split.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_flags.h"
#include "vit/core/error.h"
#include "vit/core/threads.h"
#include "vit/data/open.h"
#include "vit/io/checkpoint.h"
#include "vit/train/trainer.h"

namespace vit::app {

namespace {
struct EvalFlags {
  std::string checkpoint, data_dir, dataset = "auto", split = "test";
  int64_t batch_size = 256;
  int threads = 0;
  InputFlags input;
  bool json = false;
};

}  // namespace

Run add_eval(CLI::App& cmd) {
  auto f = std::make_shared<EvalFlags>();
  cmd.add_option("--checkpoint", f->checkpoint, "model checkpoint (.safetensors)")->required();
  cmd.add_option("--data-dir", f->data_dir, "dataset directory")->required();
  cmd.add_option("--dataset", f->dataset, "auto, idx, cifar10, cifar100 or folder")->capture_default_str();
  cmd.add_option("--split", f->split, "test, val (the same: the held-out split) or train")
      ->check(CLI::IsMember({"test", "val", "train"}))
      ->capture_default_str();
  cmd.add_option("-b,--batch-size", f->batch_size, "batch size")->capture_default_str();
  cmd.add_option("--threads", f->threads, "threads (default: all cores)");
  f->input.add_to(cmd);
  cmd.add_flag("--json", f->json, "print one JSON object");
  return [f] {
    set_num_threads(f->threads);
    VIT_CHECK(f->batch_size > 0, "batch size must be positive, got ", f->batch_size);
    auto model = load_checkpoint(f->checkpoint);
    const ViTConfig& cfg = model->config();
    const InputSpec in = f->input.spec(cfg);
    DataSources d = make_datasets(f->data_dir, f->dataset, in, 0.0, 0);
    const Dataset& data = f->split == "train" ? *d.train : *d.eval;
    const EvalResult r = evaluate(*model, data, f->batch_size);
    const auto per_class = r.per_class();
    if (f->json) {
      nlohmann::json j = {
          {"top1", r.top1}, {"top5", r.top5}, {"loss", r.loss}, {"count", r.count}, {"per_class", per_class}};
      auto& conf = j["confusion"] = nlohmann::json::array();
      for (int64_t k = 0; k < r.num_classes; ++k)
        conf.push_back(std::vector<int64_t>(r.confusion.begin() + k * r.num_classes,
                                            r.confusion.begin() + (k + 1) * r.num_classes));
      std::cout << j.dump() << "\n";
      return 0;
    }
    std::cout << data.describe() << "\n"
              << std::fixed << std::setprecision(2) << "top-1 " << 100 * r.top1 << "%  top-5 " << 100 * r.top5
              << "%  loss " << std::setprecision(4) << r.loss << "  (" << r.count << " images)\nper class:";
    for (size_t k = 0; k < per_class.size(); ++k)
      std::cout << (k % 10 ? "  " : "\n  ") << k << ": " << std::setprecision(1) << 100 * per_class[k] << "%";
    std::cout << "\n";
    return 0;
  };
}

}  // namespace vit::app
