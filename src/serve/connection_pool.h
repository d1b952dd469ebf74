// The threads that serve vit serve's connections: cpp-httplib gives each connection a thread
// from its task queue for as long as the client keeps it open (keep-alive), so a fixed pool
// serves its first N clients and leaves the others waiting until one of those closes. Two
// changes over httplib's ThreadPool:
// - threads start as connections need them, up to the cap (--http-threads), and are kept;
// - waiting() counts the connections waiting for a thread: while one does, each answer closes
//   its connection (Connection: close), the client reconnects behind the waiting ones, and
//   every client takes its turn.
// - pending() counts the connections accepted but not yet begun (waiting for a thread, or
//   handed one and not yet read): SIGTERM waits for them to begin before the server stops
//   listening, which would close them unanswered.
// mnist-seed, 128 wrk connections: p99 5.8 s on httplib's 64 threads; 22 ms on 64 of these,
// 16 ms on 256 (docs/serving.md, "More connections than threads").
#pragma once
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vit::serve {

class ConnectionPool : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(size_t max_threads);
  ~ConnectionPool() override;
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs the connections queued, then joins the threads

  size_t waiting() const { return waiting_.load(std::memory_order_relaxed); }
  size_t threads() const;  // started so far
  // Connections waiting for a thread, and those handed one whose first request has not begun.
  size_t pending() const;
  // Called as each request begins (the pre-routing handler): this thread's connection has begun.
  static void request_started();

 private:
  void work();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;       // threads waiting for a job
  size_t unstarted_ = 0;  // jobs running whose connection has not begun a request
  bool stop_ = false;
  bool thread_failure_said_ = false;
  std::atomic<size_t> waiting_{0};  // jobs_.size(), read without the lock
};

}  // namespace vit::serve
