// vit plot: a run's training curves (--run DIR: loss, top-1 and learning rate from
// summary.csv), or the position-embedding similarity of a checkpoint (--pos-embed).
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/check.h"
#include "io/pretrained.h"
#include "outputs.h"
#include "validators.h"
#include "viz/figures.h"

namespace vit::app {

namespace {
namespace fs = std::filesystem;

struct PlotFlags {
  std::string run, checkpoint, out, title;
  bool pos_embed = false;
};
}  // namespace

Run add_plot(CLI::App& cmd) {
  auto f = std::make_shared<PlotFlags>();
  auto* run = cmd.add_option("--run", f->run,
                             "run directory: plot its summary.csv (train vs eval loss and "
                             "top-1, learning rate) to --out, default DIR/curves.png");
  auto* pos = cmd.add_flag("--pos-embed", f->pos_embed,
                           "plot the cosine similarity of each patch's position embedding with every "
                           "other patch's (ViT paper, Figure 7); needs --checkpoint and --out");
  cmd.add_option("--checkpoint", f->checkpoint, "checkpoint (vitcpp, timm or Hugging Face), with --pos-embed")
      ->needs(pos);
  cmd.add_option("--out", f->out, "PNG file to write");
  cmd.add_option("--title", f->title, "title (default: the run directory or checkpoint)");
  run->excludes(pos);
  return [f] {
    VIT_USAGE_CHECK(!f->run.empty() || f->pos_embed,
                    "give --run DIR or --pos-embed --checkpoint FILE --out FILE.png");
    if (!f->run.empty()) {
      const std::string out = f->out.empty() ? (fs::path(f->run) / "curves.png").string() : f->out;
      const std::string summary = (fs::path(f->run) / "summary.csv").string();
      const viz::RunHistory h = viz::read_summary_csv(summary);  // first: a missing run is the error
      check_png_name("--out", out);
      check_outputs({{"--out", out}}, {summary});
      viz::curves_figure(h, f->title.empty() ? f->run : f->title, out);
      std::cout << "wrote " << out << " (" << h.epoch.size()
                << (h.epoch.size() == 1 ? " epoch)\n" : " epochs)\n");
      return 0;
    }
    VIT_USAGE_CHECK(!f->checkpoint.empty() && !f->out.empty(),
                    "--pos-embed needs --checkpoint FILE and --out FILE.png");
    check_png_name("--out", f->out);  // before the checkpoint loads
    Pretrained loaded = load_pretrained(f->checkpoint);
    check_outputs({{"--out", f->out}}, {loaded.file});
    auto model = std::move(loaded.model);
    const ViTConfig& cfg = model->config();
    // pos_embed rows: the prefix tokens' first (unless no_embed_class), then the patches.
    const int64_t skip = cfg.no_embed_class ? 0 : cfg.num_prefix_tokens();
    const Tensor pos = model->param("pos_embed");
    viz::pos_embed_figure(pos.data + skip * cfg.embed_dim, cfg.grid_h(), cfg.grid_w(), cfg.embed_dim,
                          f->title.empty() ? "position embedding similarity: " + f->checkpoint : f->title,
                          f->out);
    std::cout << "wrote " << f->out << " (" << cfg.grid_h() << "x" << cfg.grid_w() << " patches, "
              << cfg.pos_embed << " position embedding)\n";
    return 0;
  };
}

}  // namespace vit::app
