#include "data/open.h"

#include <algorithm>
#include <filesystem>

#include "core/check.h"
#include "data/cifar.h"
#include "data/folder.h"
#include "data/idx.h"

namespace vit {

namespace fs = std::filesystem;

namespace {
// Whether dir's subfolders hold .png or .jpg files themselves: one split's class folders,
// given where the folder of the splits is meant.
bool holds_class_folders(const std::string& dir) {
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir, ec)) {
    if (!sub.is_directory(ec)) continue;
    for (const auto& f : fs::directory_iterator(sub.path(), ec))
      if (is_image_file(f.path().string())) return true;
  }
  return false;
}

// A CIFAR batch of whole records but fewer than the archive's (a copy cut on a record
// boundary) reads as a smaller dataset, and a cut elsewhere is refused: the short ones are
// said, in one note. files: each with the records the archive's has.
void note_short_cifar_files(std::vector<std::string>& notes,
                            const std::vector<std::pair<std::string, int64_t>>& files, int64_t label_bytes) {
  const int64_t record = label_bytes + 3 * 32 * 32;
  std::string shorter;
  for (const auto& [file, archive_records] : files) {
    std::error_code ec;
    const auto bytes = int64_t(fs::file_size(file, ec));
    if (ec || bytes % record != 0 || bytes / record >= archive_records) continue;
    shorter += detail::concat(shorter.empty() ? "" : ", ", fs::path(file).filename().string(), " ",
                              bytes / record, " of ", archive_records);
  }
  if (!shorter.empty())
    notes.push_back("fewer records than the CIFAR archive's batches (a copy cut short?): " + shorter);
}
}  // namespace

