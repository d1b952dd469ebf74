// The files a command writes, checked before it does any work: an evaluation of 10,000 images
// should not end in "rename failed (Is a directory)", and an output named as one of the
// command's inputs (--predictions best.safetensors) would replace that input.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace vit::app {

// outputs: {flag, path} with empty paths skipped; inputs: files the command reads. Throws
// vit::Error naming the flag when a path is a directory, is one of the inputs, or is given
// to two flags, or (unless the command makes the folders, makes_folders) when its folder
// does not exist.
void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::string>& inputs, bool makes_folders = false);

}  // namespace vit::app
