// vit samples: writes the first N images of a dataset split as PNG files named
// <index>_<label>.png, to look at the data or to feed vit predict; with vit train's
// augmentation flags, as a training epoch sees them.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "model_flags.h"
#include "validators.h"
#include "vit/core/error.h"
#include "vit/data/augment.h"
#include "vit/data/image.h"
#include "vit/data/image_set.h"
#include "vit/data/open.h"

namespace vit::app {

Run add_samples(CLI::App& cmd) {
  struct Flags {
    std::string data_dir, dataset = "auto", split = "test", out;
    int64_t count = 8, epoch = 1;
    uint64_t seed = 42;
    AugFlags aug;
    std::vector<float> mean, std;
  };
  auto f = std::make_shared<Flags>();
  cmd.add_option("--data-dir", f->data_dir,
                 "dataset directory (IDX or CIFAR; only the --split drawn from is read)")
      ->required();
  cmd.add_option("--dataset", f->dataset, "auto, idx, cifar10 or cifar100")->capture_default_str();
  cmd.add_option("--split", f->split, "test or train")
      ->check(CLI::IsMember({"test", "train"}))
      ->capture_default_str();
  cmd.add_option("-n,--count", f->count, "how many images")->check(positive())->capture_default_str();
  cmd.add_option("--out", f->out, "output directory")->required();
  f->aug.add_to(cmd);
  cmd.add_option("--epoch", f->epoch, "with augmentation: the training epoch whose draws to show (from 1)")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--seed", f->seed, "with augmentation: vit train's --seed")->capture_default_str();
  cmd.add_option("--mean", f->mean,
                 "with augmentation: the model's input mean, one value or one per channel (padding takes "
                 "it; default 0.5)");
  cmd.add_option("--std", f->std,
                 "with augmentation: the model's input std (random erasing's noise has it; default 0.5)")
      ->check(positive());
  return [f] {
    const AugmentConfig flags = f->aug.config();
    DatasetSplits d =
        open_dataset(f->data_dir, f->dataset, f->split == "train" ? Splits::train : Splits::eval);
    const std::shared_ptr<const ImageSet> s = f->split == "train" ? d.train : d.test;
    std::filesystem::create_directories(f->out);
    const int64_t n = std::min(f->count, s->n), plane = s->h * s->w;
    // Through the augmentation when one is asked for: at the images' own size, in the
    // normalization given, then back to 8 bits.
    std::unique_ptr<NormalizedDataset> normalized;
    std::unique_ptr<AugmentedDataset> augmented;
    AugmentConfig a = flags;
    if (a.active()) {
      a.mean = per_channel(f->mean.empty() ? std::vector<float>{0.5f} : f->mean, s->c, "--mean");
      a.std = per_channel(f->std.empty() ? std::vector<float>{0.5f} : f->std, s->c, "--std");
      InputSpec in;
      in.channels = s->c;
      in.height = s->h;
      in.width = s->w;
      in.mean = a.mean;
      in.std = a.std;
      normalized = std::make_unique<NormalizedDataset>(s, in);
      augmented = std::make_unique<AugmentedDataset>(*normalized, a, f->seed);
      augmented->set_epoch(f->epoch - 1);
    }
    std::vector<float> x(size_t(s->c * plane));
    for (int64_t i = 0; i < n; ++i) {
      Image img;
      img.h = s->h;
      img.w = s->w;
      img.c = s->c;
      img.px.resize(s->c * plane);
      if (augmented) augmented->get(i, x.data());
      for (int64_t c = 0; c < s->c; ++c)  // planar [C,H,W] -> interleaved [H,W,C]
        for (int64_t k = 0; k < plane; ++k)
          img.px[k * s->c + c] =
              augmented ? uint8_t(std::lround(
                              std::clamp(x[size_t(c * plane + k)] * a.std[size_t(c)] + a.mean[size_t(c)], 0.f,
                                         1.f) *
                              255.f))
                        : s->pixels[(i * s->c + c) * plane + k];
      const std::string label = s->labels[i] < int64_t(s->class_names.size()) ? s->class_names[s->labels[i]]
                                                                              : std::to_string(s->labels[i]);
      const auto path = std::filesystem::path(f->out) / (std::to_string(i) + "_" + label + ".png");
      write_png(path.string(), img);
      std::cout << path.string() << "\n";
    }
    return 0;
  };
}

}  // namespace vit::app
