// A dataset that forwards everything to another, for tests to override what they watch
// (get: a failing sample, the order samples are read in).
#pragma once
#include <string>

#include "data/dataset.h"

namespace vit::test {

class DatasetView : public Dataset {
 public:
  explicit DatasetView(const Dataset& base) : base_(base) {}
  int64_t size() const override { return base_.size(); }
  int64_t num_classes() const override { return base_.num_classes(); }
  int64_t channels() const override { return base_.channels(); }
  int64_t height() const override { return base_.height(); }
  int64_t width() const override { return base_.width(); }
  int64_t get(int64_t i, float* image) const override { return base_.get(i, image); }
  std::string describe() const override { return base_.describe(); }

 protected:
  const Dataset& base_;
};

}  // namespace vit::test
