// A fresh directory under the system temp dir, removed with everything in it when the
// test ends.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace vit::test {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "t") {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("vitcpp_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace vit::test
