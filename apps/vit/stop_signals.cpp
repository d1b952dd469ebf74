#include "stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/file.h"

namespace vit::app {

namespace {
std::atomic<int> asked{0};  // lock-free, so a handler may store into it
static_assert(std::atomic<int>::is_always_lock_free);
bool silent = false;

void on_signal(int sig) {
  // The pipe the run prints into may have been stopped with it (Ctrl-C ends the `tee` of `vit
  // train | tee log` too): its later lines must not end it as SIGPIPE (141) before it ends as
  // asked (130, 143), its state written. Writes to the closed pipe fail instead.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);  // async-signal-safe, as write(2)
  int none = 0;
  if (!asked.compare_exchange_strong(none, sig) || silent) return;  // the first request speaks
  // write(2) is async-signal-safe; the progress bar may be mid-line, hence the newline first.
  // (After SIGHUP the terminal is gone: the write fails, and nothing else depends on it.)
  const char* msg = sig == SIGINT
                        ? "\nvit train: SIGINT: stopping after this step (Ctrl-C again stops at once)\n"
                    : sig == SIGHUP ? "\nvit train: SIGHUP: stopping after this step\n"
                                    : "\nvit train: SIGTERM: stopping after this step\n";
  (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
}

// Sets handler for SIGINT, SIGTERM and SIGHUP, with flags(sig), except where the signal was
// set to be ignored (nohup ignores SIGHUP); returns the signals set.
template <class Flags>
sigset_t install(void (*handler)(int), Flags flags) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = flags(sig);
    ::sigaction(sig, &sa, nullptr);
    sigaddset(&set, sig);
  }
  return set;
}

// The other commands' handler: the files being written lose their temporaries, then the
// signal ends the program as its default action does.
void remove_temporaries_then_end(int sig) {
  remove_live_temporaries();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// The thread that takes the signals (sigwait) while every thread started after
// catch_stop_signals blocks them: the first SIGINT, SIGTERM or SIGHUP asks to stop; a second
// SIGINT ends the process as its default action does.
void wait_for_signals(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (::sigwait(&set, &sig) != 0) continue;
    if (sig == SIGINT && asked.load() != 0) {
      ::signal(SIGINT, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, SIGINT);
      ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      ::raise(SIGINT);  // to this thread, where SIGINT is now let in: the default action
    }
    on_signal(sig);
  }
}
}  // namespace

void catch_stop_signals(bool quiet) {
  silent = quiet;
  // A second Ctrl-C is a person who wants out now: SIGINT takes its default action after the
  // first. SIGTERM stays a request however often it comes: a scheduler may deliver it twice
  // (to mpirun, which passes it on, and to the ranks themselves); SIGKILL is "now". SIGHUP (the
  // terminal or ssh session closed) is a request too: the run stops with a state to resume,
  // where its default action lost every step since the last epoch.
  const sigset_t set =
      install(on_signal, [](int sig) { return SA_RESTART | (sig == SIGINT ? SA_RESETHAND : 0); });
  // A handler runs on whichever thread the kernel picks, with its frame (the whole AVX-512
  // register state) pushed onto that thread's stack. A SIGTERM that landed in oneDNN's
  // AVX-512 sgemm corrupted the heap about one time in five (docs/reliability.md), so the
  // signals go to a thread of their own: blocked here, in the thread that computes, and so
  // in every thread it starts later (OpenMP's, the prefetcher's); taken by sigwait. The
  // handlers above stay for threads started before, whose masks still let the signals in.
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  static std::once_flag started;
  std::call_once(started, [set] { std::thread(wait_for_signals, set).detach(); });
}

int stop_signal() {
  return asked.load();
}

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case 0: return "a signal to another rank";  // this rank was not asked: another was
    default: return "a stop request";
  }
}

void remove_temporaries_on_stop_signals() {
  install(remove_temporaries_then_end, [](int) { return 0; });
}

}  // namespace vit::app
