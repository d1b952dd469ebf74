// Finding and opening a dataset directory: --dataset auto|idx|cifar10|cifar100|folder.
// auto looks for IDX files, then CIFAR-10 batches, then CIFAR-100, then image folders.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/folder.h"
#include "data/image_set.h"
#include "model/config.h"

namespace vit {

struct DatasetSplits {
  std::string kind;                             // what was opened: idx, cifar10, cifar100
  std::shared_ptr<const ImageSet> train, test;  // null where not asked for
  std::vector<std::string> notes;               // for the user: files of a split that are missing
};

// Which splits a command reads: vit eval and vit samples read the one they work on, so a
// directory holding only the test split (t10k-*, test_batch.bin, val/) serves them, and an
// ImageNet-sized train/ is neither listed nor, with skip_bad_images, decoded to evaluate.
enum class Splits { both, train, eval };

// Throws vit::Error naming the directory and what was looked for when nothing matches, or
// naming the split asked for that is missing. A format is recognized by either split's files.
DatasetSplits open_dataset(const std::string& dir, const std::string& kind = "auto",
                           Splits need = Splits::both);

// What a model takes as input: its channels, size, mean and std, and its eval transform
// (interpolation, crop_pct, crop_mode).
inline InputSpec input_spec(const ViTConfig& c) {
  return {c.in_chans, c.img_h, c.img_w, c.mean, c.std, c.interpolation, c.crop_pct, c.crop_mode};
}

// What training images are produced at: the model's input, resized straight to its size
// (crop_pct 1, squash), since augmentation does the cropping.
inline InputSpec training_input(InputSpec in) {
  in.crop_pct = 1.0;
  in.crop_mode = "squash";
  return in;
}

// The datasets a command works on, produced at the model's input.
struct DataSources {
  std::string kind;
  std::unique_ptr<Dataset> train, eval;  // eval: the test (or val) split, or val_split of train
  std::vector<std::string> class_names;  // empty when the dataset has none
  std::vector<std::string> skipped;      // image files left out ("path: reason"), skip_bad_images only
  std::vector<std::string> notes;        // for the user: what was left out, and why
};
// kind: auto | idx | cifar10 | cifar100 | folder. Folders: dir/train and dir/val (or
// dir/test). val_split > 0 holds that fraction of train out as eval instead (folders: dir/train
// alone, without val/ or test/). Evaluation
// images are preprocessed as `in` says; training images are resized straight to the
// input size (crop_pct 1), since augmentation does the cropping. skip_bad_images: image
// folders leave out files that do not decode (checked up front) instead of stopping.
// need: the splits to produce (the other stays null); train alone is for evaluating it, with
// the evaluation images' preprocessing. Image folders' classes are train/'s
// subfolders wherever it exists, so that an evaluation alone keeps the training indices;
// without train/, the evaluation folder's own.
// Whether make_datasets reads dir as image folders (DIR/train/<class>/, DIR/val/<class>/ or
// test/) for the splits `need`: --dataset folder, or auto where those folders are there and
// no IDX files are.
bool image_folders(const std::string& dir, const std::string& kind, Splits need);

// model_classes (a checkpoint's class names, for one split read alone): an image folder
// whose classes are all among them is labelled by them, so that a folder of some of the
// model's classes keeps the model's indices; otherwise as above. timm_order: image folders
// without model_classes number their classes in timm's order (natural_sorted: a timm
// checkpoint without class names was trained so), with a note where that is not the sorted one.
DataSources make_datasets(const std::string& dir, const std::string& kind, const InputSpec& in,
                          double val_split, uint64_t seed, bool skip_bad_images = false,
                          Splits need = Splits::both, const std::vector<std::string>& model_classes = {},
                          bool timm_order = false);

// Holds out the last `fraction` of a seeded permutation of [0, n) for validation:
// returns {train indices, validation indices}.
std::pair<std::vector<int64_t>, std::vector<int64_t>> split_indices(int64_t n, double fraction,
                                                                    uint64_t seed);

}  // namespace vit
