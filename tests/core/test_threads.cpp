// Binding the vit program's threads to CPUs (core/threads.h): each OpenMP thread on a CPU of
// its own, and a thread started afterwards given every CPU back. Binding lasts for the process:
// ctest runs each test in a process of its own (run together, the second sees one CPU and skips).
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/threads.h"

namespace vit {
namespace {
std::vector<int> my_cpus() {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}
}  // namespace

TEST(Threads, BindThreadsGivesEachThreadACpuAndUnbindGivesThemBack) {
  const std::vector<int> all = my_cpus();
  const int n = int(all.size());
  if (n < 2) GTEST_SKIP() << "one CPU here: nothing to bind";
  for (const char* v : {"OMP_PROC_BIND", "OMP_PLACES"})
    if (std::getenv(v)) GTEST_SKIP() << v << " is set: binding is not vit's here";
  set_num_threads(n);
  ASSERT_EQ(bind_threads(), n);
  EXPECT_TRUE(threads_bound());
  EXPECT_EQ(bind_threads(), n);  // once per process; a second call changes nothing
  std::vector<std::vector<int>> seen(static_cast<size_t>(n));
#pragma omp parallel num_threads(n)
  seen[size_t(omp_get_thread_num())] = my_cpus();
  std::set<int> used;
  for (int t = 0; t < n; ++t) {
    ASSERT_EQ(seen[size_t(t)].size(), 1u)
        << "thread " << t << " may run on " << seen[size_t(t)].size() << " CPUs";
    used.insert(seen[size_t(t)][0]);
  }
  EXPECT_EQ(used, std::set<int>(all.begin(), all.end())) << "the threads do not cover the CPUs one each";
  // A thread started now inherits this thread's one CPU (what the data loader's worker would
  // be stuck on) until it unbinds itself.
  size_t inherited = 0, unbound = 0;
  std::thread([&] { inherited = my_cpus().size(); }).join();
  std::thread([&] {
    unbind_this_thread();
    unbound = my_cpus().size();
  }).join();
  EXPECT_EQ(inherited, 1u);
  EXPECT_EQ(unbound, all.size());
}

TEST(Threads, BindThreadsLeavesFewerThreadsThanCpusFree) {
  const int n = int(my_cpus().size());
  if (n < 2) GTEST_SKIP() << "one CPU here: nothing to bind";
  set_num_threads(n - 1);
  EXPECT_EQ(bind_threads(), 0);
  EXPECT_FALSE(threads_bound());
  std::vector<size_t> seen(static_cast<size_t>(n - 1));
#pragma omp parallel num_threads(n - 1)
  seen[size_t(omp_get_thread_num())] = my_cpus().size();
  for (size_t s : seen) EXPECT_EQ(s, size_t(n));
}

// The vit program's default (VIT_BIND unset): inference on two threads binds; more threads,
// one thread and training stay free (on 16 vCPUs binding made ViT-S/16 at batch 1 8x slower).
TEST(Threads, OnlyInferenceOnTwoThreadsBindsByDefault) {
  EXPECT_TRUE(binds_by_default(2, false));
  for (int n : {3, 4, 16, 64}) EXPECT_FALSE(binds_by_default(n, false)) << n << " threads";
  EXPECT_FALSE(binds_by_default(2, true)) << "training";
  EXPECT_FALSE(binds_by_default(16, true)) << "training";
}

}  // namespace vit

namespace vit {
namespace {
int region_threads() {
  int n = 0;
#pragma omp parallel
  {
    if (omp_get_thread_num() == 0) n = omp_get_num_threads();
  }
  return n;
}
}  // namespace

// Runs child() in a forked child with 30 s to live (SIGALRM); returns its exit status, or
// 100 + the signal that ended it (114: SIGALRM, it hung).
template <typename F>
int in_child(F&& child) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    _exit(child());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// fork() after the parent ran parallel regions on the forking thread: libgomp copies the
// record of that thread's pool, not its threads, and a region in the child waited for them
// forever (core/threads.h). vitcpp releases the pool before the fork: the child's regions run
// as usual, on the calling thread, with every thread asked for.
TEST(Threads, AForkedChildRunsParallelRegions) {
  omp_set_num_threads(2);
  ASSERT_EQ(region_threads(), 2);  // the parent's pool: one more thread, waiting
  const int status = in_child([] {
    if (openmp_pool_lost()) return 2;
    int n = 0;
    run_openmp(2, [&] { n = region_threads(); });
    return n == 2 && region_threads() == 2 ? 0 : 3;
  });
  EXPECT_EQ(status, 0) << "2: the pool was lost, 3: not 2 threads, 114: a region hung";
  EXPECT_EQ(region_threads(), 2) << "the parent's next region";
}

// A fork() inside a parallel region cannot release the pool; there run_openmp runs the work on
// a helper thread of the child's, again and again, and passes its exception on.
TEST(Threads, RunOpenmpWorksWhereAForkLostThePool) {
  omp_set_num_threads(2);
  ASSERT_EQ(region_threads(), 2);
  int status = -1;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0)
      status = in_child([] {
        if (!openmp_pool_lost()) return 2;
        int n = 0, m = 0;
        run_openmp(2, [&] { n = region_threads(); });
        run_openmp(2, [&] { m = region_threads(); });  // the same helper again
        bool rethrown = false;
        try {
          run_openmp(2, [] { throw std::runtime_error("f failed"); });
        } catch (const std::runtime_error& e) {
          rethrown = std::string(e.what()) == "f failed";
        }
        // A fork from here: the grandchild's calls run on a helper of its own.
        const int grandchild = in_child([] {
          int k = 0;
          run_openmp(2, [&] { k = region_threads(); });
          return openmp_pool_lost() && k == 2 ? 0 : 5;
        });
        return n != 2 || m != 2 ? 3 : !rethrown ? 4 : grandchild;
      });
  }
  EXPECT_EQ(status, 0)
      << "2: not marked as lost, 3: not 2 threads, 4: the exception lost, 5: the grandchild's "
         "call, 114: hung";
}
}  // namespace vit
