// Whole-file reads and crash-safe writes: data goes to a temporary file in the same
// directory, is flushed to disk, then renamed over the target, so a crash or a full disk
// never leaves a half-written file under the real name.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace vit {

std::vector<char> read_file_bytes(const std::string& path);
std::string read_text_file(const std::string& path);
// Writes the concatenation of parts atomically; throws vit::Error naming the file on any
// failure (and removes the temporary file).
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts);
inline void write_file_atomic(const std::string& path, std::string_view data) {
  write_file_atomic(path, std::vector<std::string_view>{data});
}

}  // namespace vit
