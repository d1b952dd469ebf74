// The single-process Comm and the status protocol's single-process behaviour: collectives
// are the identity, run_agreed passes a failure on unchanged (no MPI wording for users who
// never launched mpirun), and the build id is read from this executable.
#include <gtest/gtest.h>

#include <stdexcept>

#include "train/comm.h"

namespace vit {

TEST(Comm, OneProcessIsTheIdentity) {
  Comm& w = world();  // ctest does not start tests under mpirun
  EXPECT_EQ(w.rank(), 0);
  EXPECT_EQ(w.size(), 1);
  EXPECT_TRUE(w.root());
  float x[3] = {1.f, 2.f, 3.f};
  w.sum(x, 3);
  EXPECT_EQ(x[2], 3.f);
  EXPECT_EQ(w.gather("abc"), std::vector<std::string>{"abc"});
  double stats[2] = {4, 5};
  run_agreed(
      w, "phase", [] {}, stats, 2);
  EXPECT_EQ(stats[1], 5);
  check_agreement(w, {{"a", "b"}});  // nothing to compare with
}

TEST(Comm, RunAgreedPassesAFailureOnUnchangedInOneProcess) {
  Comm& w = world();
  EXPECT_THROW(run_agreed(w, "phase", [] { throw std::out_of_range("x"); }), std::out_of_range);
}

TEST(Comm, BuildIdIsThisExecutablesGnuBuildId) {
  const std::string id = build_id();
  EXPECT_NE(id, "unknown") << "link with --build-id (GCC's default on Debian)";
  EXPECT_EQ(id.size() % 2, 0u);
  EXPECT_EQ(id, build_id());
}

}  // namespace vit
