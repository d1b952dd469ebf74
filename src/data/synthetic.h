// A synthetic classification task for demos and tests without downloads: each class is a
// fixed smooth random pattern; a sample is its class pattern plus Gaussian noise. Sample i
// depends only on (seed, first_index + i), so any subset can be generated in any order,
// and a held-out set is the same task with first_index past the training samples.
#pragma once
#include <vector>

#include "data/dataset.h"

namespace vit {

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(int64_t size, int64_t num_classes, int64_t channels, int64_t height, int64_t width,
                   uint64_t seed, float noise = 0.5f, int64_t first_index = 0);
  int64_t size() const override { return size_; }
  int64_t num_classes() const override { return classes_; }
  int64_t channels() const override { return c_; }
  int64_t height() const override { return h_; }
  int64_t width() const override { return w_; }
  int64_t get(int64_t i, float* image) const override;
  std::string describe() const override;

 private:
  int64_t size_, classes_, c_, h_, w_;
  uint64_t seed_;
  float noise_;
  int64_t first_;
  std::vector<float> templates_;  // [K, C, H, W]
};

}  // namespace vit
