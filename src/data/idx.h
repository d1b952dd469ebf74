// IDX files (MNIST, Fashion-MNIST): big-endian magic 0x00000803 for images [N, H, W] and
// 0x00000801 for labels [N], raw or gzip-compressed. Errors name the file and the problem.
#pragma once
#include <string>

#include "data/image_set.h"

namespace vit {

// Reads an image file and its label file into an ImageSet with 10 classes.
ImageSet read_idx(const std::string& images_path, const std::string& labels_path, int64_t num_classes = 10);
// Finds the split's pair of files in dir: {train,t10k}-{images-idx3,labels-idx1}-ubyte, with
// or without .gz (also the '.' spelling, train-images.idx3-ubyte). Empty when absent.
std::pair<std::string, std::string> find_idx_files(const std::string& dir, bool train);
// Reads a whole file, gunzipping it when it starts with the gzip magic.
std::vector<char> read_maybe_gzip(const std::string& path);

}  // namespace vit
