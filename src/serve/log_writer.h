// The server's log (one line per request, and the models' and stop's lines), written on a
// thread of its own: a line is queued and the caller goes on. Written under a lock by each
// request's thread, a stdout that nobody read (a pipe a harness never drains, `| sleep`)
// stopped every HTTP thread after about 1,300 requests, health checks included, and SIGTERM
// then never ended the server. Lines past a full queue are dropped and counted, and said once
// the stream takes lines again.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace vit::serve {

class LogWriter {
 public:
  // fd: the descriptor behind out when the program's own stdout (-1: none): written with
  // write(2) then, not through the stream, so that a thread left blocked on a stream nobody
  // reads holds no lock the program's exit takes (stdout's, flushed at exit: SIGTERM then
  // never ended the server).
  explicit LogWriter(std::ostream& out, int fd = -1, size_t max_lines = 65536);
  ~LogWriter();  // waits at most 2 s for the queued lines to be written (flush)
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  void line(std::string text);  // queued, never blocking on the stream
  // Waits until every queued line is written and flushed, or `within` has passed (the stream
  // blocked): whether they were.
  bool flush(std::chrono::milliseconds within);

 private:
  struct State;  // shared with the writer thread, which may outlive this
  std::shared_ptr<State> state_;
};

}  // namespace vit::serve
