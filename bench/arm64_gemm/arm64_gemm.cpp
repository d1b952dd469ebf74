// oneDNN's dnnl_sgemm against OpenBLAS's cblas_sgemm on aarch64, one thread, on the products
// vitcpp runs: the ViT-Ti/S/B batch-1 linear layers (197 rows) and mnist-seed's training
// products at batch 128 (6400 rows). Built and run by bench/arm64_gemm/run.sh (cross-compiled,
// under qemu-user); not part of the project's build.
//
//   arm64_gemm [--reps N] [--only NAME]     time both, alternating; check they agree
//   arm64_gemm --info                       only the libraries' versions and kernel choice
//   arm64_gemm --count NAME LIB CALLS       only CALLS calls of LIB (dnnl|openblas) on NAME,
//                                           for an instruction count around the program
//
// Row-major, as vitcpp calls them: C[M, N] = op(A) op(B), the ViT layers as x W^T with W
// [N, K]. Agreement: each C(i, j) of the two libraries within K * FLT_EPSILON * S(i, j),
// S = |op(A)| |op(B)| (the usual bound for a float dot product of length K; each library's
// error is below it, so a difference above it is a wrong answer, not rounding).
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);

namespace {

struct Shape {
  const char* name;
  bool ta, tb;
  int64_t M, N, K;
};

// ViT linear layers at batch 1 (x [197, D] W^T: qkv, proj, fc1, fc2), and mnist-seed's
// step at batch 128 (50 tokens, D = 8, MLP 32): forward fc1 and fc2, fc1's input gradient
// dX = dY W, its weight gradient dW = dY^T X.
const Shape kShapes[] = {
    {"ti.qkv", false, true, 197, 576, 192},      {"ti.proj", false, true, 197, 192, 192},
    {"ti.fc1", false, true, 197, 768, 192},      {"ti.fc2", false, true, 197, 192, 768},
    {"s.qkv", false, true, 197, 1152, 384},      {"s.proj", false, true, 197, 384, 384},
    {"s.fc1", false, true, 197, 1536, 384},      {"s.fc2", false, true, 197, 384, 1536},
    {"b.qkv", false, true, 197, 2304, 768},      {"b.proj", false, true, 197, 768, 768},
    {"b.fc1", false, true, 197, 3072, 768},      {"b.fc2", false, true, 197, 768, 3072},
    {"mnist.fc1", false, true, 6400, 32, 8},     {"mnist.fc2", false, true, 6400, 8, 32},
    {"mnist.fc1.dx", false, false, 6400, 8, 32}, {"mnist.fc1.dw", true, false, 32, 8, 6400},
};

struct Operands {
  std::vector<float> a, b, c;
  int64_t lda, ldb;
};

Operands make(const Shape& s) {
  Operands o;
  o.lda = s.ta ? s.M : s.K;  // A is [M, K], or [K, M] when transposed
  o.ldb = s.tb ? s.K : s.N;  // B is [K, N], or [N, K] when transposed
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  o.a.resize(size_t(s.M * s.K));
  o.b.resize(size_t(s.K * s.N));
  for (auto& x : o.a) x = u(rng);
  for (auto& x : o.b) x = u(rng);
  o.c.assign(size_t(s.M * s.N), 0.f);
  return o;
}

void run_dnnl(const Shape& s, const float* a, int64_t lda, const float* b, int64_t ldb, float* c) {
  const dnnl_status_t st =
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K, 1.f, a, lda, b, ldb, 0.f, c, s.N);
  if (st != dnnl_success) {
    std::fprintf(stderr, "arm64_gemm: dnnl_sgemm failed with status %d on %s\n", int(st), s.name);
    std::exit(1);
  }
}

void run_openblas(const Shape& s, const float* a, int64_t lda, const float* b, int64_t ldb, float* c) {
  cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, int(s.M),
              int(s.N), int(s.K), 1.f, a, int(lda), b, int(ldb), 0.f, c, int(s.N));
}

using Runner = void (*)(const Shape&, const float*, int64_t, const float*, int64_t, float*);

