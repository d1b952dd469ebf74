// Training augmentation as a Dataset wrapper. Each sample's random draws depend only on
// (seed, epoch, index), so the same seed gives the same batches for any thread count and
// a resumed run sees exactly the augmentations it would have seen.
//   crop_pad > 0: pad by crop_pad pixels (zeros in normalized space, i.e. the mean) and
//                 take a random crop of the original size (seed 002's RandomCrop(32, 4))
//   hflip > 0:    flip horizontally with this probability
#pragma once
#include <cstdint>
#include <memory>

#include "vit/data/dataset.h"

namespace vit {

struct AugmentConfig {
  int64_t crop_pad = 0;
  float hflip = 0.f;
  bool active() const { return crop_pad > 0 || hflip > 0.f; }
};

class AugmentedDataset : public Dataset {
 public:
  AugmentedDataset(const Dataset& base, AugmentConfig cfg, uint64_t seed);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t size() const override { return base_.size(); }
  int64_t num_classes() const override { return base_.num_classes(); }
  int64_t channels() const override { return base_.channels(); }
  int64_t height() const override { return base_.height(); }
  int64_t width() const override { return base_.width(); }
  int64_t get(int64_t i, float* image) const override;
  std::string describe() const override;

 private:
  const Dataset& base_;
  AugmentConfig cfg_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

}  // namespace vit
