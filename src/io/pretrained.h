// Pretrained weights from any of three layouts, into a vitcpp model:
//   vitcpp  its own checkpoints (timm names, the config in the metadata or config.json);
//   timm    model.safetensors (+ config.json with architecture, model_args, pretrained_cfg),
//           the architecture otherwise inferred from the tensor shapes;
//   hf      transformers' ViTForImageClassification / ViTModel (model.safetensors,
//           config.json, preprocessor_config.json), names mapped to timm's.
// A path is a .safetensors file or a directory holding model.safetensors. Every tensor of
// the file must become a parameter: unsupported ones are an error that names them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/vit.h"

namespace vit {

struct LoadOptions {
  int64_t img_h = 0, img_w = 0;  // > 0: a new input size; pos_embed is resampled
  // How: "timm" (resample_pos_embed) or "hf" (resample_pos_embed_hf: transformers'
  // interpolate_pos_encoding, of the release a transformers checkpoint names); "" = the
  // checkpoint's own (hf for a Hugging Face checkpoint, timm for the others).
  std::string pos_resample;
  int64_t num_heads = 0;  // heads when neither the config nor the architecture name says
  // timm's architecture name for a timm file that does not name one (a bare state dict):
  // its heads, activation and LayerNorm eps (timm.create_model(name, checkpoint_path=...)).
  std::string architecture;
  int64_t num_classes = 0;  // > 0 and different from the file's: a new zero-initialized head
  std::string labels_file;  // class names, one per line (else the file's own, if any)
  bool last = false;        // a vit train run directory: its last.safetensors, not best
  // Changes to the config that leave the parameters alone (dropout rates), applied before
  // the model is built.
  std::function<void(ViTConfig&)> adjust;
  // The config, class names and notes alone: no model is made and no weight is read, only
  // the header (vit info read every weight into a model to print a config; the tensors'
  // presence and shapes are then not checked).
  bool config_only = false;
  // For inference alone: "bf16" or "int8" (or "stored": the file's own, Pretrained::stored_dtype)
  // prepares each block's products for that dtype as soon as the block is read and gives back
  // its fp32 matrices (ViT::prepare_next_infer_block), so the load never holds the whole fp32
  // model; the model then only infers. "" or "fp32" (or "stored" for an fp32 file): the fp32
  // weights, as they are.
  std::string infer_dtype;
};

struct Pretrained {
  std::unique_ptr<ViT> model;  // null with LoadOptions::config_only
  ViTConfig config;            // the model's
  std::string format;          // "vitcpp", "timm", "hf" or "vit-pytorch"
  std::string file;            // the safetensors file read
  std::vector<std::string> class_names;
  std::vector<std::string> notes;  // what was adapted or skipped, for the user to read
  // How pos_embed is resampled at a later size change (Python's set_input_size): "timm", "hf"
  // or "hf-scale". The load's own resampling (--img-size) is said in notes: for flexivit_* it
  // is timm's loader's bilinear, where set_input_size is bicubic as timm's.
  std::string pos_resample;
  // The precision the file was written for: "int8" for vit quantize's checkpoints (the
  // commands' default --dtype then), else "fp32".
  std::string stored_dtype = "fp32";
};

// The safetensors file a path names: a file itself; a directory's model.safetensors (timm,
// Hugging Face) or else, a vit train run directory, its best.safetensors (last.safetensors
// with `last`).
std::string weights_file(const std::string& path, bool last = false);
// "vitcpp", "timm", "hf" or "vit-pytorch", from the tensor names and metadata.
std::string detect_format(const SafeTensors& st);
Pretrained load_pretrained(const std::string& path, const LoadOptions& opt = {});
// timm.create_model(name, checkpoint_path=path) and timm's scripts' `--model NAME --checkpoint
// PATH`: the file read as the model `name` is (a timm architecture, with or without its
// pretrained tag, or a vitcpp preset). A bare state dict takes the name's heads, activation,
// LayerNorm eps and preprocessing (its tag's); a file that is another model (other widths or
// counts, tokens, norms, LayerScale, pooling) is refused, naming what differs, as timm's
// strict load refuses it. The file's head and position grid stay its own. `as_is` says how to
// take the file as it is instead ("create_model(path)", "without --model").
Pretrained load_pretrained_as(const std::string& path, const std::string& name, LoadOptions opt,
                              const std::string& as_is);
// The config of a timm architecture vitcpp runs, as timm.create_model(name) builds it (the
// table's row: its default pretrained_cfg, whatever pretrained tag the name carries, as
// vit_base_patch16_224.augreg2_in21k_ft_in1k), else of a vitcpp preset (model/config.h's
// preset); one of timm's that it cannot run is refused with why (its table's reason).
ViTConfig named_config(const std::string& name);
// Class names from a file with one per line (blank lines skipped).
std::vector<std::string> read_labels(const std::string& path);

// timm's resample_abs_pos_embed: the first `prefix` rows of src [prefix + gh*gw, C] are
// kept, the gh x gw grid is resized to nh x nw with F.interpolate(mode="bicubic",
// antialias=True); dst is [prefix + nh*nw, C].
// bilinear: F.interpolate(mode="bilinear", antialias=False) instead, timm's loader's for
// flexivit_* (its checkpoint_filter_fn; timm's set_input_size stays bicubic).
void resample_pos_embed(const float* src, int64_t prefix, int64_t gh, int64_t gw, int64_t C, float* dst,
                        int64_t nh, int64_t nw, bool bilinear = false);
// transformers' ViTEmbeddings.interpolate_pos_encoding (DeiT's likewise, with its two prefix
// tokens): the same grid resized with F.interpolate(mode="bicubic", align_corners=False), no
// antialiasing; to size=(nh, nw) since 4.45.0, before it by scale_factor=((nh + 0.1) / gh,
// (nw + 0.1) / gw) (scale_factor true), which places the samples slightly differently.
void resample_pos_embed_hf(const float* src, int64_t prefix, int64_t gh, int64_t gw, int64_t C, float* dst,
                           int64_t nh, int64_t nw, bool scale_factor);

// Writes a directory timm loads as it is: model.safetensors (timm's names) and config.json
// (architecture, num_classes, global_pool, model_args, pretrained_cfg, label_names).
// Returns notes on what timm will see differently (LayerNorm eps).
// Refuses a training run's directory (args.json) as an export's: its model.safetensors
// would be read in place of the run's checkpoints, and its config.json replaced.
void check_export_dir(const std::string& dir);
// An export's class names, one per class: a head wider than the data it was trained on (a
// 10-class preset on 4 folders) has names for its first classes; the rest are named by their
// index ("#9" where a name is "9"), as vit eval shows them. Other tools read a list of the
// head's length (timm's label_names, transformers' id2label); a shorter one was dropped on
// reading, the classes then numbered anew.
std::vector<std::string> names_for_every_class(const std::vector<std::string>& names, int64_t num_classes);
std::vector<std::string> export_timm(const ViT& model, const std::string& dir,
                                     const std::vector<std::string>& class_names = {});
// Writes a directory Hugging Face transformers loads as hf_class(config):
// ViTForImageClassification (ViTModel when the model has no head, num_classes 0), or for a
// model with DeiT's distillation token DeiTForImageClassificationWithTeacher (two heads),
// DeiTForImageClassification (one) or DeiTModel: model.safetensors (HF's names; qkv
// split into query, key, value), config.json (with id2label / label2id from the class
// names, else the class indices) and preprocessor_config.json (ViTImageProcessor;
// DeiTImageProcessor with its resize and center crop). Throws vit::Error naming what HF's
// ViT cannot express (avg pooling, fc_norm, LayerScale, no class token, register tokens,
// pre_norm, no patch bias); a non-square input or patch size is written as transformers'
// [height, width] pair. Returns notes on what is
// approximated (preprocessing HF's processor has no words for, fixed sin-cos positions
// written as learned ones).
std::vector<std::string> export_hf(const ViT& model, const std::string& dir,
                                   const std::vector<std::string>& class_names = {});
// The transformers class export_hf writes for a config (config.json's "architectures").
const char* hf_class(const ViTConfig& c);
// timm's config.json for a config.
std::string timm_config_json(const ViTConfig& c, const std::vector<std::string>& class_names);

}  // namespace vit
