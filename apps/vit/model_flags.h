// Model selection flags shared by subcommands: --model PRESET or --config FILE.json, then
// per-field overrides named like timm's (--img-size, --patch-size, --embed-dim, ...).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "vit/data/open.h"
#include "vit/model/config.h"

namespace vit::app {

struct ModelFlags {
  std::string model = "mnist-seed", config_file;
  std::vector<int64_t> img_size, patch_size;
  int64_t in_chans = 0, embed_dim = 0, depth = 0, num_heads = 0, mlp_dim = 0, num_classes = 0;
  std::string pool, pos_embed;
  float drop = -1, drop_path = -1, attn_drop = -1;

  void add_to(CLI::App& cmd);
  ViTConfig resolve() const;  // validated
};

// How images become the model's input: --interpolation and --crop-pct (eval, predict).
struct InputFlags {
  std::string interpolation = "bilinear";
  float crop_pct = 1.f;
  void add_to(CLI::App& cmd);
  InputSpec spec(const ViTConfig& cfg) const;  // validated
};

}  // namespace vit::app
