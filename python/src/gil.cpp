#include "gil.h"

#include <pthread.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

namespace vit::python {

namespace {
std::mutex mu;
std::condition_variable idle;
int in_flight = 0;
bool closing = false;
std::thread::id closer;  // the thread that closed the gate: its own later calls (atexit) still run

// A forked child has none of its parent's other threads: none of their calls is in flight
// there, and the lock may have been held by one of them.
void in_fork_child() {
  new (&mu) std::mutex;
  new (&idle) std::condition_variable;
  in_flight = 0;
}
[[maybe_unused]] const int fork_handler = pthread_atfork(nullptr, nullptr, in_fork_child);
}  // namespace

void wait_for_exit() {
  for (;;) pause();  // a signal handled on this thread wakes it: wait again
}

bool enter_call() {
  std::lock_guard<std::mutex> lock(mu);
  if (closing && std::this_thread::get_id() != closer) return false;
  ++in_flight;
  return true;
}

void leave_call() {
  std::lock_guard<std::mutex> lock(mu);
  if (--in_flight == 0) idle.notify_all();
}

bool calls_closing() {
  std::lock_guard<std::mutex> lock(mu);
  return closing;
}

void close_calls() {
  pybind11::gil_scoped_release nogil;  // the calls may need it to end (a training's last lines)
  std::unique_lock<std::mutex> lock(mu);
  closing = true;
  closer = std::this_thread::get_id();
  idle.wait(lock, [] { return in_flight == 0; });
}

}  // namespace vit::python
