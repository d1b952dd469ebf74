#include "model_flags.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "core/check.h"
#include "io/formats.h"
#include "ops/ops.h"
#include "validators.h"

namespace vit::app {

namespace {
// timm's deprecated names (timm 0.6's vit_base_patch16_224_in21k) build the name.tag timm maps
// them to; timm.create_model warns, and so does vit (Python's create_model does too).
void note_deprecated_name(const std::string& name) {
  const std::string_view now = detail::current_timm_name(name);
  if (now != name)
    std::cerr << "vit: note: --model " << name << ": timm's deprecated name of " << now
              << ", built as that\n";
}
}  // namespace

void ModelFlags::add_to(CLI::App& cmd) {
  cmd.add_option(
         "--model", model,
         "model preset: " +
             [] {
               std::string s;
               for (auto& n : preset_names()) s += (s.empty() ? "" : ", ") + n;
               return s +
                      "; or a timm architecture vitcpp runs, built as timm.create_model(NAME) "
                      "(vit_base_patch16_224, vit_so400m_patch14_siglip_384, deit3_small_patch16_224, ...; "
                      "vitcpp.list_models() lists the 142)";
             }())
      ->capture_default_str()
      ->each(note_deprecated_name);
  cmd.add_option("--config", config_file, "model config JSON (instead of --model)");
  // Two-value options keep their values together even where others take the last one.
  cmd.add_option("--img-size", img_size, "image size: S or H W")
      ->expected(1, 2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--patch-size", patch_size, "patch size: P or PH PW")
      ->expected(1, 2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--in-chans", in_chans, "input channels")->check(positive());
  cmd.add_option("--embed-dim", embed_dim, "embedding dimension")->check(positive());
  cmd.add_option("--depth", depth, "number of encoder blocks")->check(positive());
  cmd.add_option("--num-heads", num_heads, "attention heads")->check(positive());
  cmd.add_option("--dim-head", dim_head,
                 "width of each attention head (vit-pytorch's dim_head; default: embed dim / heads)")
      ->check(positive());
  cmd.add_option("--mlp-dim", mlp_dim, "MLP hidden size")->check(positive());
  cmd.add_option("--num-classes", num_classes, "classes of the head")->check(positive());
  cmd.add_option("--pool", pool,
                 "global pool: token, avg or map (timm's attention pool with a learned query, SigLIP's)")
      ->check(CLI::IsMember({"token", "avg", "map"}));
  cmd.add_flag("--no-class-token", no_class_token,
               "no class token (timm's class_token=False; needs --pool avg or map)");
  cmd.add_flag("--pool-include-prefix", pool_include_prefix,
               "avg or map pooling takes the class and register tokens too (vit-pytorch's pool='mean', timm "
               "1.0's pool_include_prefix; by default they are left out)");
  cmd.add_flag("--distilled", distilled,
               "DeiT's distillation token and a second head on it, the logits the mean of the two (timm's "
               "deit_*_distilled); --teacher trains that head on a teacher's predictions, as DeiT");
  cmd.add_flag("--patch-norm", patch_norm,
               "LayerNorms before and after the patch projection, as vit-pytorch's patch embedding");
  cmd.add_option(
         "--pos-embed", pos_embed,
         "position embedding: learn, sincos (the seeds' fixed 1-D table) or sincos2d (big_vision's and "
         "SimpleViT's fixed 2-D table)")
      ->check(CLI::IsMember({"learn", "sincos", "sincos2d"}));
  cmd.add_option("--act-layer", act_layer,
                 "the MLP's activation (timm's act_layer): gelu (exact), gelu_tanh (tanh approximation: "
                 "SigLIP's) or quick_gelu (x sigmoid(1.702 x): OpenAI CLIP's)")
      ->check(CLI::IsMember({"gelu", "gelu_tanh", "quick_gelu"}));
  cmd.add_option("--drop", drop, "dropout rate (projections, MLP and head; a distilled head has none)")
      ->check(rate());
  cmd.add_option("--drop-path", drop_path, "stochastic depth rate")->check(rate());
  cmd.add_option("--attn-drop", attn_drop, "attention dropout rate")->check(rate());
  cmd.add_option("--mean", mean,
                 "input normalization mean: one value or one per channel (default: the model's)")
      ->expected(1, 4)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--std", std, "input normalization std: one value or one per channel (default: the model's)")
      ->expected(1, 4)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

ViTConfig ModelFlags::resolve() const {
  ViTConfig c = config_file.empty() ? named_config(model) : ViTConfig::load(config_file);
  auto pair = [](const std::vector<int64_t>& v, int64_t& a, int64_t& b, const char* flag) {
    if (v.empty()) return;
    VIT_USAGE_CHECK(v.size() <= 2, flag, " takes one size or two (height width), got ", v.size(), " values");
    a = v[0];
    b = v.size() > 1 ? v[1] : v[0];
  };
  pair(img_size, c.img_h, c.img_w, "--img-size");
  pair(patch_size, c.patch_h, c.patch_w, "--patch-size");
  if (in_chans > 0 && in_chans != c.in_chans) {
    // Checked before the per-channel vectors are filled (--in-chans 4294967296 filled 34 GB).
    VIT_USAGE_CHECK(in_chans <= 1024, "--in-chans ", in_chans, " is implausibly large (at most 1024)");
    c.in_chans = in_chans;
    c.mean.assign(in_chans, 0.5f);
    c.std.assign(in_chans, 0.5f);
  }
  if (embed_dim > 0) c.embed_dim = embed_dim;
  if (depth > 0) c.depth = depth;
  if (num_heads > 0) c.num_heads = num_heads;
  if (dim_head > 0) c.dim_head = dim_head;
  if (mlp_dim > 0) c.mlp_dim = mlp_dim;
  if (num_classes > 0) c.num_classes = num_classes;
  if (!pool.empty()) {
    c.global_pool = pool;
  }
  if (!pos_embed.empty()) c.pos_embed = pos_embed;
  if (!act_layer.empty()) c.act_layer = act_layer;
  if (no_class_token) c.class_token = false;
  if (pool_include_prefix) c.pool_include_prefix = true;
  if (patch_norm) c.patch_norm = true;
  if (distilled) c.dist_token = c.head_dist = true;
  apply_training_overrides(c);
  c.validate();
  return c;
}

std::vector<float> per_channel(const std::vector<float>& v, int64_t channels, const char* flag) {
  VIT_USAGE_CHECK(v.size() == 1 || int64_t(v.size()) == channels, flag,
                  channels == 1
                      ? std::string(" takes 1 value (the model has one input channel)")
                      : " takes 1 or " + std::to_string(channels) + " values (one per input channel)",
                  ", got ", v.size());
  return v.size() == 1 ? std::vector<float>(size_t(channels), v[0]) : v;
}

void ModelFlags::apply_training_overrides(ViTConfig& c) const {
  // timm's distilled head has no dropout: --drop is the projections' there.
  if (drop >= 0) c.drop_rate = c.proj_drop_rate = drop;
  if (c.head_dist) c.drop_rate = 0.f;
  if (drop_path >= 0) c.drop_path_rate = drop_path;
  if (attn_drop >= 0) c.attn_drop_rate = attn_drop;
  if (!mean.empty()) c.mean = per_channel(mean, c.in_chans, "--mean");
  if (!std.empty()) c.std = per_channel(std, c.in_chans, "--std");
  for (float s : c.std) VIT_USAGE_CHECK(s > 0 && std::isfinite(s), "--std must be positive, got ", s);
}

std::string ModelFlags::architecture_flag() const {
  if (!config_file.empty()) return "--config";
  if (!patch_size.empty()) return "--patch-size";
  if (in_chans > 0) return "--in-chans";
  if (embed_dim > 0) return "--embed-dim";
  if (depth > 0) return "--depth";
  if (dim_head > 0) return "--dim-head";
  if (mlp_dim > 0) return "--mlp-dim";
  if (!pool.empty()) return "--pool";
  if (!pos_embed.empty()) return "--pos-embed";
  if (!act_layer.empty()) return "--act-layer";
  if (no_class_token) return "--no-class-token";
  if (pool_include_prefix) return "--pool-include-prefix";
  if (patch_norm) return "--patch-norm";
  if (distilled) return "--distilled";
  return "";
}

void AugFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--crop-pad", aug.crop_pad, "random crop after padding by this many pixels (seed 002: 4)")
      ->capture_default_str();
  cmd.add_option("--crop-fill", aug.crop_fill,
                 "what --crop-pad pads with: black (torchvision's RandomCrop) or mean (the normalization's "
                 "mean)")
      ->check(CLI::IsMember({"black", "mean"}))
      ->capture_default_str();
  cmd.add_option("--hflip", aug.hflip, "horizontal flip probability")->capture_default_str();
  cmd.add_option("--vflip", aug.vflip, "vertical flip probability (timm's)")->capture_default_str();
  cmd.add_option("--scale", scale, "random resized crop: MIN MAX area share (timm --scale; off by default)")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--ratio", ratio, "random resized crop: MIN MAX aspect ratio")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--aa", aug.auto_augment,
                 "RandAugment as timm writes it: rand-m9-n2, rand-m9-mstd0.5-inc1 (m magnitude, n ops per "
                 "image, mstd magnitude noise, mmax, p each op's probability); or 3a (3a-mstd0.5): DeiT "
                 "III's 3-Augment (one of solarize, grayscale and Gaussian blur per image; a --color-jitter "
                 "given stays on beside it, as in timm, whose train.py jitters 0.4 by default)");
  cmd.add_option(
         "--aa-fill", aug.aa_fill,
         "what RandAugment's rotations, shears and translations fill with: mean (the normalization's, "
         "as timm) or gray (0.5, vitcpp before 2026-12-04)")
      ->check(CLI::IsMember({"mean", "gray"}))
      ->capture_default_str();
  cmd.add_option(
         "--aa-ops", aug.aa_ops,
         "RandAugment's ops: timm (timm's 15, as Pillow applies them; inc1 picks those growing with "
         "the magnitude) or mild (vitcpp's 13 before 2026-12-06: no equalize, invert or solarize-add)")
      ->check(CLI::IsMember({"timm", "mild"}))
      ->capture_default_str();
  cmd.add_option(
         "--color-jitter", color_jitter,
         "color jitter strength S (brightness, contrast and saturation by factors in [1-S, 1+S], in a "
         "random order; timm's, off by default), or B C S each")
      ->expected(1, 4)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_flag("--force-color-jitter", force_color_jitter,
               "apply --color-jitter with --aa too (timm's create_transform argument; timm's train.py, and "
               "vitcpp without it, leave the jitter out when RandAugment is on)");
  cmd.add_option("--color-jitter-prob", aug.jitter_prob,
                 "apply --color-jitter with this probability (timm's; by default to every image)");
  cmd.add_option("--grayscale-prob", aug.grayscale_prob,
                 "grayscale probability (timm's, torchvision's RandomGrayscale; after the color jitter)")
      ->capture_default_str();
  cmd.add_option("--gaussian-blur-prob", aug.gaussian_blur_prob,
                 "Gaussian blur probability (timm's: torchvision's GaussianBlur, 23 taps, sigma uniform in "
                 "[0.1, 2]; images over 11 pixels a side)")
      ->capture_default_str();
  cmd.add_option("--reprob", aug.reprob, "random erasing probability")->capture_default_str();
  cmd.add_option("--remode", aug.re_mode,
                 "what random erasing fills its boxes with, in normalized values (timm's): pixel (N(0, 1) "
                 "noise per pixel), rand (one N(0, 1) value per channel) or const (zeros)")
      ->capture_default_str();
  cmd.add_option("--recount", aug.re_count,
                 "random erasing: 1 to this many boxes per erased image, each of its share of the area "
                 "(timm's)")
      ->capture_default_str();
}

void add_progress_flags(CLI::App& cmd, std::string& progress, double& log_seconds,
                        const std::string& auto_means) {
  cmd.add_option("--progress", progress,
                 "on stderr: auto: a progress bar " + auto_means +
                     ", else nothing; bar; log: a line every --log-seconds (timm's --log-freq); none")
      ->check(CLI::IsMember({"auto", "bar", "log", "none"}))
      ->capture_default_str();
  cmd.add_option("--log-seconds", log_seconds, "seconds between progress lines with --progress log")
      ->check(positive())
      ->capture_default_str();
}

std::vector<std::string> AugFlags::notes(const CLI::App& cmd) const {
  std::vector<std::string> out;
  const bool three = three_augment();
  for (const char* flag : {"--aa-fill", "--aa-ops"})
    if (cmd.count(flag) > 0 && (aug.auto_augment.empty() || three))
      out.push_back(std::string(flag) + ": no effect, " +
                    (!three                            ? "RandAugment is off (--aa)"
                     : std::string(flag) == "--aa-ops" ? "3-Augment has its own three ops"
                                                       : "3-Augment has no geometric op to fill"));
  if (cmd.count("--color-jitter-prob") > 0 && (color_jitter.empty() || jitter_dropped()))
    out.push_back(color_jitter.empty()
                      ? "--color-jitter-prob: no effect without --color-jitter (off by default)"
                      : "--color-jitter-prob: no effect, --color-jitter is left out for --aa");
  if (!three && !aug.auto_augment.empty() && aug.aa_ops == "mild" &&
      parse_auto_augment(aug.auto_augment).increasing)
    out.push_back("--aa " + aug.auto_augment +
                  ": inc has no effect with --aa-ops mild (its ops all grow with "
                  "the magnitude)");
  if (jitter_dropped()) out.push_back(kJitterDropped);
  if (three && color_jitter.empty())
    out.push_back("--aa " + aug.auto_augment +
                  ": no color jitter beside it unless --color-jitter is given (timm's train.py jitters 0.4 "
                  "by default beside 3-Augment; DeiT III passes 0.3)");
  for (const char* flag : {"--remode", "--recount"})
    if (cmd.count(flag) > 0 && aug.reprob == 0.f)
      out.push_back(std::string(flag) + ": no effect, random erasing is off (--reprob)");
  return out;
}

AugmentConfig AugFlags::config() const {
  AugmentConfig a = aug;
  // CLI11 lets a flag of two values end after one: say so rather than drop it.
  VIT_USAGE_CHECK(scale.empty() || scale.size() == 2,
                  "--scale takes two values, MIN MAX (timm's 0.08 1.0), got ", scale.size());
  VIT_USAGE_CHECK(ratio.empty() || ratio.size() == 2,
                  "--ratio takes two values, MIN MAX (timm's 0.75 1.3333), got ", ratio.size());
  VIT_USAGE_CHECK(ratio.empty() || !scale.empty(),
                  "--ratio shapes the random resized crop, which --scale MIN MAX turns on (off by default)");
  // A smallest area of 0 is the crop's "off" (it trained without a crop, without a word).
  VIT_USAGE_CHECK(scale.empty() || scale[0] > 0, "--scale ", scale.empty() ? 0.0 : scale[0], " ",
                  scale.size() > 1 ? scale[1] : 0.0,
                  ": the smallest crop must be a share above 0 of the image (timm's 0.08 1.0)");
  if (scale.size() == 2) {
    a.scale_min = scale[0];
    a.scale_max = scale[1];
  }
  if (ratio.size() == 2) {
    a.ratio_min = ratio[0];
    a.ratio_max = ratio[1];
  }
  if (!color_jitter.empty()) {
    VIT_USAGE_CHECK(color_jitter.size() != 4,
                    "--color-jitter: hue (a 4th value) is not supported; give S or B C S");
    VIT_USAGE_CHECK(color_jitter.size() != 2, "--color-jitter: give S, or B C S (got 2 values)");
    for (int k = 0; k < 3; ++k) a.jitter[k] = color_jitter[color_jitter.size() == 1 ? 0 : size_t(k)];
  }
  // timm's create_transform: RandAugment replaces the color jitter unless forced.
  if (jitter_dropped()) std::fill(std::begin(a.jitter), std::end(a.jitter), 0.f);
  a.validate();
  return a;
}

void InputFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--interpolation", interpolation, "resize filter (default: the model's; Pillow's filters)")
      ->check(CLI::IsMember({"bilinear", "bicubic", "lanczos", "box", "hamming", "nearest"}));
  cmd.add_option("--crop-pct", crop_pct,
                 "resize to size/crop_pct, then center-crop (timm's eval transform; default: the model's)")
      ->check(positive());
  cmd.add_option(
         "--crop-mode", crop_mode,
         "center: resize the shorter side keeping the aspect; squash: resize both sides (default: the "
         "model's)")
      ->check(CLI::IsMember({"center", "squash"}));
  cmd.add_option("--dtype", dtype,
                 "precision of the blocks' matrix products: fp32, bf16 (AVX-512; inputs and weights "
                 "rounded to bf16, fp32 accumulation) or int8 (weights per channel, inputs per row, "
                 "int32 sums); default: fp32, or int8 for a vit quantize checkpoint")
      ->transform(dtype_of({"fp32", "bf16", "int8"}));
}

void warn_if_bf16_emulated(const char* flag) {
  if (const std::string why = ops::bf16_emulated(); !why.empty())
    std::cerr << "vit: warning: " << flag << ": " << why << "\n";
}

Pretrained InputFlags::load_for_inference(const LoadFlags& load, int64_t max_batch) const {
  if (dtype == "bf16") warn_if_bf16_emulated("--dtype bf16");
  try {
    Pretrained p = load.load(dtype.empty() ? "stored" : dtype);  // these commands only infer
    p.model->pack_weights_if_faster(max_batch);
    return p;
  } catch (const Error& e) {
    if (std::string_view(e.what()).rfind("dtype", 0) != 0) throw;
    throw Error(std::string("--") + e.what());  // "--dtype bf16: ...", the flag
  }
}

InputSpec InputFlags::spec(const ViTConfig& cfg) const {
  InputSpec in = input_spec(cfg);
  if (!interpolation.empty()) in.interpolation = interpolation;
  if (crop_pct != 0) in.crop_pct = crop_pct;
  if (!crop_mode.empty()) in.crop_mode = crop_mode;
  VIT_USAGE_CHECK(in.crop_pct > 0 && in.crop_pct <= 1, "--crop-pct must be in (0, 1], got ", in.crop_pct);
  in.validate();
  return in;
}

LoadOptions load_options(const std::vector<int64_t>& img_size, int64_t num_heads,
                         const std::string& pos_resample) {
  LoadOptions o;
  o.pos_resample = pos_resample;
  if (!img_size.empty()) {
    VIT_USAGE_CHECK(img_size.size() <= 2, "--img-size takes one size or two (height width), got ",
                    img_size.size(), " values");
    o.img_h = img_size[0];
    o.img_w = img_size.size() > 1 ? img_size[1] : img_size[0];
    VIT_USAGE_CHECK(o.img_h > 0 && o.img_w > 0, "--img-size must be positive");
  }
  o.num_heads = num_heads;
  return o;
}

void print_notes(const Pretrained& p, std::ostream& os) {
  for (const auto& n : p.notes) os << "vit: " << p.file << " (" << p.format << "): " << n << "\n";
}

void print_data_notes(const DataSources& d, std::ostream& os) {
  for (const std::string& n : d.notes) os << "note: " << n << "\n";
  const std::vector<std::string>& skipped = d.skipped;
  if (skipped.empty()) return;
  os << "skipped " << skipped.size() << " image(s) that do not decode:\n";
  for (size_t i = 0; i < std::min<size_t>(skipped.size(), 10); ++i) os << "  " << skipped[i] << "\n";
  if (skipped.size() > 10) os << "  ...\n";
}

void LoadFlags::add_to(CLI::App& cmd) {
  cmd.add_option(
         "--checkpoint", checkpoint,
         "weights: a vitcpp, timm or Hugging Face .safetensors file, a directory with model.safetensors "
         "and config.json, or a vit train run directory (its best.safetensors)")
      ->required();
  cmd.add_flag("--last", last, "with --checkpoint RUN_DIR: its last.safetensors instead of best.safetensors");
  auto* named = cmd.add_option("--model", model, kCheckpointModelHelp)->each(note_deprecated_name);
  cmd.add_option("--labels", labels, "class names, one per line (default: from the checkpoint)");
  cmd.add_option("--img-size", img_size,
                 "run at another input size, S or H W (position embeddings resampled)")
      ->expected(1, 2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--num-heads", num_heads, "attention heads, for a timm file whose config does not say")
      ->check(positive())
      ->excludes(named);
  add_pos_resample(cmd, pos_resample);
}

const char* const kCheckpointModelHelp =
    "the model the checkpoint is, as timm's validate.py takes --model with --checkpoint: a timm "
    "architecture vitcpp runs, with or without its pretrained tag (vit_small_patch16_224.augreg_in21k), or a "
    "preset. A bare state dict then takes the name's heads, LayerNorm eps and preprocessing; a file that "
    "is another model is refused, with what differs";

Pretrained load_checkpoint(const std::string& path, const std::string& name, const LoadOptions& o,
                           const char* flag) {
  return name.empty() ? load_pretrained(path, o)
                      : load_pretrained_as(path, name, o, std::string("without ") + flag);
}

void add_pos_resample(CLI::App& cmd, std::string& value) {
  cmd.add_option("--pos-resample", value,
                 "how --img-size resamples the position embeddings: timm (resample_abs_pos_embed: bicubic, "
                 "antialiased; bilinear for flexivit_*, as timm's loader) or hf (transformers' "
                 "interpolate_pos_encoding, of the release a Hugging Face "
                 "config names); default: hf for Hugging Face checkpoints, timm for the others")
      ->check(CLI::IsMember({"timm", "hf"}));
}

Pretrained LoadFlags::load(const std::string& infer_dtype) const {
  LoadOptions o = load_options(img_size, num_heads, pos_resample);
  o.labels_file = labels;
  o.last = last;
  o.infer_dtype = infer_dtype;
  Pretrained p = load_checkpoint(checkpoint, model, o, "--model");
  print_notes(p, std::cerr);
  return p;
}

}  // namespace vit::app
