#include "serve/log_writer.h"

#include <unistd.h>

#include <cerrno>
#include <ostream>
#include <utility>

namespace vit::serve {

struct LogWriter::State {
  std::ostream& out;
  int fd;
  size_t max_lines;
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<std::string> lines;
  int64_t dropped = 0;
  bool writing = false, done = false;
  State(std::ostream& o, int f, size_t m) : out(o), fd(f), max_lines(m) {}

  // text to the descriptor, whole (a failed write drops the rest: a closed stream).
  void write_fd(const std::string& text) {
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      at += size_t(n);
    }
  }

  void run() {
    std::unique_lock lock(mu);
    for (;;) {
      wake.wait(lock, [&] { return done || !lines.empty() || dropped > 0; });
      if (lines.empty() && dropped == 0) return;  // done, and nothing left
      std::deque<std::string> batch;
      batch.swap(lines);
      const int64_t lost = std::exchange(dropped, 0);
      writing = true;
      lock.unlock();  // the stream may block here: callers go on queueing
      std::string text;
      if (lost > 0)
        text = "vit serve: " + std::to_string(lost) + " log line(s) dropped: the log's stream was not read\n";
      for (const std::string& l : batch) text += l + "\n";
      if (fd >= 0) {
        write_fd(text);
      } else {
        out << text;
        out.flush();
      }
      lock.lock();
      writing = false;
      if (lines.empty()) idle.notify_all();
    }
  }
};

LogWriter::LogWriter(std::ostream& out, int fd, size_t max_lines)
    : state_(std::make_shared<State>(out, fd, max_lines)) {
  if (fd >= 0) out.flush();  // what the stream holds goes first
  // The thread holds the state: on a stream that never takes a line again it is left behind
  // (detached) at the end rather than holding the program.
  std::thread([s = state_] { s->run(); }).detach();
}

LogWriter::~LogWriter() {
  flush(std::chrono::milliseconds(2000));
  std::lock_guard lock(state_->mu);
  state_->done = true;
  state_->wake.notify_all();
}

void LogWriter::line(std::string text) {
  std::lock_guard lock(state_->mu);
  if (state_->lines.size() < state_->max_lines)
    state_->lines.push_back(std::move(text));
  else
    ++state_->dropped;
  state_->wake.notify_one();
}

bool LogWriter::flush(std::chrono::milliseconds within) {
  std::unique_lock lock(state_->mu);
  return state_->idle.wait_for(lock, within, [&] { return state_->lines.empty() && !state_->writing; });
}

}  // namespace vit::serve
