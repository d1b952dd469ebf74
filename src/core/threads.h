// Thread count for every parallel loop and for the GEMM library (both use OpenMP).
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>

namespace vit {

// The most threads a call may ask for: far beyond any machine's CPUs, and below what makes
// libgomp fail to start its team (40,000 exited, 100,000 crashed on a 2-CPU machine).
inline constexpr int kMaxThreads = 4096;

// Parallel regions of exactly the threads asked, on the calling thread: OpenMP gives fewer
// with OMP_DYNAMIC=true, or past OMP_THREAD_LIMIT, and kernels that split their work by the
// count asked (oneDNN's, the packed products' queue) then left parts of it undone (ViT-B/16's
// logits under either variable had nothing to do with the image's). So dynamic teams are off
// and the count is at most the limit. set_num_threads and ScopedThreads do it.
void exact_teams();
int thread_limit();  // OMP_THREAD_LIMIT, or kMaxThreads without one
// n <= 0: leave the OpenMP default (at most OMP_THREAD_LIMIT); n > kMaxThreads throws.
void set_num_threads(int n);
int num_threads();
// A count for the library's calls from every thread of the process (vit::Classifier::set_threads,
// the Python module's vitcpp.set_threads): OpenMP's own count is per thread, so
// omp_set_num_threads on one thread leaves the calls made on others as they were. n <= 0:
// none; n > kMaxThreads throws. process_threads(): 0 when none is set.
void set_process_threads(int n);
int process_threads();
// The count OpenMP starts with, whatever has changed it since: OMP_NUM_THREADS's first number,
// else the CPUs this process may run on. For a library that keeps a count of its own beside
// others in one process (the Python module: importing PyTorch sets OpenMP's count to its own).
int default_threads();

// The calling thread's parallel regions (and the GEMM library's) run on n threads (n > 0)
// until the end of the scope, then on what they ran on before, whatever set_num_threads did
// meanwhile; n <= 0 keeps the count; n > kMaxThreads throws. Either way the teams are exact
// (exact_teams) within the scope.
// OpenMP keeps the thread count per calling thread, so this is what a model's own thread
// count needs: other threads' calls are not affected.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_;  // the thread count before
  bool dynamic_;  // OpenMP's dynamic teams before (OMP_DYNAMIC)
};

// Threads worth starting for a loop of `work` units (about one multiply-add each): one
// per kWorkPerThread units, at most num_threads(). Small ops then run on the calling
// thread and skip the fork/join, which costs microseconds on a quiet machine and far more
// when another process holds the second core.
inline constexpr int64_t kWorkPerThread = int64_t(1) << 16;
int threads_for(int64_t work);

// Binds each of the num_threads() OpenMP threads (the calling thread is the first) to a CPU of its
// own, when they are as many as the CPUs this process may run on and more than one, and neither
// OMP_PROC_BIND nor OMP_PLACES is set (libgomp binds as those say). Returns how many threads it
// bound, 0 when it left them free. Without it the kernel's scheduler, with another process busy,
// sometimes put both threads on one CPU while the other ran that process, and every parallel
// region then waited on a thread that was not running (docs/design.md, "Fast kernels and
// threads"). The vit program calls it as VIT_BIND says (apps/vit/commands.h: as
// binds_by_default by default, any run with on, nothing with off); a program embedding the library keeps its
// own threads' placement.
int bind_threads();
// Whether the vit program binds by default (VIT_BIND unset or auto): inference on two threads.
// More threads stay free: on a 16-vCPU machine ViT-S/16 at batch 1 ran 8x slower bound, and
// its batch 16 gained 3% (docs/design.md). Training stays free for its data loader's thread.
bool binds_by_default(int threads, bool training);
// Gives the calling thread every CPU the process had before bind_threads: for threads started
// after it (the data loader's), which would otherwise inherit the first thread's one CPU.
void unbind_this_thread();
// Whether bind_threads bound the threads.
bool threads_bound();

// OpenMP across fork(). libgomp keeps the pool of a thread's OpenMP threads with that thread,
// and fork() copies the pool's record into the child but not its threads: the child's first
// parallel region on the thread that called fork() waited for them forever (a Python
// multiprocessing worker, a prefork server; PyTorch 1.13 hangs there too). So before every
// fork() vitcpp releases the forking thread's pool (OpenMP 5's omp_pause_resource_all; the
// next region starts new threads, in the parent and in the child). Where that cannot be done
// (a fork() inside a parallel region), the pool is lost in the child, and run_openmp runs the
// thread's work on a helper thread there, which has a pool of its own.
// run_openmp(threads, f): f with `threads` OpenMP threads (ScopedThreads), on the calling
// thread or that helper; waits for it and rethrows f's exception.
void run_openmp(int threads, const std::function<void()>& f);
// Whether the calling thread forked this process and lost its OpenMP pool in doing so.
bool openmp_pool_lost();

// A mutex that a forked child finds unlocked. fork() copies a std::mutex as it stands: held by
// a thread of the parent (a Python thread inside a model's call), it is held forever in the
// child, whose one thread then waits on it (a multiprocessing worker calling that model).
// Each one is registered, and the child re-creates them all while it has one thread.
class ForkSafeMutex {
 public:
  ForkSafeMutex();
  ~ForkSafeMutex();
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;
  void lock() { m_.lock(); }
  void unlock() { m_.unlock(); }
  bool try_lock() { return m_.try_lock(); }
  void reset_in_child();  // the fork handler's: a new, unlocked mutex

 private:
  std::mutex m_;
};

// A rewrite of weights in place (a matrix packed for inference, or back; another dtype's
// copies made; new values loaded) against fork(): a child forked while another thread
// rewrote a matrix kept it half rewritten, with the flag that says its layout stale, and
// computed wrong logits without a word (Python: a DataLoader forking its workers beside an
// inference thread). A rewrite holds a WeightsRewrite; fork() waits for those in flight and
// holds off new ones until the child exists. Rewrites do not take Python's GIL, which the
// forking thread holds. One thread may nest them (a load that changes the dtype, which
// unpacks): only the outermost takes the lock.
class WeightsRewrite {
 public:
  WeightsRewrite();
  ~WeightsRewrite();
  WeightsRewrite(const WeightsRewrite&) = delete;
  WeightsRewrite& operator=(const WeightsRewrite&) = delete;
};

// Runs f(0) .. f(n-1), each on its own thread of one parallel region (fewer threads take
// several in order), with every parallel loop inside f on the calling thread alone. An
// exception thrown by any f is rethrown here, the one of the lowest index first, after all
// have finished.
void run_on_threads(int n, const std::function<void(int)>& f);
// Runs f(0) .. f(n-1) for independent items (a batch's images to decode), each of up to
// num_threads() threads taking a contiguous share in order. An item that throws ends its
// thread's share; the exception of the first failing item is rethrown here, after all have
// finished (one leaving an OpenMP loop would end the program instead).
void for_items_on_threads(int64_t n, const std::function<void(int64_t)>& f);
// Whether the caller runs inside a parallel region (where loops run on one thread).
bool in_parallel();

}  // namespace vit
