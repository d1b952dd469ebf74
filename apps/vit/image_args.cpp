#include "image_args.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>

#include "core/check.h"
#include "data/folder.h"

namespace vit::app {

std::vector<std::string> image_files(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  // Standard input holds one image: a second - read what the first left (nothing, or the same
  // file again where the shell redirected a file).
  VIT_CHECK(std::count(args.begin(), args.end(), "-") <= 1,
            "- (standard input) is given more than once; it holds one image");
  for (const std::string& a : args) {
    if (!fs::is_directory(a)) {
      out.push_back(a == "-" ? "/dev/stdin" : a);  // "-": one image read from standard input
      continue;
    }
    std::vector<std::string> found;
    int64_t others = 0;  // image formats vitcpp does not decode, said (not skipped in silence)
    // Into linked folders too, as train and eval read image folders (torchvision's os.walk
    // with followlinks).
    for (const auto& e :
         fs::recursive_directory_iterator(a, fs::directory_options::follow_directory_symlink)) {
      std::string ext = e.path().extension().string();
      for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (e.is_regular_file() && (ext == ".png" || ext == ".jpg" || ext == ".jpeg"))
        found.push_back(e.path().string());
      else if (e.is_regular_file() && (ext == ".bmp" || ext == ".gif" || ext == ".webp" || ext == ".tif" ||
                                       ext == ".tiff" || ext == ".ppm" || ext == ".pgm"))
        ++others;
    }
    if (others > 0)
      std::cerr << "vit: note: " << a << ": " << others
                << " image file(s) in formats vitcpp does not read (.bmp, .gif, .webp, .tif, .ppm, .pgm) "
                   "left out\n";
    VIT_CHECK(!found.empty(), a, ": a folder without PNG or JPEG files");
    found = natural_sorted(std::move(found));
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace vit::app
