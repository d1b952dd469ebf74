// vit attention: where the model looks. For each image, one PNG in --out: the image as the
// model sees it | the attention map | the two overlaid, captioned with the predicted class
// and its probability; with --layer all, a grid of blocks x heads.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "commands.h"
#include "core/check.h"
#include "core/file.h"
#include "core/threads.h"
#include "data/preprocess.h"
#include "image_args.h"
#include "model_flags.h"
#include "validators.h"
#include "viz/attention.h"
#include "viz/figures.h"

namespace vit::app {

namespace {
namespace fs = std::filesystem;

struct AttentionFlags {
  LoadFlags load;
  std::string out, method, layer = "-1", head = "mean";  // method "": pool or cls, by the model
  std::vector<std::string> images;
  int threads = 0;
  bool skip_bad_images = false;
  InputFlags input;
};

// "-1" (the last block), "3", "all" (-2 here) -> a block index in [0, depth) or -2.
int64_t parse_index(const std::string& s, int64_t count, const char* what, const char* all) {
  if (s == all) return -2;
  size_t used = 0;
  int64_t i = 0;
  try {
    i = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  VIT_USAGE_CHECK(used == s.size() && !s.empty(), "--", what, " wants an index or '", all, "', got '", s,
                  "'");
  const int64_t idx = i < 0 ? count + i : i;
  VIT_USAGE_CHECK(idx >= 0 && idx < count, "--", what, " ", s, " out of range: the model has ", count,
                  " (0..", count - 1, ", or negative from the end)");
  return idx;
}

// A file name in dir for image `path` not used yet: STEM_TAG.png, then STEM_TAG-2.png, ...
std::string out_name(const std::string& dir, const std::string& path, const std::string& tag,
                     std::set<std::string>& used) {
  const std::string base = fs::path(path).stem().string() + "_" + tag;
  std::string name = base + ".png";
  for (int k = 2; used.count(name); ++k) name = base + "-" + std::to_string(k) + ".png";
  used.insert(name);
  return (fs::path(dir) / name).string();
}
}  // namespace

Run add_attention(CLI::App& cmd) {
  auto f = std::make_shared<AttentionFlags>();
  f->load.add_to(cmd);
  cmd.add_option("--out", f->out, "directory for the PNG files (created if missing)")->required();
  cmd.add_option(
         "--method", f->method,
         "cls: the class token's attention in one block (heads averaged; avg-pooled models and "
         "those without a class token: the mean of the pooled tokens' rows); dist: the same for "
         "DeiT's distillation token; rollout: attention rollout (Abnar & Zuidema 2020) through "
         "blocks 0..--layer, the class token's row or the pooled rows' mean as cls (with the "
         "attention pool: the pool's query through them); pool: the attention pool's query over the patches "
         "(global_pool map, SigLIP's; --layer unused). Default: pool for models with the "
         "attention pool, else cls")
      ->check(CLI::IsMember({"cls", "dist", "rollout", "pool"}));
  cmd.add_option("--layer", f->layer,
                 "block index (0-based as timm's blocks.N; negative counts from the end), or 'all' "
                 "for a grid of blocks x heads")
      ->capture_default_str();
  cmd.add_option(
         "--head", f->head,
         "head index (0-based) or 'mean' (of all heads); with --layer all: that head in every block, or "
         "with 'mean' every head and the mean")
      ->capture_default_str();
  cmd.add_option("--threads", f->threads, "threads (default: all cores)")->check(thread_count());
  f->input.add_to(cmd);
  cmd.add_option(
         "images", f->images,
         "PNG or JPEG files, or folders of them (their images in timm's order: img2 before img10); - reads "
         "one image from standard input")
      ->required();
  cmd.add_flag("--skip-bad-images", f->skip_bad_images,
               "leave out image files that do not decode (each said on stderr) instead of stopping");
  return [f] {
    use_threads(f->threads);
    const Pretrained loaded = f->input.load_for_inference(f->load, 1);  // one image at a time
    ViT& model = *loaded.model;
    if (f->method.empty()) f->method = model.config().map_pool() ? "pool" : "cls";
    VIT_CHECK(f->method != "dist" || model.config().dist_token,
              "--method dist: the model has no distillation token (DeiT's distilled models do)");
    VIT_CHECK(f->method != "pool" || model.config().map_pool(),
              "--method pool: the model has no attention pool (global_pool 'map', as SigLIP's)");
    const ViTConfig& cfg = model.config();
    const auto& names = loaded.class_names;
    // The pool's query comes after the last block: --layer says nothing to it (as documented)
    // but 'all', its heads in a grid.
    const int64_t layer = f->method != "pool" ? parse_index(f->layer, cfg.depth, "layer", "all")
                          : f->layer == "all" ? -1
                                              : cfg.depth - 1;
    const int64_t head = f->head == "mean" ? -1 : parse_index(f->head, cfg.num_heads, "head", "mean");
    const InputSpec in = f->input.spec(cfg);
    // The pixels the patches cover (an input size past a multiple of the patch leaves the last unread).
    const int64_t covered_h = cfg.grid_h() * cfg.patch_h, covered_w = cfg.grid_w() * cfg.patch_w;
    const int64_t K = cfg.num_classes, T = cfg.num_tokens(), H = cfg.num_heads;
    std::vector<float> x(cfg.in_chans * cfg.img_h * cfg.img_w), logits(K), attn(cfg.depth * H * T * T);
    std::vector<float> pool_attn(cfg.map_pool() ? H * T : 0);  // the attention pool's query [H, T]
    float* pool = cfg.map_pool() ? pool_attn.data() : nullptr;
    const std::vector<std::string> files = image_files(f->images);  // a folder without images: no --out
    std::error_code ec;
    fs::create_directories(f->out, ec);
    VIT_CHECK(!ec && fs::is_directory(f->out), f->out,
              ": cannot create the output directory: ", ec.message());
    std::set<std::string> used;
    int64_t skipped = 0;
    for (const std::string& path : files) {
      Image img;  // decoded once: the model's input and the picture's
      try {
        img = load_image_input(path, in, x.data());
      } catch (const ResourceError&) {
        throw;  // descriptors, memory or I/O short: not a bad image, and no hint to skip it
      } catch (const Error& e) {
        if (!f->skip_bad_images)
          throw Error(std::string(e.what()) + " (--skip-bad-images leaves such files out)");
        std::cerr << "vit attention: skipped " << e.what() << "\n";
        ++skipped;
        continue;
      }
      // A model without a head (SiglipVisionModel, ViTModel) has attention and no classes.
      model.infer(x.data(), 1, nullptr, K > 0 ? logits.data() : nullptr, attn.data(), pool);
      // The picture shows the pixels the model took: converted, resized and cropped alike.
      const Image view = resize_and_crop(convert_channels(img, cfg.in_chans), in);
      std::string label = "no classifier head", prob;
      if (K > 0) {
        const int64_t k = std::max_element(logits.begin(), logits.end()) - logits.begin();
        double sum = 0;
        for (float z : logits) sum += std::exp(double(z) - logits[k]);
        label = k < int64_t(names.size()) ? names[k] : "class " + std::to_string(k);
        char buf[32];
        std::snprintf(buf, sizeof buf, " %.1f%%", 100.0 / sum);
        prob = buf;
      }
      const bool one_block = f->method != "rollout";
      // Avg pooling, or a model without a class token (map pooling), has none to ask: the map
      // is the pooled tokens' rows, averaged (patch_map). It was captioned "class-token
      // attention" on a map-pooled model without one.
      const bool class_row = cfg.class_token && !cfg.avg_pool();
      const std::string cls = class_row ? "class-token attention" : "pooled tokens' mean attention";
      const std::string what = f->method == "cls"    ? cls
                               : f->method == "dist" ? "distillation-token attention"
                               : f->method == "pool" ? "attention-pool query"
                               : pool                ? "attention rollout to the pool"
                                                     : "attention rollout";
      const std::string heads = head < 0 ? "heads averaged" : "head " + std::to_string(head);
      const std::string file = out_name(f->out, path, f->method + (layer >= 0 ? "" : "_grid"), used);
      const std::string pred = fs::path(path).filename().string() + ": " + label + prob;
      if (layer >= 0) {
        const std::string where = f->method == "pool" ? "after block " + std::to_string(cfg.depth - 1)
                                  : one_block         ? "block " + std::to_string(layer)
                                                      : "blocks 0-" + std::to_string(layer);
        viz::attention_figure(view, viz::attention_map(attn.data(), cfg, 1, 0, f->method, layer, head, pool),
                              cfg.grid_h(), cfg.grid_w(),
                              pred + "   (" + what + ", " + where + ", " + heads + ")", file, covered_h,
                              covered_w);
      } else {
        std::vector<std::vector<float>> maps;
        std::vector<std::string> rows, cols;
        // --head N: that head's column alone; else every head's and their mean.
        std::vector<int64_t> shown;
        for (int64_t h = head < 0 ? 0 : head; h < (head < 0 ? H + 1 : head + 1); ++h) shown.push_back(h);
        for (int64_t h : shown) cols.push_back(h < H ? "head " + std::to_string(h) : "mean");
        const bool pooled = f->method == "pool";  // one row: the pool's query after the last block
        for (int64_t l = pooled ? cfg.depth - 1 : 0; l < cfg.depth; ++l) {
          rows.push_back(pooled ? "pool" : (one_block ? "block " : "0-") + std::to_string(l));
          for (int64_t h : shown)
            maps.push_back(viz::attention_map(attn.data(), cfg, 1, 0, f->method, l, h < H ? h : -1, pool));
        }
        const std::string rows_are = pooled      ? "row: the pool's query"
                                     : one_block ? "rows: blocks"
                                                 : "rows: rollout through blocks";
        viz::attention_grid_figure(
            view, maps, cfg.grid_h(), cfg.grid_w(), rows, cols,
            pred + "\n" + what + "\n" + rows_are + (head < 0 ? ", columns: heads" : ""), file, covered_h,
            covered_w);
      }
      std::cout << path << ": " << label << prob << " -> " << file << " (" << what << ")\n";
    }
    if (skipped > 0)
      std::cerr << "vit attention: " << skipped << " of " << files.size() << " image(s) skipped\n";
    return 0;
  };
}

}  // namespace vit::app
