#include "serve/connection_pool.h"

#include <iostream>
#include <system_error>
#include <utility>

namespace vit::serve {

namespace {
// The pool whose job this thread runs, while its connection has not begun a request.
thread_local ConnectionPool* t_unstarted = nullptr;
}  // namespace

ConnectionPool::ConnectionPool(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}

ConnectionPool::~ConnectionPool() {
  shutdown();
}

void ConnectionPool::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  jobs_.push_back(std::move(fn));
  waiting_ = jobs_.size();
  // A thread more only when none is free for this job.
  if (idle_ < jobs_.size() && threads_.size() < max_threads_) try {
      threads_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      // No thread to be had (ulimit -u, ulimit -v, a container's pids limit): the
      // connection waits for a running one (the exception ended the server); with none yet,
      // the accepting thread serves it, one connection at a time, but alive. Said once.
      if (!thread_failure_said_) {
        thread_failure_said_ = true;
        std::cerr << "vit serve: cannot start a connection thread (" << e.what()
                  << "): connections wait for the " << threads_.size()
                  << " running (the limit on processes, ulimit -u, or on memory, ulimit -v; or lower "
                     "--http-threads)"
                  << std::endl;
      }
      if (threads_.empty()) {
        std::function<void()> job = std::move(jobs_.back());
        jobs_.pop_back();
        waiting_ = jobs_.size();
        lock.unlock();
        job();
        return;
      }
    }
  cv_.notify_one();
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

size_t ConnectionPool::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size() + unstarted_;
}

void ConnectionPool::request_started() {
  if (ConnectionPool* pool = std::exchange(t_unstarted, nullptr)) {
    std::lock_guard<std::mutex> lock(pool->mu_);
    --pool->unstarted_;
  }
}

size_t ConnectionPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void ConnectionPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      cv_.wait(lock, [this] { return !jobs_.empty() || stop_; });
      --idle_;
      if (jobs_.empty()) return;  // stopping, and nothing left to serve
      fn = std::move(jobs_.front());
      jobs_.pop_front();
      waiting_ = jobs_.size();
      ++unstarted_;  // under the lock with the pop: pending() never misses the connection
    }
    t_unstarted = this;
    fn();
    request_started();  // a connection closed without a request
  }
}

}  // namespace vit::serve
