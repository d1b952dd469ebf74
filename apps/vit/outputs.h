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

// A picture's output path: PNG is the one format drawn, so a name that says another
// (x.svg, x.pdf, x.jpg) is refused, naming the flag (it got a PNG under that name). A name
// without an extension, or a device, is taken.
void check_png_name(const std::string& flag, const std::string& path);

// Standard output by name, as Unix tools take it: an output path "-" becomes /dev/stdout
// (which the atomic writer writes in place). When one of `outputs` is standard output ("-",
// /dev/stdout), the command's own lines go to stderr from here on, so that stdout holds that
// file alone (`vit predict --results-file - ... | sort`). outputs: {flag, path}; two of them
// on standard output are refused.
void route_stdout(const std::vector<std::pair<std::string, std::string*>>& outputs);

}  // namespace vit::app
