#include "arrays.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "data/image_set.h"

namespace vit::python {

namespace {

// float32 images that are the model's input already: [n, C, H, W] with labels.
class TensorDataset : public Dataset {
 public:
  struct Data {
    int64_t n = 0, c = 0, h = 0, w = 0, num_classes = 0;
    std::vector<float> pixels;  // [n, c, h, w]
    std::vector<int64_t> labels;
  };
  TensorDataset(std::shared_ptr<const Data> d, std::vector<int64_t> index)
      : d_(std::move(d)), index_(std::move(index)) {}
  int64_t size() const override { return int64_t(index_.size()); }
  int64_t num_classes() const override { return d_->num_classes; }
  int64_t channels() const override { return d_->c; }
  int64_t height() const override { return d_->h; }
  int64_t width() const override { return d_->w; }
  int64_t get(int64_t i, float* image) const override {
    const int64_t j = index_.at(size_t(i)), n = d_->c * d_->h * d_->w;
    std::copy_n(d_->pixels.data() + j * n, n, image);
    return d_->labels[size_t(j)];
  }
  std::string describe() const override {
    return "float32 arrays (" + std::to_string(size()) + " images, " + std::to_string(d_->c) + "x" +
           std::to_string(d_->h) + "x" + std::to_string(d_->w) + ", " + std::to_string(d_->num_classes) +
           " classes)";
  }

 private:
  std::shared_ptr<const Data> d_;
  std::vector<int64_t> index_;
};

std::vector<int64_t> all_of(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

int64_t max_label(const ArraySplit& s, const char* name) {
  VIT_CHECK(s.n > 0, name, ": no images");
  int64_t k = -1;
  for (int64_t i = 0; i < s.n; ++i) {
    VIT_CHECK(s.y[i] >= 0, name, ": label ", s.y[i], " of sample ", i, " is negative");
    k = std::max(k, s.y[i]);
  }
  return k;
}

// s's sizes, values and labels, copied into a new Set (an ImageSet or TensorDataset::Data).
template <typename T, typename Set>
std::shared_ptr<Set> copied(const ArraySplit& s, int64_t K) {
  auto d = std::make_shared<Set>();
  d->n = s.n;
  d->c = s.c;
  d->h = s.h;
  d->w = s.w;
  d->num_classes = K;
  const auto* v = static_cast<const T*>(s.x);
  d->pixels.assign(v, v + s.n * s.c * s.h * s.w);
  d->labels.assign(s.y, s.y + s.n);
  return d;
}

std::shared_ptr<const ImageSet> pixels(const ArraySplit& s, int64_t K, const char* name) {
  auto set = copied<uint8_t, ImageSet>(s, K);
  set->source = std::string(name) + " arrays";
  set->check_labels();
  return set;
}

std::shared_ptr<const TensorDataset::Data> floats(const ArraySplit& s, int64_t K, const InputSpec& in,
                                                  const char* name) {
  VIT_CHECK(s.c == in.channels && s.h == in.height && s.w == in.width, name,
            ": float32 images are the model's input, [N, ", in.channels, ", ", in.height, ", ", in.width,
            "]; got [", s.n, ", ", s.c, ", ", s.h, ", ", s.w, "] (uint8 pixels are resized and normalized)");
  return copied<float, TensorDataset::Data>(s, K);
}

}  // namespace

DataSources array_datasets(const ArraySplit& train, const ArraySplit* val, const InputSpec& in,
                           double val_split, uint64_t seed) {
  VIT_CHECK(!val || val_split == 0, "val_split holds part of train out for evaluation; val is given already");
  VIT_CHECK(!val || val->is_float == train.is_float, "train and val must both be uint8 or both float32");
  const int64_t K = std::max(max_label(train, "train"), val ? max_label(*val, "val") : -1) + 1;
  DataSources out;
  out.kind = "arrays";
  std::vector<int64_t> tr = all_of(train.n), va;
  if (val_split > 0) std::tie(tr, va) = split_indices(train.n, val_split, seed);
  if (!train.is_float) {
    const auto set = pixels(train, K, "train");
    out.train = std::make_unique<NormalizedDataset>(set, training_input(in), tr);
    if (val)
      out.eval = std::make_unique<NormalizedDataset>(pixels(*val, K, "val"), in);
    else if (val_split > 0)
      out.eval = std::make_unique<NormalizedDataset>(set, in, va);
    return out;
  }
  const auto d = floats(train, K, in, "train");
  out.train = std::make_unique<TensorDataset>(d, tr);
  if (val)
    out.eval = std::make_unique<TensorDataset>(floats(*val, K, in, "val"), all_of(val->n));
  else if (val_split > 0)
    out.eval = std::make_unique<TensorDataset>(d, va);
  return out;
}

}  // namespace vit::python
