// The images named on a command line (vit predict, vit attention).
#pragma once
#include <string>
#include <vector>

namespace vit::app {

// The image files of the arguments: a file as it is ("-": one image read from standard
// input), a folder as the PNG and JPEG files below it (any depth, linked folders too) in
// timm's order for inference.py's folder (natural_sorted on the path: img2 before img10, case
// left out). A folder without images is an error; image formats vitcpp does not read are
// counted in a note on stderr.
std::vector<std::string> image_files(const std::vector<std::string>& args);

}  // namespace vit::app
