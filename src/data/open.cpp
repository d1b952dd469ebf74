#include "vit/data/open.h"

#include <filesystem>

#include "vit/core/error.h"
#include "vit/data/cifar.h"
#include "vit/data/idx.h"

namespace vit {

namespace fs = std::filesystem;

DatasetSplits open_dataset(const std::string& dir, const std::string& kind) {
  VIT_CHECK(fs::is_directory(dir), "--data-dir ", dir, ": not a directory");
  VIT_CHECK(kind == "auto" || kind == "idx" || kind == "cifar10" || kind == "cifar100",
            "--dataset must be auto, idx, cifar10, cifar100 or folder, got '", kind, "'");
  DatasetSplits out;
  if (kind == "auto" || kind == "idx") {
    auto [ti, tl] = find_idx_files(dir, true);
    auto [vi, vl] = find_idx_files(dir, false);
    if (!ti.empty() || kind == "idx") {
      VIT_CHECK(!ti.empty() && !tl.empty(), dir,
                ": no IDX training files (train-images-idx3-ubyte[.gz] and "
                "train-labels-idx1-ubyte[.gz])");
      VIT_CHECK(!vi.empty() && !vl.empty(), dir,
                ": no IDX test files (t10k-images-idx3-ubyte[.gz] and "
                "t10k-labels-idx1-ubyte[.gz])");
      out.kind = "idx";
      out.train = std::make_shared<ImageSet>(read_idx(ti, tl));
      out.test = std::make_shared<ImageSet>(read_idx(vi, vl));
      return out;
    }
  }
  if (kind == "auto" || kind == "cifar10") {
    auto train = find_cifar10_files(dir, true), test = find_cifar10_files(dir, false);
    if (!train.empty() || kind == "cifar10") {
      VIT_CHECK(!train.empty(), dir,
                ": no CIFAR-10 training batches (data_batch_1.bin ... data_batch_5.bin)");
      VIT_CHECK(!test.empty(), dir, ": no CIFAR-10 test batch (test_batch.bin)");
      out.kind = "cifar10";
      out.train = std::make_shared<ImageSet>(read_cifar10(train));
      out.test = std::make_shared<ImageSet>(read_cifar10(test));
      return out;
    }
  }
  const std::string train = find_cifar100_file(dir, true), test = find_cifar100_file(dir, false);
  VIT_CHECK(!train.empty() || kind == "cifar100", dir,
            ": no dataset found (looked for IDX files such as "
            "train-images-idx3-ubyte, CIFAR-10 data_batch_*.bin, CIFAR-100 train.bin, train/ and val/ image "
            "folders)");
  VIT_CHECK(!train.empty() && !test.empty(), dir, ": no CIFAR-100 train.bin and test.bin");
  out.kind = "cifar100";
  out.train = std::make_shared<ImageSet>(read_cifar100(train));
  out.test = std::make_shared<ImageSet>(read_cifar100(test));
  return out;
}

DataSources make_datasets(const std::string& dir, const std::string& kind, const InputSpec& in,
                          double val_split, uint64_t seed, bool skip_bad_images) {
  DataSources out;
  in.validate();
  // Training images go straight to the input size (augmentation crops them); evaluation
  // images take the model's eval transform (crop_pct, crop_mode).
  InputSpec train_in = in;
  train_in.crop_pct = 1.f;
  train_in.crop_mode = "squash";
  const bool folders = fs::is_directory(fs::path(dir) / "train") &&
                       (fs::is_directory(fs::path(dir) / "val") || fs::is_directory(fs::path(dir) / "test"));
  if (kind == "folder" || (kind == "auto" && folders && find_idx_files(dir, true).first.empty())) {
    VIT_CHECK(folders, dir, ": image folders need ", dir, "/train/<class>/ and ", dir,
              "/val/<class>/ (or test/)");
    out.kind = "folder";
    auto train = std::make_unique<FolderDataset>((fs::path(dir) / "train").string(), train_in,
                                                 std::vector<std::string>{}, skip_bad_images);
    out.class_names = train->class_names();
    if (val_split > 0) {
      throw Error("--val-split is for datasets without a validation split; " + dir + " has one");
    }
    const fs::path val =
        fs::is_directory(fs::path(dir) / "val") ? fs::path(dir) / "val" : fs::path(dir) / "test";
    auto eval = std::make_unique<FolderDataset>(val.string(), in, out.class_names, skip_bad_images);
    for (const FolderDataset* f : {train.get(), eval.get()})
      out.skipped.insert(out.skipped.end(), f->skipped().begin(), f->skipped().end());
    out.eval = std::move(eval);
    out.train = std::move(train);
    return out;
  }
  DatasetSplits d = open_dataset(dir, kind);
  out.kind = d.kind;
  out.class_names = d.train->class_names;
  if (val_split > 0) {
    auto [tr, va] = split_indices(d.train->n, val_split, seed);
    out.train = std::make_unique<NormalizedDataset>(d.train, train_in, tr);
    out.eval = std::make_unique<NormalizedDataset>(d.train, in, va);
  } else {
    out.train = std::make_unique<NormalizedDataset>(d.train, train_in);
    out.eval = std::make_unique<NormalizedDataset>(d.test, in);
  }
  return out;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> split_indices(int64_t n, double fraction,
                                                                    uint64_t seed) {
  VIT_CHECK(fraction > 0 && fraction < 1, "--val-split must be in (0, 1), got ", fraction);
  auto order = epoch_order(n, seed, -1);
  const int64_t nval = std::max<int64_t>(1, int64_t(double(n) * fraction));
  std::vector<int64_t> train(order.begin(), order.end() - nval), val(order.end() - nval, order.end());
  return {train, val};
}

}  // namespace vit
