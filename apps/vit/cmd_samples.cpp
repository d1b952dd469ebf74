// vit samples: writes the first N images of a dataset split as PNG files named
// <index>_<label>.png, to look at the data or to feed vit predict; with vit train's
// augmentation flags, as a training epoch sees them. IDX and CIFAR images at their own size;
// image folders' at the input size training resizes them to (--img-size).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/check.h"
#include "data/augment.h"
#include "data/image.h"
#include "data/image_set.h"
#include "data/open.h"
#include "model_flags.h"
#include "validators.h"

namespace vit::app {

Run add_samples(CLI::App& cmd) {
  struct Flags {
    std::string data_dir, dataset = "auto", split = "test", out;
    int64_t count = 8, epoch = 1;
    uint64_t seed = 42;
    AugFlags aug;
    std::vector<float> mean, std;
    std::vector<int64_t> img_size;
  };
  auto f = std::make_shared<Flags>();
  cmd.add_option("--data-dir", f->data_dir,
                 "dataset directory (IDX, CIFAR or image folders; only the --split drawn from is read)")
      ->required();
  cmd.add_option(
         "--dataset", f->dataset,
         "auto, idx, cifar10, cifar100 (its fine labels), cifar100-coarse (its 20 superclasses) or folder")
      ->capture_default_str();
  cmd.add_option("--split", f->split, "test (image folders: val/ or test/) or train")
      ->check(CLI::IsMember({"test", "train"}))
      ->capture_default_str();
  cmd.add_option("-n,--count", f->count, "how many images")->check(positive())->capture_default_str();
  cmd.add_option("--out", f->out, "output directory")->required();
  cmd.add_option("--img-size", f->img_size,
                 "image folders: the model's input size, S or H W, that training resizes each image to "
                 "before augmenting, or with --scale its random resized crop of the file (default 224)")
      ->expected(1, 2)
      ->check(positive());
  f->aug.add_to(cmd);
  cmd.add_option("--epoch", f->epoch, "with augmentation: the training epoch whose draws to show (from 1)")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--seed", f->seed, "with augmentation: vit train's --seed")
      ->check(seed_value())
      ->capture_default_str();
  cmd.add_option("--mean", f->mean,
                 "with augmentation: the model's input mean, one value or one per channel (padding takes "
                 "it; default 0.5)");
  cmd.add_option("--std", f->std,
                 "with augmentation: the model's input std (random erasing's noise has it; default 0.5)")
      ->check(positive());
  return [f, &cmd] {
    // A non-finite mean turned every augmented image black, with exit 0.
    for (float v : f->mean) VIT_USAGE_CHECK(std::isfinite(v), "--mean must be finite, got ", v);
    AugmentConfig a = f->aug.config();
    for (const std::string& n : f->aug.notes(cmd)) std::cerr << "note: " << n << std::endl;
    const Splits need = f->split == "train" ? Splits::train : Splits::eval;
    const bool folders = image_folders(f->data_dir, f->dataset, need);
    VIT_USAGE_CHECK(folders || f->img_size.empty(), "--img-size is for image folders; ", f->data_dir,
                    " holds IDX or CIFAR images, written at their own size");
    // The split's raw pixels (IDX, CIFAR) or, for image folders, its images as training reads
    // them: resized to the input size (3 channels), normalized.
    std::shared_ptr<const ImageSet> s;
    std::unique_ptr<Dataset> folder;
    std::vector<std::string> names;
    InputSpec in;
    if (folders) {
      in.channels = 3;
      in.height = f->img_size.empty() ? 224 : f->img_size[0];
      in.width = f->img_size.empty() ? 224 : f->img_size.back();
    } else {
      DatasetSplits d = open_dataset(f->data_dir, f->dataset, need);
      s = need == Splits::train ? d.train : d.test;
      in.channels = s->c;
      in.height = s->h;
      in.width = s->w;
      names = s->class_names;
    }
    in.mean = a.mean =
        per_channel(f->mean.empty() ? std::vector<float>{0.5f} : f->mean, in.channels, "--mean");
    in.std = a.std = per_channel(f->std.empty() ? std::vector<float>{0.5f} : f->std, in.channels, "--std");
    if (folders) {
      DataSources d = make_datasets(f->data_dir, "folder", in, 0.0, 0, false, need);
      folder = std::move(need == Splits::train ? d.train : d.eval);
      names = d.class_names;
    }
    // Through the augmentation when one is asked for, in the normalization given, then back
    // to 8 bits; IDX and CIFAR images without it are written as they are stored.
    std::unique_ptr<NormalizedDataset> normalized;
    const Dataset* source = folder.get();
    if (s && a.active()) source = (normalized = std::make_unique<NormalizedDataset>(s, in)).get();
    std::unique_ptr<AugmentedDataset> augmented;
    if (source && a.active()) {
      augmented = std::make_unique<AugmentedDataset>(*source, a, f->seed);
      augmented->set_epoch(f->epoch - 1);
      source = augmented.get();
    }
    const int64_t n = std::min(f->count, s ? s->n : source->size()), C = in.channels,
                  plane = in.height * in.width;
    std::filesystem::create_directories(f->out);
    std::vector<float> x(size_t(C * plane));
    for (int64_t i = 0; i < n; ++i) {
      Image img;
      img.h = in.height;
      img.w = in.width;
      img.c = C;
      img.px.resize(size_t(C * plane));
      const int64_t label = source ? source->get(i, x.data()) : s->labels[i];
      for (int64_t c = 0; c < C; ++c)  // planar [C,H,W] -> interleaved [H,W,C]
        for (int64_t k = 0; k < plane; ++k)
          img.px[k * C + c] =
              source ? uint8_t(std::lround(
                           std::clamp(x[size_t(c * plane + k)] * a.std[size_t(c)] + a.mean[size_t(c)], 0.f,
                                      1.f) *
                           255.f))
                     : s->pixels[(i * C + c) * plane + k];
      const std::string name = label < int64_t(names.size()) ? names[size_t(label)] : std::to_string(label);
      const auto path = std::filesystem::path(f->out) / (std::to_string(i) + "_" + name + ".png");
      write_png(path.string(), img);
      std::cout << path.string() << "\n";
    }
    return 0;
  };
}

}  // namespace vit::app
