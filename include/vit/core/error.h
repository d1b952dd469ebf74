// Errors: one exception type for everything a user can cause (bad file, bad shape, bad flag).
// Messages name the thing (file, tensor, flag) and what is wrong with it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "vit/export.h"

namespace vit {

// Exported (VIT_API) so that a program catches it by type across a shared libvitcpp.
class VIT_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Writes line (a newline is added when it lacks one) to stderr in one write(2), after
// flushing stdout. Under mpirun each rank's stdout and stderr are relayed separately, a
// chunk at a time: a message streamed in pieces ("vit: error: " << what) can have another
// line land inside it. One write keeps it whole.
VIT_API void print_error_line(std::string_view line);

}  // namespace vit
