// The C++ side of the Python module: a model as Python holds it (python/vitcpp/__init__.py
// wraps it with timm's names). Plain C++ over the library, no Python types: module.cpp
// binds it and turns arrays into pointers. Every call that computes takes the model's
// lock, since a ViT owns its activation buffers: two Python threads may call one model,
// one at a time (the GIL is released meanwhile, so other models run in parallel).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/threads.h"
#include "data/preprocess.h"
#include "io/pretrained.h"

namespace vit::python {

struct LoadArgs {
  int64_t num_classes = -1;  // >= 0: a new head of that many classes (0: none) when it differs
  int64_t img_h = 0, img_w = 0;
  std::string labels_file;
  std::string global_pool;   // presets only: token, avg or map
  std::string pos_resample;  // "timm", "hf" or "" (LoadOptions::pos_resample)
  uint64_t seed = 0;         // presets only: the random initialization
  // A preset or timm architecture name the checkpoint must be (timm.create_model(name,
  // checkpoint_path=...)): a bare state dict takes its heads and the name's settings from it,
  // and a checkpoint of another shape is refused. "" takes the checkpoint as it is.
  std::string model_name;
  // timm's regularization rates (create_model's drop_rate, drop_path_rate, ...), set in the
  // config for training to take (vitcpp.train(model)); < 0: the model's own.
  float drop_rate = -1, drop_path_rate = -1, attn_drop_rate = -1, proj_drop_rate = -1, pos_drop_rate = -1;
  void adjust(ViTConfig& c) const;
};

class Engine {
 public:
  // A checkpoint as `vit predict --checkpoint` reads it (vitcpp, timm, Hugging Face,
  // vit-pytorch), or a preset / timm architecture name with random weights.
  static std::unique_ptr<Engine> load(const std::string& path, const LoadArgs& a);
  static std::unique_ptr<Engine> create(const std::string& name, const LoadArgs& a);
  // A model training left (vitcpp.train), its weights copied into a model that infers.
  static std::unique_ptr<Engine> adopt(std::unique_ptr<ViT> trained, std::vector<std::string> class_names);

  const ViTConfig& config() const { return m_->config(); }
  const std::string& format() const { return format_; }
  const std::vector<std::string>& class_names() const { return class_names_; }
  const std::vector<std::string>& notes() const { return notes_; }
  const std::string& pos_resample() const { return pos_resample_; }
  // The precision the checkpoint was written for: "int8" (vit quantize's), else "fp32".
  const std::string& stored_dtype() const { return stored_dtype_; }
  // Where a pickled model came from (format, resampling, notes), given back on unpickling:
  // its weights travel as a vitcpp checkpoint.
  void set_origin(std::string format, std::string pos_resample, std::vector<std::string> notes);
  int64_t num_params() const;

  // x[B, C, H, W] at the model's size, run as `vit predict -b B` and `vit bench -b B` run it:
  // the fp32 weights packed where that is faster for B images, unpacked where not (a batch
  // size across that line repacks them), so the same bits. logits[B, K]; pooled[B, D] and tokens[B, T, D]
  // (either may be null); attn[depth, B, H, T, T] and pool_attn[B, H, T] (may be null).
  // mask[B, N] (may be null): the patches the attention sees (1) and hides (0), as ViT::infer.
  void logits(const float* x, int64_t B, float* out);
  void features(const float* x, int64_t B, const uint8_t* mask, float* pooled, float* tokens);
  void attention(const float* x, int64_t B, float* attn, float* pool_attn);
  // timm's forward_intermediates: the residual stream after each block of `ids` (0-based,
  // distinct) into out[ids.size(), B, T, D], and forward_features' tokens[B, T, D].
  void intermediates(const float* x, int64_t B, const uint8_t* mask, const std::vector<int64_t>& ids,
                     float* out, float* tokens);
  // What `vit attention` draws, per image: maps[B, grid_h * grid_w] by method "cls",
  // "dist", "rollout" or "pool" (viz::attention_map), at block `layer` (-1: the last), of
  // head `head` (-1: the heads' mean).
  void maps(const float* x, int64_t B, const std::string& method, int64_t layer, int64_t head, float* maps);

