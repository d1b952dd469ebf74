// IDX files (MNIST, Fashion-MNIST): big-endian magic 0x00000803 for images [N, H, W] and
// 0x00000801 for labels [N], raw or gzip-compressed. Errors name the file and the problem.
#pragma once
#include <string>

#include "data/image_set.h"

namespace vit {

// Reads an image file and its label file into an ImageSet. num_classes 0: 10 (MNIST's), or
// the largest label + 1 where labels go past 9 (EMNIST's 26, 47 or 62 classes); else labels
// must be below it.
ImageSet read_idx(const std::string& images_path, const std::string& labels_path, int64_t num_classes = 0);
// Finds the split's pair of files in dir: {train,t10k}-{images-idx3,labels-idx1}-ubyte, with
// or without .gz (also the '.' spelling, train-images.idx3-ubyte), or in torchvision's
// download folder below dir (MNIST/raw, FashionMNIST/raw, KMNIST/raw). Empty when absent.
std::pair<std::string, std::string> find_idx_files(const std::string& dir, bool train);
// Reads a whole file, gunzipping it when it starts with the gzip magic.
std::vector<char> read_maybe_gzip(const std::string& path);

}  // namespace vit