DatasetSplits open_dataset(const std::string& dir, const std::string& kind, Splits need) {
  VIT_CHECK(fs::exists(dir), "--data-dir ", dir, ": no such directory",
            !dir.empty() && dir[0] == '~'
                ? " (the shell expands ~ only at a word's start: --data-dir ~/x, not "
                  "--data-dir=~/x)"
                : "");
  VIT_CHECK(fs::is_directory(dir), "--data-dir ", dir, ": not a directory");
  VIT_CHECK(
      kind == "auto" || kind == "idx" || kind == "cifar10" || kind == "cifar100" || kind == "cifar100-coarse",
      "--dataset must be auto, idx, cifar10, cifar100, cifar100-coarse or folder, got '", kind, "'");
  const bool want_train = need != Splits::eval, want_test = need != Splits::train;
  DatasetSplits out;
  std::shared_ptr<ImageSet> train_set, test_set;  // out's, while they may change
  // A format is the directory's when either split's files are there (or it is asked for by
  // name); then each split wanted must be there, and only those are read.
  auto take = [&](const char* name, bool has_train, bool has_test, const std::string& train_what,
                  const std::string& test_what, auto read_train, auto read_test) {
    VIT_CHECK(!want_train || has_train, dir, ": no ", train_what);
    VIT_CHECK(
        !want_test || has_test, dir, ": no ", test_what,
        want_train && has_train ? "; --val-split 0.1 holds a tenth of the training set out instead" : "");
    out.kind = name;
    if (want_train) out.train = train_set = std::make_shared<ImageSet>(read_train());
    if (want_test) out.test = test_set = std::make_shared<ImageSet>(read_test());
  };
  if (kind == "auto" || kind == "idx") {
    // {images, labels} of each split (pairs, not structured bindings: lambdas capture them)
    const auto tr = find_idx_files(dir, true), te = find_idx_files(dir, false);
    if (!tr.first.empty() || !te.first.empty() || kind == "idx") {
      take(
          "idx", !tr.first.empty() && !tr.second.empty(), !te.first.empty() && !te.second.empty(),
          "IDX training files (train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz])",
          "IDX test files (t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz])",
          [&] { return read_idx(tr.first, tr.second); }, [&] { return read_idx(te.first, te.second); });
      if (train_set && test_set)  // EMNIST's classes: the larger split's count for both
        train_set->num_classes = test_set->num_classes =
            std::max(train_set->num_classes, test_set->num_classes);
      return out;
    }
  }
  if (kind == "auto" || kind == "cifar10") {
    auto train = find_cifar10_files(dir, true), test = find_cifar10_files(dir, false);
    if (want_train && !train.empty() && train.size() < 5)  // a download cut short trains on a part
      out.notes.push_back(detail::concat(dir, ": ", train.size(),
                                         " of CIFAR-10's 5 training batches (data_batch_1.bin ... "
                                         "data_batch_5.bin); training on those alone"));
    if (!train.empty() || !test.empty() || kind == "cifar10") {
      std::vector<std::pair<std::string, int64_t>> read;
      for (const std::string& f : want_train ? train : std::vector<std::string>{})
        read.emplace_back(f, 10000);
      for (const std::string& f : want_test ? test : std::vector<std::string>{}) read.emplace_back(f, 10000);
      note_short_cifar_files(out.notes, read, 1);
      take(
          "cifar10", !train.empty(), !test.empty(),
          "CIFAR-10 training batches (data_batch_1.bin ... data_batch_5.bin)",
          "CIFAR-10 test batch (test_batch.bin)", [&] { return read_cifar10(train); },
          [&] { return read_cifar10(test); });
      return out;
    }
  }
  const std::string train = find_cifar100_file(dir, true), test = find_cifar100_file(dir, false);
  const bool fine = kind != "cifar100-coarse";
  VIT_CHECK(!train.empty() || !test.empty() || kind != "auto", dir,
            ": no dataset found (looked for IDX files such as "
            "train-images-idx3-ubyte, CIFAR-10 data_batch_*.bin, CIFAR-100 train.bin, train/ and val/ image "
            "folders)",
            need != Splits::eval && fs::is_directory(fs::path(dir) / "train")
                ? "; train/ is there without val/ or test/: --val-split 0.1 holds a tenth of it out"
            : need == Splits::eval && fs::is_directory(fs::path(dir) / "train")
                ? "; train/ is there without val/ or test/, and the evaluation split is read (--split train "
                  "evaluates train/)"
            : fs::exists(fs::path(dir) / "cifar-10-batches-py") ||
                    fs::exists(fs::path(dir) / "data_batch_1") ||
                    fs::exists(fs::path(dir) / "cifar-100-python")
                ? "; this is CIFAR's Python version (pickles, as torchvision downloads it): vitcpp reads the "
                  "binary "
                  "version (cifar-10-binary.tar.gz, cifar-100-binary.tar.gz)"
            : holds_class_folders(dir)
                ? "; " + dir + " holds class folders of images itself (ImageFolder(\"" + dir +
                      "\")): give the folder above it, with this one named train/ or val/"
                : "");
  std::vector<std::pair<std::string, int64_t>> read;
  if (want_train && !train.empty()) read.emplace_back(train, 50000);
  if (want_test && !test.empty()) read.emplace_back(test, 10000);
  note_short_cifar_files(out.notes, read, 2);
  take(
      fine ? "cifar100" : "cifar100-coarse", !train.empty(), !test.empty(), "CIFAR-100 train.bin",
      "CIFAR-100 test.bin", [&] { return read_cifar100(train, fine); },
      [&] { return read_cifar100(test, fine); });
  return out;
}

namespace {
// Some samples of a dataset, by index: a split held out of train (--val-split) of image folders.
class Subset : public Dataset {
 public:
  Subset(std::unique_ptr<Dataset> base, std::vector<int64_t> index)
      : base_(std::move(base)), index_(std::move(index)) {}
  int64_t size() const override { return int64_t(index_.size()); }
  int64_t num_classes() const override { return base_->num_classes(); }
  int64_t channels() const override { return base_->channels(); }
  int64_t height() const override { return base_->height(); }
  int64_t width() const override { return base_->width(); }
  int64_t get(int64_t i, float* image) const override { return base_->get(index_[size_t(i)], image); }
  int64_t get_crop(int64_t i, const CropDraw& draw, float* image) const override {
    return base_->get_crop(index_[size_t(i)], draw, image);
  }
  std::string source(int64_t i) const override { return base_->source(index_[size_t(i)]); }
  std::string describe() const override {
    return detail::concat(base_->describe(), ", ", index_.size(), " of its ", base_->size(), " images");
  }

