// Child processes for end-to-end tests that popen cannot express: limits set in the child
// before exec (setrlimit, another user), and a pid to kill -9 at a chosen moment.
#pragma once
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"

namespace vit::test {

struct ChildOptions {
  std::string log;               // stdout and stderr go here (required)
  long long max_file_size = -1;  // RLIMIT_FSIZE in bytes; -1 = unlimited
  int uid = -1;                  // run as this user and group (needs root); -1 = as we are
  // SIGINT and SIGTERM start at their default action (as from a terminal, whatever ctest's
  // parent ignored), except these, which start ignored (as in a script's background job).
  std::vector<int> ignored_signals = {};
};

// The exit status of a child that could not become ChildOptions::uid.
constexpr int kCannotSwitchUser = 125;

// Starts `program args...` (split on spaces) and returns its pid.
inline pid_t spawn(const std::string& program, const std::string& args, const ChildOptions& o) {
  std::vector<std::string> words{program};
  std::istringstream is(args);
  for (std::string w; is >> w;) words.push_back(w);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int fd = ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) ::_exit(126);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  for (int sig : {SIGINT, SIGTERM}) ::signal(sig, SIG_DFL);
  for (int sig : o.ignored_signals) ::signal(sig, SIG_IGN);
  if (o.max_file_size >= 0) {
    // Ignored, SIGXFSZ no longer kills the writer: write() fails with EFBIG instead, as a
    // full disk would fail it with ENOSPC.
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit r{rlim_t(o.max_file_size), rlim_t(o.max_file_size)};
    if (::setrlimit(RLIMIT_FSIZE, &r) != 0) ::_exit(126);
  }
  if (o.uid >= 0 &&
      (::setgroups(0, nullptr) != 0 || ::setgid(gid_t(o.uid)) != 0 || ::setuid(uid_t(o.uid)) != 0))
    ::_exit(kCannotSwitchUser);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

struct Finished {
  int code = -1;    // exit status, or -1 when killed by a signal
  int signal = 0;   // the signal that ended it
  std::string out;  // what it printed
};

inline Finished wait_for(pid_t pid, const std::string& log) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  Finished f;
  if (WIFEXITED(status)) f.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) f.signal = WTERMSIG(status);
  f.out = read_text_file(log);
  return f;
}

inline Finished run_child(const std::string& program, const std::string& args, const ChildOptions& o) {
  return wait_for(spawn(program, args, o), o.log);
}

}  // namespace vit::test
