// Error lines on stderr (vit/core/error.h).
#include "core/check.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>

namespace vit {

void print_error_line(std::string_view line) {
  std::cout.flush();
  std::fflush(stdout);
  std::string text(line);
  if (text.empty() || text.back() != '\n') text += '\n';
  // One write for the whole line; the loop only finishes a partial write (a pipe that is full).
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is closed: nowhere left to say it
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace vit
