#include "outputs.h"

#include <filesystem>
#include <system_error>

#include "vit/core/error.h"

namespace vit::app {

namespace {
namespace fs = std::filesystem;

// Whether a and b name one file: the same inode where both exist, else the same absolute path.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) return fs::equivalent(a, b, ea) && !ea;
  return fs::weakly_canonical(a, ea) == fs::weakly_canonical(b, eb) && !ea && !eb;
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
  }
}

}  // namespace vit::app
