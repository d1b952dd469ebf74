// CIFAR binary batches. CIFAR-10: data_batch_{1..5}.bin and test_batch.bin, each record
// 1 label byte + 3072 pixel bytes (R, G, B planes of 32x32). CIFAR-100: train.bin and
// test.bin, each record a coarse label byte, a fine label byte, then 3072 pixel bytes.
#pragma once
#include <string>
#include <vector>

#include "data/image_set.h"

namespace vit {

ImageSet read_cifar10(const std::vector<std::string>& files);
// fine = true: the 100 fine labels; false: the 20 coarse ones (--dataset cifar100-coarse).
// Class names from fine_label_names.txt or coarse_label_names.txt beside the file, as the
// binary archive has them.
ImageSet read_cifar100(const std::string& file, bool fine = true);
// The split's files under dir (searching dir and dir/cifar-10-batches-bin); empty if none.
std::vector<std::string> find_cifar10_files(const std::string& dir, bool train);
std::string find_cifar100_file(const std::string& dir, bool train);

}  // namespace vit
