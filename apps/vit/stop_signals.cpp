#include "stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace vit::app {

namespace {
std::atomic<int> asked{0};  // lock-free, so a handler may store into it
static_assert(std::atomic<int>::is_always_lock_free);
bool silent = false;

void on_signal(int sig) {
  int none = 0;
  if (!asked.compare_exchange_strong(none, sig) || silent) return;  // the first request speaks
  // write(2) is async-signal-safe; the progress bar may be mid-line, hence the newline first.
  const char* msg = sig == SIGINT
                        ? "\nvit train: SIGINT: stopping after this step (Ctrl-C again stops at once)\n"
                        : "\nvit train: SIGTERM: stopping after this step\n";
  (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
}
}  // namespace

void catch_stop_signals(bool quiet) {
  silent = quiet;
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    // A second Ctrl-C is a person who wants out now: SIGINT takes its default action after
    // the first. SIGTERM stays a request however often it comes: a scheduler may deliver it
    // twice (to mpirun, which passes it on, and to the ranks themselves); SIGKILL is "now".
    sa.sa_flags = SA_RESTART | (sig == SIGINT ? SA_RESETHAND : 0);
    ::sigaction(sig, &sa, nullptr);
  }
}

int stop_signal() {
  return asked.load();
}

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case 0: return "a signal to another rank";  // this rank was not asked: another was
    default: return "a stop request";
  }
}

}  // namespace vit::app
