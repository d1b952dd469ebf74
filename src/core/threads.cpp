#include "core/threads.h"

#include <omp.h>
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/settings.h"

namespace vit {

namespace {
#ifdef __linux__
cpu_set_t process_cpus;  // the mask before bind_threads, written once before bound is set
#endif
std::atomic<int> bound{0};  // threads bound, 0 before bind_threads or when it left them free
}  // namespace

int bind_threads() {
#ifdef __linux__
  if (const int b = bound.load()) return b;
  if (setting("OMP_PROC_BIND") || setting("OMP_PLACES")) return 0;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return 0;
  const int n = num_threads();
  if (n < 2 || CPU_COUNT(&mask) != n) return 0;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && int(cpus.size()) < n; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  process_cpus = mask;
  std::atomic<int> done{0};
  // libgomp reuses these threads in every later region: each keeps its CPU.
#pragma omp parallel num_threads(n)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[size_t(omp_get_thread_num())], &one);
    if (omp_get_num_threads() == n && sched_setaffinity(0, sizeof one, &one) == 0) done.fetch_add(1);
  }
  if (done.load() != n) {  // not every thread could be placed: leave them all free
#pragma omp parallel num_threads(n)
    sched_setaffinity(0, sizeof process_cpus, &process_cpus);
    return 0;
  }
  bound.store(n);
  return n;
#else
  return 0;
#endif
}

bool binds_by_default(int threads, bool training) {
  return !training && threads <= 2;
}

void unbind_this_thread() {
#ifdef __linux__
  if (bound.load() > 0) sched_setaffinity(0, sizeof process_cpus, &process_cpus);
#endif
}

bool threads_bound() {
  return bound.load() > 0;
}

namespace {
void check_count(int n) {
  VIT_CHECK(n <= kMaxThreads, "threads: ", n, " is more than vitcpp runs (at most ", kMaxThreads, ")");
}
}  // namespace

int thread_limit() {
  const int limit = omp_get_thread_limit();
  return limit > 0 && limit < kMaxThreads ? limit : kMaxThreads;
}

void exact_teams() {
  omp_set_dynamic(0);
  if (omp_get_max_threads() > thread_limit()) omp_set_num_threads(thread_limit());
}

void set_num_threads(int n) {
  check_count(n);
  if (n > 0) omp_set_num_threads(n);
  exact_teams();
}

namespace {
std::atomic<int> process_count{0};
}

void set_process_threads(int n) {
  check_count(n);
  process_count.store(std::max(n, 0), std::memory_order_relaxed);
}

int process_threads() {
  return process_count.load(std::memory_order_relaxed);
}

int num_threads() {
  return omp_get_max_threads();
}

int default_threads() {
  if (const char* v = setting("OMP_NUM_THREADS")) {  // "4" or a list for nested levels, "4,2"
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && n > 0 && n <= INT32_MAX && (*end == '\0' || *end == ','))
      return int(std::min<long>(n, thread_limit()));
  }
#ifdef __linux__
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) > 0)
    return std::min(CPU_COUNT(&mask), thread_limit());
#endif
  return std::min(int(std::max(1u, std::thread::hardware_concurrency())), thread_limit());
}

ScopedThreads::ScopedThreads(int n) : previous_(omp_get_max_threads()), dynamic_(omp_get_dynamic()) {
  check_count(n);
  if (n > 0 && n != previous_) omp_set_num_threads(n);
  exact_teams();
}

ScopedThreads::~ScopedThreads() {
  if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
  if (dynamic_) omp_set_dynamic(dynamic_);
}

namespace {
// Set before a fork() on the thread that calls it: whether its OpenMP pool is released.
thread_local bool pool_released = false;
// Set in the child, on the thread that called fork(), when its pool could not be released.
thread_local bool pool_lost = false;

// The child's helper: one thread that runs the work of a thread whose pool was lost, one job
// at a time. Never destroyed (it may be running at exit); a fork from the child starts
// another.
class ForkHelper {
 public:
  ForkHelper() : thread_([this] { loop(); }) { thread_.detach(); }
  void run(const std::function<void()>& f) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &f;
    error_ = nullptr;
    wake_.notify_all();
    wake_.wait(lock, [&] { return job_ == nullptr; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return job_ != nullptr; });
      try {
        (*job_)();
      } catch (...) {
        error_ = std::current_exception();
      }
      job_ = nullptr;
      wake_.notify_all();
    }
  }
  std::mutex mu_;  // before thread_: the thread uses them
  std::condition_variable wake_;
  const std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
  std::thread thread_;
};
// Used by the thread whose pool was lost alone (the only one with pool_lost set), so unlocked.
ForkHelper* fork_helper = nullptr;

