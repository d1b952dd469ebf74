// vit samples: writes the first N images of a dataset split as PNG files named
// <index>_<label>.png, to look at the data or to feed vit predict.
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "validators.h"
#include "vit/core/error.h"
#include "vit/data/image.h"
#include "vit/data/open.h"

namespace vit::app {

Run add_samples(CLI::App& cmd) {
  struct Flags {
    std::string data_dir, dataset = "auto", split = "test", out;
    int64_t count = 8;
  };
  auto f = std::make_shared<Flags>();
  cmd.add_option("--data-dir", f->data_dir, "dataset directory (IDX or CIFAR)")->required();
  cmd.add_option("--dataset", f->dataset, "auto, idx, cifar10 or cifar100")->capture_default_str();
  cmd.add_option("--split", f->split, "test or train")
      ->check(CLI::IsMember({"test", "train"}))
      ->capture_default_str();
  cmd.add_option("-n,--count", f->count, "how many images")->check(positive())->capture_default_str();
  cmd.add_option("--out", f->out, "output directory")->required();
  return [f] {
    DatasetSplits d = open_dataset(f->data_dir, f->dataset);
    const ImageSet& s = f->split == "train" ? *d.train : *d.test;
    std::filesystem::create_directories(f->out);
    const int64_t n = std::min(f->count, s.n), plane = s.h * s.w;
    for (int64_t i = 0; i < n; ++i) {
      Image img;
      img.h = s.h;
      img.w = s.w;
      img.c = s.c;
      img.px.resize(s.c * plane);
      for (int64_t c = 0; c < s.c; ++c)  // planar [C,H,W] -> interleaved [H,W,C]
        for (int64_t k = 0; k < plane; ++k) img.px[k * s.c + c] = s.pixels[(i * s.c + c) * plane + k];
      const std::string label = s.labels[i] < int64_t(s.class_names.size()) ? s.class_names[s.labels[i]]
                                                                            : std::to_string(s.labels[i]);
      const auto path = std::filesystem::path(f->out) / (std::to_string(i) + "_" + label + ".png");
      write_png(path.string(), img);
      std::cout << path.string() << "\n";
    }
    return 0;
  };
}

}  // namespace vit::app
