// Python's training data: numpy arrays (X, y) as the datasets `vit train` reads from files.
// uint8 X are pixels, produced at the model's input exactly as IDX and CIFAR files are
// (data/image_set.h: resized if their size differs, normalized), so the same images as
// arrays or as files train the same bits. float32 X are the model's input already
// (normalized, at its size), fed as they are, as model(x) takes them.
#pragma once
#include <cstdint>
#include <string>

#include "data/open.h"

namespace vit::python {

// One split as Python holds it: x [n, c, h, w] (C-contiguous) and labels y [n].
struct ArraySplit {
  const void* x = nullptr;
  bool is_float = false;  // float32 input, else uint8 pixels
  int64_t n = 0, c = 0, h = 0, w = 0;
  const int64_t* y = nullptr;
};

// The training set and the evaluation set: `val` when given (may be null), else the last
// val_split of a seeded permutation of train (as --val-split), else none. The arrays are
// copied. Labels must lie in [0, K) where K is the largest label of either split plus one.
DataSources array_datasets(const ArraySplit& train, const ArraySplit* val, const InputSpec& in,
                           double val_split, uint64_t seed);

}  // namespace vit::python
