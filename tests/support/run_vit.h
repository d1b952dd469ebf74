// Runs the vit program (VIT_BINARY) through the shell (so tests may prefix environment
// variables) and returns its exit code and everything it printed (stdout and stderr).
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace vit::test {

struct Result {
  int code;
  std::string out;
};
using CliResult = Result;

// env: "NAME=value ..." placed before the program; args: the command line after it.
inline Result run_vit(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + (env.empty() ? "" : " ") + std::string(VIT_BINARY) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(p.release());
  return {WEXITSTATUS(status), out};
}

inline Result run(const std::string& args) {
  return run_vit(args);
}

// The last line of out (without its newline): a --json command's object where stderr,
// merged before it, may hold a warning (emulated bf16 on a CPU without AVX512-BF16).
inline std::string last_line(const std::string& out) {
  const size_t end = out.size() && out.back() == '\n' ? out.size() - 1 : out.size();
  const size_t begin = out.rfind('\n', end ? end - 1 : 0);
  return out.substr(begin == std::string::npos ? 0 : begin + 1,
                    end - (begin == std::string::npos ? 0 : begin + 1));
}

}  // namespace vit::test