  // "fp32", "bf16" (needs AVX-512 bf16 or AMX) or "int8": the blocks' products.
  void set_dtype(const std::string& dtype);
  const std::string& dtype() const { return m_->infer_dtype(); }

  // The same weights with a new head (num_classes, 0: none; zero-initialized, as the ViT
  // paper's fine-tuning and vit train --pretrained --num-classes; timm's reset_classifier), or at
  // a new input size (pos_embed resampled as the checkpoint's loading would, timm's or
  // transformers' way, or the sin-cos table recomputed).
  std::unique_ptr<Engine> with_head(int64_t num_classes, uint64_t seed) const;
  std::unique_ptr<Engine> resized(int64_t img_h, int64_t img_w) const;

  // The parameters by timm's name whose names start with one of `prefixes` (every one when
  // empty): (name, shape, fp32 values; valid until the next call). Reading the blocks' packed
  // matrices unpacks them first, exactly (the next forward packs them again); the head and
  // norms are never packed, so timm's forward_head costs no repacking.
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
    const float* data;
  };
  std::vector<Param> params(const std::vector<std::string>& prefixes = {}) const;
  // The same names and shapes, data null: read without the model's lock (the table of a
  // model never changes) and without unpacking anything.
  std::vector<Param> param_shapes(const std::vector<std::string>& prefixes = {}) const;

  // Writes these parameters (name, float32 values of its shape) into the model in place, as
  // torch's load_state_dict copies into its parameters: no second model and no file (the way
  // through a temporary checkpoint held 4 more copies of the weights). The model keeps its
  // dtype: its bf16 or int8 copies are made anew from the new weights.
  void set_params(const std::vector<std::pair<std::string, const float*>>& values);
  // A model of its own with the same weights (the fp32 ones of an int8 or bf16 model, whose
  // copies are made anew), dtype, class names and origin: copy.deepcopy, at one copy of the
  // weights (through a checkpoint in memory it took three).
  std::unique_ptr<Engine> clone() const;
  // fp32: an int8 model's vitcpp file in the fp32 weights it keeps (pickling), not vit
  // quantize's int8 file.
  std::vector<std::string> save(const std::string& dir, const std::string& format, bool fp32 = false) const;
  void export_onnx(const std::string& path, bool int8) const;

  ForkSafeMutex& lock() { return mu_; }  // a forked child finds it unlocked

 private:
  Engine() = default;
  void prepare(int64_t B);    // packed fp32 weights where faster for B images, as vit predict
  const float* fp32() const;  // the weights as fp32 values (unpacked)
  // This model's weights in a model of config cfg: the tensors of the same name and shape,
  // pos_embed resampled (resample), the others as init_weights(seed) draws them.
  std::unique_ptr<Engine> copy_with(const ViTConfig& cfg, bool resample, uint64_t seed) const;

  std::unique_ptr<ViT> m_;
  std::string format_, pos_resample_ = "timm";  // pos_resample_: Pretrained::pos_resample
  std::string stored_dtype_ = "fp32";
  std::vector<std::string> class_names_, notes_;
  ForkSafeMutex mu_;
};

// vitcpp's threads for every later call, as vit --threads; n <= 0: the default, OMP_NUM_THREADS
// or else every CPU this process may run on. The module's own count: each call sets OpenMP's for
// the thread it runs on while it runs (compute, bindings.h) and gives the previous one back, so
// another library's setting (importing PyTorch sets OpenMP's count to PyTorch's own, 1 on some
// machines) neither changes vitcpp's nor is changed by it.
void set_threads(int n);
int threads();

}  // namespace vit::python
