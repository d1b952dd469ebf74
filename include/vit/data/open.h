// Finding and opening a dataset directory: --dataset auto|idx|cifar10|cifar100 (image
// folders come later). auto looks for IDX files, then CIFAR-10 batches, then CIFAR-100.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "vit/data/image_set.h"

namespace vit {

struct DatasetSplits {
  std::string kind;  // what was opened: idx, cifar10, cifar100
  std::shared_ptr<const ImageSet> train, test;
};

// Throws vit::Error naming the directory and what was looked for when nothing matches.
DatasetSplits open_dataset(const std::string& dir, const std::string& kind = "auto");

// Holds out the last `fraction` of a seeded permutation of [0, n) for validation:
// returns {train indices, validation indices}.
std::pair<std::vector<int64_t>, std::vector<int64_t>> split_indices(int64_t n, double fraction,
                                                                    uint64_t seed);

}  // namespace vit