 private:
  std::unique_ptr<Dataset> base_;
  std::vector<int64_t> index_;
};

// The evaluation split's other names, for errors.
const std::string kEvalNames = "or valid/, validation/, eval/, evaluation/, test/";

// The first of these folders in dir that exists, else dir/names[0].
fs::path first_folder(const std::string& dir, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (fs::is_directory(fs::path(dir) / n)) return fs::path(dir) / n;
  return fs::path(dir) / *names.begin();
}

// DIR/train and DIR/val: which are there, and whether they serve the splits asked for. Their
// names as timm's folder search takes them (_TRAIN_SYNONYM, _EVAL_SYNONYM), then test/ for
// the evaluation: a train/ valid/ test/ export (Roboflow's, Kaggle's) validates on valid/.
struct FolderLayout {
  explicit FolderLayout(const std::string& dir)
      : train(first_folder(dir, {"train", "training"})),
        eval(first_folder(dir, {"val", "valid", "validation", "eval", "evaluation", "test"})),
        has_train(fs::is_directory(train)),
        has_eval(fs::is_directory(eval)) {}
  bool serves(Splits need) const {
    return (has_train || need == Splits::eval) && (has_eval || need == Splits::train) &&
           (has_train || has_eval);
  }
  fs::path train, eval;
  bool has_train, has_eval;
};

// Files torchvision's ImageFolder would read and vitcpp does not: said, not dropped silently.
void note_other_formats(const FolderDataset& f, DataSources& out) {
  if (f.other_formats() > 0)
    out.notes.push_back(detail::concat(f.root(), ": ", f.other_formats(),
                                       " file(s) in formats vitcpp does not read (.bmp, .ppm, .pgm, .tif, "
                                       ".tiff, .webp) left out; torchvision's ImageFolder would take them"));
}

bool folders_chosen(const FolderLayout& layout, const std::string& dir, const std::string& kind,
                    Splits need) {
  return kind == "folder" ||
         (kind == "auto" && layout.serves(need) && find_idx_files(dir, true).first.empty() &&
          find_idx_files(dir, false).first.empty());
}
}  // namespace

bool image_folders(const std::string& dir, const std::string& kind, Splits need) {
  return folders_chosen(FolderLayout(dir), dir, kind, need);
}

