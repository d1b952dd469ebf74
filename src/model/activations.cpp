// The model's activation arenas: ViT::carve lays out every tensor a forward (and, training,
// its backward) writes for a batch of B, one block's when inferring, the class-token tail's
// rows when that runs; layout allocates only when the batch grows.
#include <algorithm>
#include <atomic>

#include "model/vit.h"

namespace vit {

namespace {

// Carves tensors out of one allocation, 64-byte aligned. With a null base it only counts.
class Carver {
 public:
  explicit Carver(float* base) : base_(base) {}
  Tensor take(Shape s) {
    Tensor t(base_ ? base_ + used_ : nullptr, s);
    used_ += (numel(s) + 15) / 16 * 16;
    return t;
  }
  int64_t used() const { return used_; }

 private:
  float* base_;
  int64_t used_ = 0;
};

}  // namespace

int64_t ViT::carve(const ViTConfig& cfg, Acts& A, float* base, int64_t B, bool training, bool amp,
                   bool tail) {
  const int64_t T = cfg.num_tokens(), C = cfg.embed_dim, N = cfg.num_patches(), M = cfg.mlp_dim,
                H = cfg.num_heads, K = cfg.num_classes, P = cfg.patch_dim(), I = cfg.attn_dim();
  const int64_t nblocks = training ? cfg.depth : 1;  // inference reuses one block's buffers
  const bool attn_drop = training && cfg.attn_drop_rate > 0.f;
  Carver c(base);
  // A bf16 copy of n values, in n / 2 floats (null when only counting).
  auto bf16 = [&](int64_t n) { return reinterpret_cast<uint16_t*>(c.take({(n + 1) / 2}).data); };
  A.amp = amp;
  A.tail = tail;
  A.cols = c.take({B * N, P});
  A.pe = c.take({B * N, C});
  if (cfg.patch_norm) {  // the patches normed (the projection's input), and its output normed
    A.cols_ln = c.take({B * N, P});
    A.cols_mean = c.take({B * N});
    A.cols_rstd = c.take({B * N});
    A.pe_ln = c.take({B * N, C});
    A.pe_mean = c.take({B * N});
    A.pe_rstd = c.take({B * N});
  }
  A.x0 = c.take({B, T, C});
  if (cfg.pre_norm) {
    A.x_pre = c.take({B, T, C});
    A.pre_mean = c.take({B * T});
    A.pre_rstd = c.take({B * T});
  }
  A.branch = c.take({B * T, C});
  // A block's norm1 and qkv (every row), then what follows the attention for Tq query rows
  // per sample: T, or 1 in the class-token tail (run_forward).
  auto qkv_part = [&](BlockActs& a) {
    a.ln1 = c.take({B * T, C});
    a.ln1_mean = c.take({B * T});
    a.ln1_rstd = c.take({B * T});
    a.qkv = c.take({B, T, 3 * I});
    if (training && amp) a.ln1_b = bf16(B * T * C);
  };
  auto rest_part = [&](BlockActs& a, int64_t Tq) {
    const int64_t R = B * Tq;
    // Inference keeps no probabilities: the attention core works through them a head at a
    // time in a per-thread scratch (cifar-seed at batch 256: 52 MB written and never read),
    // or into the caller's buffer when attention maps are asked for (run_forward's attn).
    a.probs = training ? c.take({B, H, Tq, T}) : Tensor(nullptr, {B, H, Tq, T});
    if (attn_drop) a.probs_drop = c.take({B, H, Tq, T});
    a.ao = c.take({B, Tq, I});
    a.r1 = c.take({B, Tq, C});
    a.ln2 = c.take({R, C});
    a.ln2_mean = c.take({R});
    a.ln2_rstd = c.take({R});
    a.mlp.h = c.take({R, M});
    a.mlp.act = c.take({R, M});
    a.out = c.take({B, Tq, C});
    if (training && cfg.layer_scale()) {
      a.br1 = c.take({R, C});
      a.br2 = c.take({R, C});
    }
    if (training && amp) a.ao_b = bf16(R * I), a.mlp.x_bf16 = bf16(R * C), a.mlp.act_bf16 = bf16(R * M);
  };
  A.blocks.assign(nblocks, {});
  for (int64_t l = 0; l < nblocks; ++l) {
    qkv_part(A.blocks[l]);
    // Training's last block keeps the tail's rows only; inference's one block serves all.
    if (!(training && tail && l == nblocks - 1)) rest_part(A.blocks[l], T);
  }
  A.last = {};
  if (tail) {
    rest_part(A.last, cfg.head_tokens());
    A.xcls = c.take({B, cfg.head_tokens(), C});
  }
  if (cfg.norm_all_tokens()) {
    A.lnf = c.take({B * T, C});
    A.lnf_mean = c.take({B * T});
    A.lnf_rstd = c.take({B * T});
  }
  A.pool = {};
  if (cfg.map_pool()) {  // the attention pool, one latent query
    PoolActs& p = A.pool;
    p.q = c.take({1, C});
    p.kv = c.take({B * T, 2 * C});
    const int64_t K = T - cfg.first_pooled();  // the tokens it pools
    p.probs = training ? c.take({B, H, 1, K}) : Tensor(nullptr, {B, H, 1, K});
    p.ao = c.take({B, 1, C});
    p.y = c.take({B, C});
    p.ln = c.take({B, C});
    p.ln_mean = c.take({B});
    p.ln_rstd = c.take({B});
    p.branch = c.take({B, C});
    p.mlp.h = c.take({B, M});
    p.mlp.act = c.take({B, M});
    if (training) {
      p.dq = c.take({B, 1, C});
      p.dqsum = c.take({1, C});
      p.dkv = c.take({B * T, 2 * C});
      p.dy = c.take({B, C});
      p.dao = c.take({B, 1, C});
      p.dln = c.take({B, C});
      p.dact = c.take({B, M});
    }
  }
  const int64_t HB = cfg.head_tokens() * B;  // the rows the head reads
  A.pooled = c.take({HB, C});
  A.pooled_mean = c.take({HB});
  A.pooled_rstd = c.take({HB});
  A.pooled_ln = c.take({HB, C});
  A.logits = c.take({B, K});
  if (cfg.head_dist) A.logits_dist = c.take({B, K});
  if (training) {
    A.dpooled_ln = c.take({HB, C});
    A.dpooled = c.take({HB, C});
    if (cfg.head_dist) A.dlogits_half = c.take({B, K});
    A.dx = c.take({B, T, C});
    A.dbranch = c.take({B * T, C});
    A.dact = c.take({B * T, M});
    A.dln = c.take({B * T, C});
    A.dao = c.take({B, T, I});
    A.dqkv = c.take({B, T, 3 * I});
    A.dpe = c.take({B * N, C});
    if (cfg.patch_norm) {
      A.dpe_raw = c.take({B * N, C});
      A.dcols_ln = c.take({B * N, P});
    }
    if (tail) A.dxcls = c.take({B, cfg.head_tokens(), C});
  }
  return c.used();
}

void ViT::layout(Acts& A, Arena& arena, int64_t B, bool training, bool amp) {
  // Allocates only when B grows past what was allocated. A is marked laid out for no batch
  // while its views change: a process forked meanwhile (Python: multiprocessing beside a
  // thread that calls the model) has no such thread to finish the layout, and its next call,
  // at the batch A was laid out for before, took the views half changed to the new batch
  // ("patch columns: expected shape [16, 192], got [128, 192]"). It lays out anew now.
  A.B = -1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool tail = use_cls_tail();
  arena.resize(size_t(carve(cfg_, A, nullptr, B, training, amp, tail)));
  carve(cfg_, A, arena.data(), B, training, amp, tail);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  A.B = B;
}

size_t ViT::planned_activation_bytes(const ViTConfig& cfg, int64_t B, bool training, int shards, bool amp) {
  Acts scratch;
  const int64_t R = std::clamp<int64_t>(shards, 1, B);
  size_t floats = 0;
  for (int64_t r = 0; r < R; ++r)
    floats += size_t(
        carve(cfg, scratch, nullptr, B * (r + 1) / R - B * r / R, training, amp, cls_tail_applies(cfg)));
  return floats * sizeof(float);
}

size_t ViT::activation_bytes() const {
  size_t floats = acts_.size() + infer_acts_.size();
  for (const auto& l : shards_) floats += l->acts_.size() + l->infer_acts_.size();
  return floats * sizeof(float);
}

}  // namespace vit
