#include "outputs.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "core/check.h"
#include "train/run_dir.h"
#include "validators.h"

namespace vit::app {

namespace {
namespace fs = std::filesystem;

// Whether a and b name one file: the same inode where both exist, else the same absolute path.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) return fs::equivalent(a, b, ea) && !ea;
  // Made absolute first: weakly_canonical leaves a relative name with no existing part as
  // given, so "z.csv" and "./z.csv" differed.
  return fs::weakly_canonical(fs::absolute(a), ea) == fs::weakly_canonical(fs::absolute(b), eb) && !ea && !eb;
}
}  // namespace

void check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                   const std::vector<std::string>& inputs, bool makes_folders) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    std::error_code ec;
    VIT_CHECK(!fs::is_directory(path, ec), flag, " ", path, ": a directory, where a file is meant");
    const fs::path folder = fs::path(path).parent_path();
    if (!makes_folders && !folder.empty()) {
      std::error_code se;
      const fs::file_status st = fs::status(folder, se);
      VIT_CHECK(!se || se == std::errc::no_such_file_or_directory, flag, " ", path, ": the folder ",
                folder.string(), " cannot be reached (", se.message(), ")");
      VIT_CHECK(fs::exists(st), flag, " ", path, ": the folder ", folder.string(),
                " does not exist (create it first)");
      VIT_CHECK(fs::is_directory(st), flag, " ", path, ": ", folder.string(), " is not a directory");
    }
    // A device or pipe (/dev/null for two outputs, /dev/stdout) is written in place: nothing
    // of it can be lost.
    if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) continue;
    for (const std::string& in : inputs)
      VIT_CHECK(in.empty() || !same_file(path, in), flag, " ", path,
                ": the command reads that file; writing it would replace it (choose another name)");
    for (size_t j = 0; j < i; ++j)
      VIT_CHECK(outputs[j].second.empty() || !same_file(path, outputs[j].second), flag, " ", path,
                ": also given to ", outputs[j].first, "; each output needs a file of its own");
    // A folder the file cannot be written in (its permissions, a read-only mount) fails now,
    // not after the work (an evaluation's hours, its numbers never printed).
    const std::string where = folder.empty() ? "." : folder.string();
    VIT_CHECK(!fs::is_directory(where, ec) || ::access(where.c_str(), W_OK | X_OK) == 0, flag, " ", path,
              ": cannot write in the folder ", where, " (", std::strerror(errno), ")");
    // A training run's own files (its best checkpoint, its summary.csv) are its history:
    // `vit average -o RUN/best.safetensors` of checkpoint-N files replaced the run's best. Those
    // it has yet to write too: a checkpoint-3.safetensors of another model was averaged with
    // the run's by `vit average RUN`, then deleted by its --resume.
    if (fs::exists(fs::path(where) / "args.json", ec))
      VIT_CHECK(!is_run_file_name(fs::path(path).filename().string()), flag, " ", path,
                fs::exists(path, ec)
                    ? ": one of the files of the training run in " + where + "; it would be replaced"
                    : ": a name the training run in " + where + " writes its files under (and prunes)",
                ": choose another name");
  }
}

void check_png_name(const std::string& flag, const std::string& path) {
  if (path.empty() || path.starts_with("/dev/")) return;
  const std::string ext = fs::path(path).extension().string();
  std::string lower = ext;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  VIT_USAGE_CHECK(ext.empty() || lower == ".png", flag, " ", path, ": pictures are drawn as PNG only, not ",
                  ext.substr(1), "; give a .png name");
}

void route_stdout(const std::vector<std::pair<std::string, std::string*>>& outputs) {
  std::string taken;  // the flag writing standard output
  for (const auto& [flag, path] : outputs) {
    if (*path == "-") *path = "/dev/stdout";
    if (*path != "/dev/stdout" && *path != "/dev/fd/1" && *path != "/proc/self/fd/1") continue;
    VIT_USAGE_CHECK(taken.empty(), flag, " and ", taken,
                    " both write standard output; give one of them a file");
    taken = flag;
  }
  if (!taken.empty()) {
    std::cout.flush();
    std::cout.rdbuf(std::cerr.rdbuf());  // the command's lines; the file goes to descriptor 1
  }
}

}  // namespace vit::app
