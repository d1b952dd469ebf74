// The precision of the blocks' products, decided once per model: fp32, packed fp32 for few
// rows, bf16 or int8 inference, amp training. The model prepares its linear layers' weights for it
// (ops::prepare_linear); the backend picks the kernels from what it was given. While its
// weights are in an inference form the model refuses what needs the fp32 values (training:
// shards.cpp; saving and export: fp32_params), so io only reads and writes tensors.
#include "core/check.h"
#include "core/threads.h"
#include "model/vit.h"
#include "ops/ops.h"

namespace vit {

namespace {
// A replica (ViT::replica) reads its owner's weights as they were prepared: it changes none.
void check_owner(const ViT& m, const char* what) {
  VIT_CHECK(!m.is_replica(), what, ": a replica (ViT::replica) shares its model's weights; set it there");
}
}  // namespace

namespace {
Precision precision_of(const std::string& dtype) {
  VIT_CHECK(dtype == "fp32" || dtype == "bf16" || dtype == "int8", "dtype must be fp32, bf16 or int8, got '",
            dtype, "'");
  VIT_CHECK(dtype != "bf16" || ops::bf16_available(), "dtype bf16: ", ops::bf16_missing());
  return dtype == "bf16" ? Precision::bf16 : dtype == "int8" ? Precision::int8 : Precision::fp32;
}
}  // namespace

void ViT::prepare_block(size_t i, Precision p, bool release_fp32) {
  BlockLinears& b = lin_.infer[i];
  for (auto [name, lw] :
       {std::pair{"attn.qkv", &b.qkv}, {"attn.proj", &b.proj}, {"mlp.fc1", &b.fc1}, {"mlp.fc2", &b.fc2}}) {
    try {
      ops::prepare_linear(*lw, p, weights_packed_);
    } catch (const Error& e) {  // which weight: "int8: weight row 3 holds a NaN" named none
      throw Error(detail::concat("blocks.", i, ".", name, ".weight: ", e.what()));
    }
    // Each matrix released right after its copy: the peak is the fp32 weights plus one bf16 matrix.
    if (release_fp32) params_.release(size_t(lw->w.data - params_.data()), size_t(lw->w.numel()));
  }
}

void ViT::prepare_next_infer_block(const std::string& dtype) {
  check_owner(*this, "prepare_next_infer_block");
  const Precision p = precision_of(dtype);
  VIT_CHECK(p != Precision::fp32, "prepare_next_infer_block: fp32 keeps its fp32 weights");
  VIT_CHECK(!fp32_released_ && !weights_packed_ && released_blocks_ < cfg_.depth &&
                (released_blocks_ == 0 || dtype == released_dtype_),
            "prepare_next_infer_block(", dtype,
            "): at most depth blocks, in one dtype, on a model whose fp32 ", "weights are unpacked and kept");
  prepare_block(size_t(released_blocks_), p, true);
  released_dtype_ = dtype;
  ++released_blocks_;
}

void ViT::set_infer_dtype(const std::string& dtype, bool release_fp32) {
  check_owner(*this, "set_infer_dtype");
  const WeightsRewrite rewrite;  // the dtype's copies and flags change together, as a fork sees them
  const Precision p = precision_of(dtype);
  if (fp32_released_ && release_fp32 && dtype == infer_dtype_) return;  // so already
  VIT_CHECK(dtype == "fp32" || !weights_packed_, "dtype ", dtype,
            ": the fp32 weights are packed for inference");
  VIT_CHECK(!fp32_released_, "dtype ", dtype, ": the fp32 block weights were released for ", infer_dtype_,
            " inference; load the weights again");
  VIT_CHECK(!release_fp32 || dtype != "fp32", "dtype fp32 keeps its fp32 weights");
  if (released_blocks_ > 0) {  // a loader's prepare_next_infer_block: the rest of its blocks
    VIT_CHECK(release_fp32 && dtype == released_dtype_, "dtype ", dtype, ": the fp32 weights of ",
              released_blocks_, " blocks were released for ", released_dtype_, " inference");
  }
  for (size_t i = size_t(released_blocks_); i < lin_.infer.size(); ++i) prepare_block(i, p, release_fp32);
  released_blocks_ = 0;
  fp32_released_ = release_fp32;
  infer_dtype_ = dtype;
}

void ViT::set_amp(bool on) {
  check_owner(*this, "set_amp");
  VIT_CHECK(!on || ops::bf16_available(), "--amp: ", ops::bf16_missing());
  amp_ = on;
  if (!on)
    for (BlockLinears& b : lin_.train)
      for (ops::LinearWeights* lw : {&b.qkv, &b.proj, &b.fc1, &b.fc2})
        ops::prepare_linear(*lw, Precision::fp32);
}

void ViT::round_weights_bf16() {
  int64_t n = 0;
  for (const BlockWeights& w : W_.blocks)
    n += w.qkvw.numel() + w.projw.numel() + w.fc1w.numel() + w.fc2w.numel();
  amp_store_.resize(size_t((n + 1) / 2));  // allocates once
  uint16_t* p = reinterpret_cast<uint16_t*>(amp_store_.data());
  for (BlockLinears& b : lin_.train)
    for (ops::LinearWeights* lw : {&b.qkv, &b.proj, &b.fc1, &b.fc2}) {
      ops::prepare_linear(*lw, Precision::amp, false, p);
      p += lw->w.numel();
    }
}

void ViT::set_weights_packed(bool packed) {
  if (packed == weights_packed_) return;
  check_owner(*this, "pack_weights");
  VIT_CHECK(!fp32_released_, "pack_weights: the fp32 block weights were released for ", infer_dtype_,
            " inference");
  VIT_CHECK(infer_dtype_ == "fp32", "pack_weights: packing is for fp32 inference (--dtype ", infer_dtype_,
            ")");
  const WeightsRewrite rewrite;  // a fork waits: its child never finds a matrix half rewritten
  for (BlockLinears& b : lin_.infer)
    for (ops::LinearWeights* lw : {&b.qkv, &b.proj, &b.fc1, &b.fc2})
      ops::prepare_linear(*lw, Precision::fp32, packed);
  weights_packed_ = packed;
}

const float* ViT::fp32_params(const std::string& what) const {
  VIT_CHECK(!is_replica(), what, ": a replica (ViT::replica) holds no parameters; save the model it shares");
  VIT_CHECK(!weights_packed_, what, ": the model's weights are packed for inference");
  VIT_CHECK(!fp32_released_, what, ": the model's fp32 block weights were released for ", infer_dtype_,
            " inference");
  return params_.data();
}

bool ViT::pack_weights_if_faster(int64_t max_batch) {
  if (infer_dtype_ == "fp32" && ops::packed_linear_preferred(max_batch * cfg_.num_tokens())) pack_weights();
  return weights_packed_;
}

const ViT::BlockLinears& ViT::block_lin(const Acts& A, int64_t l) const {
  return (&A == &train_ ? lin().train : lin().infer)[size_t(l)];
}

}  // namespace vit
