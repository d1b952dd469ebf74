// Where an inference forward spends its time: one encoder block's kernels timed one by one
// at a model's shape (batch 1 for the ImageNet sizes, the recipe's batch for cifar-seed);
// the four products both through oneDNN's sgemm and on weights packed in place (`-packed`).
// Each op's time x depth, plus patch embedding and head (small), is the forward; compare
// the sum with `vit bench --mode infer`. Counters: GFLOP/s for the matrix products and the
// attention core (2 flops per multiply-add), GB/s of input+output for the element-wise ops.
//
//   build/bench/bench_block                                  # all shapes, threads from OpenMP
//   OMP_NUM_THREADS=1 build/bench/bench_block --benchmark_filter=vit-base
#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/cpu.h"
#include "core/arena.h"

namespace {

struct BlockShape {
  const char* name;
  int64_t B, T, C, H, hidden;
};

// T includes the class token: 14x14 patches + 1 for the 224-pixel models, 8x8 + 1 for cifar-seed,
// 7x7 + 1 for mnist-seed.
const BlockShape kShapes[] = {
    {"vit-tiny-16/b1", 1, 197, 192, 3, 768},     {"vit-small-16/b1", 1, 197, 384, 6, 1536},
    {"vit-base-16/b1", 1, 197, 768, 12, 3072},   {"vit-base-16/b4", 4, 197, 768, 12, 3072},
    {"vit-base-16/b16", 16, 197, 768, 12, 3072}, {"cifar-seed/b256", 256, 65, 192, 12, 768},
    {"mnist-seed/b64", 64, 50, 8, 2, 32},  // one shard's half of the recipe's batch of 128
};

struct Buffers {
  // Arenas: 64-byte aligned like the model's tensors (a std::vector starts 16 bytes into a
  // cache line here, which cost oneDNN's matmul on packed weights 10-15%).
  vit::Arena x, y, mean, rstd, lnw, lnb, qkv, wqkv, bqkv, probs, att, wproj, bproj, h, wfc1, bfc1, g, wfc2,
      bfc2, dqkv;
  explicit Buffers(const BlockShape& s) {
    const int64_t M = s.B * s.T, C = s.C, F = s.hidden;
    auto fill = [](vit::Arena& v, int64_t n, float scale) {
      v.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) v.data()[i] = scale * float((i * 7919) % 2001 - 1000) / 1000.f;
    };
    fill(x, M * C, 1.f), fill(y, M * C, 0.f), fill(mean, M, 0.f), fill(rstd, M, 0.f);
    fill(lnw, C, 1.f), fill(lnb, C, 0.1f);
    fill(qkv, M * 3 * C, 1.f), fill(wqkv, 3 * C * C, 0.05f), fill(bqkv, 3 * C, 0.1f);
    fill(probs, s.B * s.H * s.T * s.T, 0.f), fill(att, M * C, 0.f);
    fill(wproj, C * C, 0.05f), fill(bproj, C, 0.1f);
    fill(h, M * F, 1.f), fill(wfc1, F * C, 0.05f), fill(bfc1, F, 0.1f), fill(g, M * F, 0.f);
    fill(wfc2, C * F, 0.05f), fill(bfc2, C, 0.1f);
    fill(dqkv, M * 3 * C, 0.f);
  }
};

enum class Op { LayerNorm, Qkv, Attention, Proj, Residual, Fc1, Gelu, Fc2, AttentionBackward };
const char* op_name(Op op) {
  const char* names[] = {"layernorm", "qkv", "attention",         "proj", "residual", "fc1",
                         "gelu",      "fc2", "attention-backward"};
  return names[int(op)];
}
bool is_product(Op op) {
  return op == Op::Qkv || op == Op::Proj || op == Op::Fc1 || op == Op::Fc2;
}

// packed: the four products on weights packed in place (what inference at small batches
// runs) instead of through oneDNN's sgemm.
void run(benchmark::State& st, const BlockShape& s, Op op, bool packed) {
  Buffers b(s);
  const int64_t M = s.B * s.T, C = s.C, F = s.hidden, D = C / s.H;
  double flops = 0, bytes = 0;
  std::function<void()> f;
  // y[M,N] = x[M,K] w^T + bias.
  auto product = [&](vit::Arena& y, const vit::Arena& x, vit::Arena& w, const vit::Arena& bias, int64_t K,
                     int64_t N) {
    flops = 2.0 * M * K * N;
    if (packed) vit::cpu::pack_linear_weights(w.data(), N, K);
    f = [&, K, N] {
      if (packed)
        vit::cpu::linear_forward_packed(y.data(), x.data(), w.data(), bias.data(), M, K, N);
      else
        vit::cpu::linear_forward(y.data(), x.data(), w.data(), bias.data(), M, K, N);
    };
  };
  switch (op) {
    case Op::LayerNorm:
      f = [&] {
        vit::cpu::layernorm_forward(b.y.data(), b.mean.data(), b.rstd.data(), b.x.data(), b.lnw.data(),
                                    b.lnb.data(), M, C, 1e-6f);
      };
      bytes = 2.0 * M * C * 4;
      break;
    case Op::Qkv: product(b.qkv, b.x, b.wqkv, b.bqkv, C, 3 * C); break;
    case Op::Attention:
      f = [&] {
        vit::cpu::attention_forward(b.att.data(), b.probs.data(), nullptr, b.qkv.data(), nullptr, s.B, s.T, C,
                                    s.H, 0.f, 0);
      };
      flops = 2.0 * 2 * s.B * s.H * s.T * s.T * D;
      break;
    case Op::Proj: product(b.y, b.att, b.wproj, b.bproj, C, C); break;
    case Op::Residual:
      f = [&] {
        vit::cpu::residual_forward(b.x.data(), b.x.data(), b.y.data(), nullptr, s.B, s.T, C, 0.f, 0, 0.f, 0);
      };
      bytes = 3.0 * M * C * 4;
      break;
    case Op::Fc1: product(b.h, b.y, b.wfc1, b.bfc1, C, F); break;
    case Op::Gelu:
      f = [&] { vit::cpu::gelu_forward(b.g.data(), b.h.data(), M * F); };
      bytes = 2.0 * M * F * 4;
      break;
    case Op::Fc2: product(b.y, b.g, b.wfc2, b.bfc2, F, C); break;
    case Op::AttentionBackward:  // training's: from the forward's probabilities, dout = att
      vit::cpu::attention_forward(b.att.data(), b.probs.data(), nullptr, b.qkv.data(), nullptr, s.B, s.T, C,
                                  s.H, 0.f, 0);
      f = [&] {
        vit::cpu::attention_backward(b.dqkv.data(), b.att.data(), b.qkv.data(), b.probs.data(), nullptr, s.B,
                                     s.T, C, s.H, 0.f, 0);
      };
      flops = 4 * 2.0 * s.B * s.H * s.T * s.T * D;
      break;
  }
  for (auto _ : st) {
    f();
    benchmark::ClobberMemory();
  }
  if (flops > 0)
    st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  if (bytes > 0)
    st.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  for (const BlockShape& s : kShapes)
    for (bool packed : {false, true})
      for (Op op : {Op::LayerNorm, Op::Qkv, Op::Attention, Op::Proj, Op::Residual, Op::Fc1, Op::Gelu, Op::Fc2,
                    Op::AttentionBackward}) {
        if (packed && !is_product(op)) continue;
        const std::string name = std::string(s.name) + "/" + op_name(op) + (packed ? "-packed" : "");
        benchmark::RegisterBenchmark(name.c_str(), run, s, op, packed)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.2);
      }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