DataSources make_datasets(const std::string& dir, const std::string& kind, const InputSpec& in,
                          double val_split, uint64_t seed, bool skip_bad_images, Splits need,
                          const std::vector<std::string>& model_classes, bool timm_order) {
  DataSources out;
  in.validate();
  // Training images go straight to the input size (augmentation crops them); evaluation
  // images take the model's eval transform (crop_pct, crop_mode), and so does the training
  // split read alone, which is read to be evaluated (vit eval --split train, as timm's
  // validate.py treats any split).
  const InputSpec train_in = need != Splits::train ? training_input(in) : in;
  // An evaluation split held out of train reads train.
  const bool want_train = need != Splits::eval || val_split > 0, want_eval = need != Splits::train;
  const FolderLayout layout(dir);
  // Image folders with --val-split read train/ alone: its held-out share is the evaluation.
  const bool held_out = val_split > 0;
  const Splits read = held_out                  ? Splits::train
                      : want_train && want_eval ? Splits::both
                      : want_train              ? Splits::train
                                                : Splits::eval;
  if (folders_chosen(layout, dir, kind, read)) {
    VIT_CHECK(layout.serves(read), dir, ": image folders need ",
              read == Splits::both ? dir + "/train/<class>/ and " + dir + "/val/<class>/ (" + kEvalNames + ")"
              : read == Splits::train ? dir + "/train/<class>/ (or training/)"
                                      : dir + "/val/<class>/ (" + kEvalNames + ")");
    VIT_CHECK(!held_out || !layout.has_eval, "--val-split is for datasets without a validation split; ", dir,
              " has one (", layout.eval.string(), ")");
    out.kind = "folder";
    if (held_out) {
      // The same files twice: training's preprocessing for one share, evaluation's for the other.
      auto training = std::make_unique<FolderDataset>(layout.train.string(), train_in,
                                                      std::vector<std::string>{}, skip_bad_images);
      auto [tr, va] = split_indices(training->size(), val_split, seed);
      auto evaluation = std::make_unique<FolderDataset>(layout.train.string(), in, training->class_names(),
                                                        skip_bad_images);
      out.class_names = training->class_names();
      out.skipped = training->skipped();
      note_other_formats(*training, out);
      if (need != Splits::eval) out.train = std::make_unique<Subset>(std::move(training), std::move(tr));
      if (want_eval) out.eval = std::make_unique<Subset>(std::move(evaluation), std::move(va));
      return out;
    }
    // train/'s classes wherever it exists, listed without its files when train is not read.
    auto keep = [&](std::unique_ptr<FolderDataset> f, std::unique_ptr<Dataset>& into) {
      out.class_names = f->class_names();
      out.skipped.insert(out.skipped.end(), f->skipped().begin(), f->skipped().end());
      note_other_formats(*f, out);
      into = std::move(f);
    };
    const fs::path& listed = want_eval ? layout.eval : layout.train;  // with one split alone
    const bool by_model = need != Splits::both && !model_classes.empty() && [&] {
      for (const std::string& c : class_folders(listed.string()))
        if (std::find(model_classes.begin(), model_classes.end(), c) == model_classes.end()) return false;
      return true;
    }();
    if (by_model) out.class_names = model_classes;
    if (!by_model && need != Splits::both && !model_classes.empty()) {
      // Scored against classes the model does not name: say so, or a renamed folder reads as 0%.
      std::string unknown;
      int64_t count = 0;
      for (const std::string& c : class_folders(listed.string()))
        if (std::find(model_classes.begin(), model_classes.end(), c) == model_classes.end() && count++ < 5)
          unknown += (unknown.empty() ? "" : ", ") + c;
      out.notes.push_back(detail::concat(
          listed.string(), ": ", count, " class folder(s) the model's ", model_classes.size(),
          " class names do not include (", unknown, count > 5 ? ", ..." : "",
          "): the classes are numbered in the sorted order of ",
          layout.has_train ? layout.train.string() : listed.string(),
          "'s folders instead, which may not be the model's (a model's own folders keep its names)"));
    }
    if (timm_order && model_classes.empty()) {
      const std::string root = layout.has_train ? layout.train.string() : listed.string();
      const std::vector<std::string> sorted = class_folders(root);
      out.class_names = natural_sorted(sorted);
      if (out.class_names != sorted)
        out.notes.push_back(detail::concat(
            root,
            ": the class folders are numbered in timm's order, as a timm checkpoint without class names "
            "was trained on them (case left out, numbers as numbers: ",
            class_numbering(out.class_names), "), not in sorted order"));
    }
    if (want_train)
      keep(std::make_unique<FolderDataset>(layout.train.string(), train_in, out.class_names, skip_bad_images),
           out.train);
    else if (layout.has_train && !by_model && !(timm_order && model_classes.empty()))
      out.class_names = class_folders(layout.train.string());
    if (want_eval)
      keep(std::make_unique<FolderDataset>(layout.eval.string(), in, out.class_names, skip_bad_images),
           out.eval);
    return out;
  }
  const bool want_test = want_eval && val_split == 0;  // held out of train: the test files go unread
  DatasetSplits d = open_dataset(dir, kind,
                                 want_train && want_test ? Splits::both
                                 : want_train            ? Splits::train
                                                         : Splits::eval);
  out.kind = d.kind;
  out.notes = d.notes;
  out.class_names = (d.train ? d.train : d.test)->class_names;
  if (val_split > 0) {
    auto [tr, va] = split_indices(d.train->n, val_split, seed);
    if (need != Splits::eval) out.train = std::make_unique<NormalizedDataset>(d.train, train_in, tr);
    if (want_eval) out.eval = std::make_unique<NormalizedDataset>(d.train, in, va);
  } else {
    if (want_train) out.train = std::make_unique<NormalizedDataset>(d.train, train_in);
    if (want_eval) out.eval = std::make_unique<NormalizedDataset>(d.test, in);
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