double seconds(Runner f, const Shape& s, Operands& o) {
  const auto t0 = std::chrono::steady_clock::now();
  f(s, o.a.data(), o.lda, o.b.data(), o.ldb, o.c.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Both libraries' C within K eps S of each other (see the top); prints the worst element.
bool agree(const Shape& s, Operands& o) {
  run_dnnl(s, o.a.data(), o.lda, o.b.data(), o.ldb, o.c.data());
  const std::vector<float> d = o.c;
  run_openblas(s, o.a.data(), o.lda, o.b.data(), o.ldb, o.c.data());
  std::vector<float> aa(o.a), ab(o.b), sum(o.c.size());
  for (auto& x : aa) x = std::fabs(x);
  for (auto& x : ab) x = std::fabs(x);
  run_openblas(s, aa.data(), o.lda, ab.data(), o.ldb, sum.data());
  size_t worst = 0, differ = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    differ += d[i] != o.c[i];
    const double tol = double(s.K) * FLT_EPSILON * sum[i];
    const double r = std::fabs(double(d[i]) - double(o.c[i])) / tol;
    if (r > worst_ratio) worst_ratio = r, worst = i;
  }
  const double tol = double(s.K) * FLT_EPSILON * sum[worst];
  std::printf(
      "  check %s: worst C[%zu, %zu] dnnl %.7g openblas %.7g |diff| %.3g tol %.3g (%.2f of tol); %zu of %zu "
      "differ\n",
      s.name, worst / size_t(s.N), worst % size_t(s.N), double(d[worst]), double(o.c[worst]),
      std::fabs(double(d[worst]) - double(o.c[worst])), tol, worst_ratio, differ, d.size());
  return worst_ratio <= 1.0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const Shape* find(const std::string& name) {
  for (const auto& s : kShapes)
    if (name == s.name) return &s;
  std::fprintf(stderr, "arm64_gemm: unknown shape %s\n", name.c_str());
  std::exit(2);
}

int usage() {
  std::fprintf(stderr, "usage: arm64_gemm [--reps N] [--only NAME] | --count NAME dnnl|openblas CALLS\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::string only;
  bool info = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--count" && i + 3 < argc) {
      const Shape& s = *find(argv[i + 1]);
      const std::string lib = argv[i + 2];
      const int calls = std::atoi(argv[i + 3]);
      if (lib != "dnnl" && lib != "openblas") return usage();
      Operands o = make(s);
      for (int c = 0; c < calls; ++c)
        (lib == "dnnl" ? run_dnnl : run_openblas)(s, o.a.data(), o.lda, o.b.data(), o.ldb, o.c.data());
      return 0;
    }
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--info") {
      info = true;
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      return usage();
    }
  }
  const dnnl_version_t* v = dnnl_version();
  std::printf("oneDNN %d.%d.%d; OpenBLAS core %s (%s); %d reps, medians\n", v->major, v->minor, v->patch,
              openblas_get_corename(), openblas_get_config(), reps);
  if (info) return 0;
  std::printf("%-14s %5s %5s %5s  %10s %10s  %8s\n", "shape", "M", "N", "K", "dnnl ms", "openblas ms",
              "dnnl/ob");
  bool ok = true;
  for (const auto& s : kShapes) {
    if (!only.empty() && only != s.name) continue;
    Operands o = make(s);
    ok = agree(s, o) && ok;
    std::vector<double> td, to;
    for (int r = 0; r < reps; ++r) {  // alternating, the first of each pair swapped every round
      if (r % 2 == 0) {
        td.push_back(seconds(run_dnnl, s, o));
        to.push_back(seconds(run_openblas, s, o));
      } else {
        to.push_back(seconds(run_openblas, s, o));
        td.push_back(seconds(run_dnnl, s, o));
      }
    }
    const double d = median(td) * 1e3, b = median(to) * 1e3;
    std::printf("%-14s %5lld %5lld %5lld  %10.2f %10.2f  %7.2fx\n", s.name, (long long)s.M, (long long)s.N,
                (long long)s.K, d, b, d / b);
    std::fflush(stdout);
  }
  if (!ok) std::fprintf(stderr, "arm64_gemm: the libraries disagree beyond the tolerance (above)\n");
  return ok ? 0 : 1;
}