// OpenMP 5's pause releases the calling thread's pool: its threads end, and the child starts
// without any (a thread inside a parallel region cannot release it: -1). A pool already lost
// is left alone: its threads are not in this process to be ended.
void before_fork() {
  pool_released = !pool_lost && omp_pause_resource_all(omp_pause_soft) == 0;
}
void in_fork_child() {
  pool_lost = pool_lost || !pool_released;
  fork_helper = nullptr;  // the parent's helper thread, if any, is not in this process
}
#ifdef __linux__
[[maybe_unused]] const int fork_handlers = pthread_atfork(before_fork, nullptr, in_fork_child);
#endif
}  // namespace

bool openmp_pool_lost() {
  return pool_lost;
}

namespace {
// Every ForkSafeMutex, and the lock of the list. The fork handlers hold the lock across
// fork(), so the list is whole in the child, where it and each mutex are made anew.
std::mutex registry_lock;
std::set<ForkSafeMutex*>& registry() {
  static auto* r = new std::set<ForkSafeMutex*>;  // never destroyed: mutexes may outlive statics
  return *r;
}
// Shared by the rewrites of weights (WeightsRewrite), held alone by a fork.
std::shared_mutex& rewrites() {
  static auto* m = new std::shared_mutex;  // never destroyed: a rewrite may run at exit
  return *m;
}
void registry_before_fork() {
  rewrites().lock();  // waits for the rewrites in flight
  registry_lock.lock();
}
void registry_in_parent() {
  registry_lock.unlock();
  rewrites().unlock();
}
void registry_in_child() {
  new (&registry_lock) std::mutex;  // held by the forking thread, which is this one
  new (&rewrites()) std::shared_mutex;
  for (ForkSafeMutex* m : registry()) m->reset_in_child();
}
#ifdef __linux__
[[maybe_unused]] const int registry_handlers =
    pthread_atfork(registry_before_fork, registry_in_parent, registry_in_child);
#endif
}  // namespace

ForkSafeMutex::ForkSafeMutex() {
  std::lock_guard<std::mutex> g(registry_lock);
  registry().insert(this);
}

ForkSafeMutex::~ForkSafeMutex() {
  std::lock_guard<std::mutex> g(registry_lock);
  registry().erase(this);
}

namespace {
thread_local int rewrite_depth = 0;  // a shared lock taken twice by one thread can deadlock
}

WeightsRewrite::WeightsRewrite() {
  if (rewrite_depth++ == 0) rewrites().lock_shared();
}

WeightsRewrite::~WeightsRewrite() {
  if (--rewrite_depth == 0) rewrites().unlock_shared();
}

void ForkSafeMutex::reset_in_child() {
  new (&m_) std::mutex;  // the parent's holder is not in this process: it never unlocks it
}

void run_openmp(int threads, const std::function<void()>& f) {
  const auto run = [&] {
    const ScopedThreads own(threads);
    f();
  };
  if (!pool_lost) return run();
  if (!fork_helper) fork_helper = new ForkHelper;
  fork_helper->run(run);
}

int threads_for(int64_t work) {
  const int64_t n = work / kWorkPerThread;
  const int most = omp_get_max_threads();
  return n < 1 ? 1 : n < most ? int(n) : most;
}

void run_on_threads(int n, const std::function<void(int)>& f) {
  if (n <= 0) return;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
#pragma omp parallel num_threads(n)
  {
    omp_set_num_threads(1);  // this thread's nested loops and oneDNN calls: one thread
    const int step = omp_get_num_threads();
    for (int i = omp_get_thread_num(); i < n; i += step) {
      try {
        f(i);
      } catch (...) {
        errors[size_t(i)] = std::current_exception();
      }
    }
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void for_items_on_threads(int64_t n, const std::function<void(int64_t)>& f) {
  const int T = int(std::min<int64_t>(n, num_threads()));
  run_on_threads(T, [&](int t) {
    for (int64_t i = n * t / T; i < n * (t + 1) / T; ++i) f(i);
  });
}

bool in_parallel() {
  return omp_in_parallel() != 0;
}

}  // namespace vit
