// Training with --aug-repeats: the loop reads the samples repeated_epoch_order gives, in
// batches of that order, each image's repeats (its samples i + k n) side by side.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/threads.h"
#include "data/augment.h"
#include "data/synthetic.h"
#include "support/check.h"
#include "support/dataset_view.h"
#include "support/models.h"
#include "train/trainer.h"

namespace vit {
namespace {

// The samples read, in the order they were asked for (one loading thread).
class Recording : public test::DatasetView {
 public:
  using DatasetView::DatasetView;
  mutable std::vector<int64_t> read;
  int64_t get(int64_t i, float* image) const override {
    const std::lock_guard<std::mutex> hold(mu_);
    read.push_back(i);
    return base_.get(i, image);
  }

 private:
  mutable std::mutex mu_;
};

}  // namespace

TEST(AugRepeats, AnEpochReadsTimmsRepeatedOrder) {
  set_num_threads(1);
  const SyntheticDataset images(300, 4, 1, 12, 12, 5);
  AugmentConfig ac;
  ac.hflip = 0.5f;
  const AugmentedDataset repeated(images, ac, 9, 3);
  const Recording data(repeated);
  ViT m(test::mnist_seed_at(12, 4));
  m.init_weights(9);
  TrainConfig t;
  t.epochs = 2;
  t.batch_size = 64;
  t.seed = 9;
  t.aug_repeats = 3;
  t.workers = 1;
  std::ostringstream log;
  const auto hist = train(m, data, nullptr, t, log);
  ASSERT_EQ(hist.size(), 2u) << log.str();
  std::vector<int64_t> want = repeated_epoch_order(300, 3, 9, 0), second = repeated_epoch_order(300, 3, 9, 1);
  want.insert(want.end(), second.begin(), second.end());
  EXPECT_EQ(data.read, want) << log.str();
  EXPECT_NE(log.str().find("2 epochs of 4 steps"), std::string::npos) << log.str();

  // A training set that is not whole repeats is refused, and so is one under 256 images.
  t.aug_repeats = 7;
  EXPECT_NE(test::error_of([&] { train(m, data, nullptr, t, log); }).find("not that many repeats"),
            std::string::npos);
  const SyntheticDataset few(200, 4, 1, 12, 12, 5);
  const AugmentedDataset few_repeated(few, ac, 9, 3);
  t.aug_repeats = 3;
  EXPECT_NE(test::error_of([&] { train(m, few_repeated, nullptr, t, log); }).find("hold none"),
            std::string::npos);
}

}  // namespace vit
