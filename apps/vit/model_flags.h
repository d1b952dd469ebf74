// Model selection flags shared by subcommands: --model PRESET or --config FILE.json, then
// per-field overrides named like timm's (--img-size, --patch-size, --embed-dim, ...).
#pragma once
#include <CLI/CLI.hpp>
#include <iosfwd>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/open.h"
#include "io/pretrained.h"
#include "model/config.h"

namespace vit::app {

struct ModelFlags {
  std::string model = "mnist-seed", config_file;
  std::vector<int64_t> img_size, patch_size;
  int64_t in_chans = 0, embed_dim = 0, depth = 0, num_heads = 0, dim_head = 0, mlp_dim = 0, num_classes = 0;
  std::string pool, pos_embed, act_layer;
  bool no_class_token = false, pool_include_prefix = false, patch_norm = false, distilled = false;
  float drop = -1, drop_path = -1, attn_drop = -1;
  std::vector<float> mean, std;  // input normalization, one value or one per channel

  void add_to(CLI::App& cmd);
  ViTConfig resolve() const;  // validated
  // The overrides that keep the architecture (fine-tuning a pretrained one): dropouts,
  // drop path, input mean/std.
  void apply_training_overrides(ViTConfig& c) const;
  // The flags that change the architecture (which a pretrained checkpoint fixes), if any.
  std::string architecture_flag() const;
};

// --mean or --std given as one value or one per channel, as `channels` values.
std::vector<float> per_channel(const std::vector<float>& v, int64_t channels, const char* flag);

// Training augmentation, timm's flag names (vit train; vit samples draws it to look at).
struct AugFlags {
  AugmentConfig aug;
  std::vector<float> scale, ratio, color_jitter;
  bool force_color_jitter = false;  // --color-jitter with --aa too (timm's create_transform argument)
  void add_to(CLI::App& cmd);
  // The flags' augmentation, validated, also for augmentations that are off (--crop-pad -3,
  // --ratio 2 1); the normalization (mean, std) is the caller's to set.
  AugmentConfig config() const;
  // Whether --aa is 3-Augment (timm's test: '3a' in the string, which --aa's parser holds to
  // "3a" and "3a-mstdX").
  bool three_augment() const { return aug.auto_augment.find("3a") != std::string::npos; }
  // Whether --color-jitter is given and left out for --aa (config() drops it), and the note
  // that says so. timm keeps it beside 3-Augment.
  bool jitter_dropped() const {
    return !color_jitter.empty() && !aug.auto_augment.empty() && !force_color_jitter && !three_augment();
  }
  // Notes on the augmentation flags given that do nothing (--aa-fill or --aa-ops without --aa,
  // inc with the mild ops, --color-jitter left out for --aa), for vit train and vit samples.
  std::vector<std::string> notes(const CLI::App& cmd) const;
  static constexpr const char* kJitterDropped =
      "--color-jitter: no effect with --aa, as in timm's train.py (RandAugment replaces it; "
      "--force-color-jitter keeps it; 3-Augment, --aa 3a, keeps it too)";
};

// How images become the model's input (eval, predict): the model config's eval transform,
// with --interpolation, --crop-pct and --crop-mode overriding its parts; and --dtype, the
// precision of the blocks' matrix products.
// --progress auto|bar|log|none (on stderr; `auto_means` says when auto draws a bar) and
// --log-seconds, as vit eval and vit predict take them.
void add_progress_flags(CLI::App& cmd, std::string& progress, double& log_seconds,
                        const std::string& auto_means);

struct InputFlags {
  std::string interpolation, crop_mode, dtype;  // dtype: ViT::set_infer_dtype ("": the file's)
  double crop_pct = 0;                          // 0: the config's
  void add_to(CLI::App& cmd);
  InputSpec spec(const ViTConfig& cfg) const;  // validated
  // Loads the checkpoint for inference in batches of up to max_batch images: --dtype (by
  // default the precision the file was written for: Pretrained::stored_dtype), each block
  // prepared as it is read (LoadOptions::infer_dtype), then the packed fp32 weights where
  // they are faster (ViT::pack_weights_if_faster).
  Pretrained load_for_inference(const struct LoadFlags& load, int64_t max_batch) const;
};

// A checkpoint of any layout (vitcpp, timm, Hugging Face: a .safetensors file or a
// directory, or a vit train run directory) for eval, predict, attention, export and quantize,
// with --model (the name it is read as: load_pretrained_as), --img-size (pos_embed resampled,
// --pos-resample), --num-heads (when the file does not say), --labels and --last.
struct LoadFlags {
  std::string checkpoint, model, labels, pos_resample;
  std::vector<int64_t> img_size;
  int64_t num_heads = 0;
  bool last = false;  // a run directory's last.safetensors rather than its best
  void add_to(CLI::App& cmd);
  // Prints what the loader adapted to stderr. infer_dtype: LoadOptions::infer_dtype.
  Pretrained load(const std::string& infer_dtype = "") const;
};
// LoadOptions from --img-size S|H W, --num-heads and --pos-resample.
LoadOptions load_options(const std::vector<int64_t>& img_size, int64_t num_heads,
                         const std::string& pos_resample = "");
// --model NAME for a checkpoint (timm's validate.py and inference.py take `--model NAME
// --checkpoint FILE`): the help, shared by the commands that read one.
extern const char* const kCheckpointModelHelp;
// The checkpoint `path` loaded with `o`, as the model `name` is where one is given
// (load_pretrained_as; `flag` names the option that gave it).
Pretrained load_checkpoint(const std::string& path, const std::string& name, const LoadOptions& o,
                           const char* flag);
// --pos-resample timm|hf into value.
void add_pos_resample(CLI::App& cmd, std::string& value);
// A warning on stderr, naming `flag` (--dtype bf16, --amp), where bf16 runs emulated, slower
// than fp32 (a CPU without AVX512-BF16 or AMX).
void warn_if_bf16_emulated(const char* flag);
void print_notes(const Pretrained& p,
                 std::ostream& os);  // the checkpoint's notes, "vit: FILE (FORMAT): note"
// --skip-bad-images: the count and the first 10 files left out, with their reasons.
// A dataset's notes ("note: ...") and the images --skip-bad-images left out.
void print_data_notes(const DataSources& d, std::ostream& os);

}  // namespace vit::app
