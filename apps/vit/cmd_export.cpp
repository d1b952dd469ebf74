// vit export: any checkpoint vitcpp reads, written as a directory timm loads as it is.
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "model_flags.h"

namespace vit::app {

Run add_export(CLI::App& cmd) {
  struct Flags {
    LoadFlags load;
    std::string out;
  };
  auto f = std::make_shared<Flags>();
  f->load.add_to(cmd);
  cmd.add_option("--out", f->out, "output directory (model.safetensors + config.json, timm's layout)")
      ->required();
  return [f] {
    const Pretrained p = f->load.load();
    for (const auto& n : export_timm(*p.model, f->out, p.class_names))
      std::cerr << "vit: export: " << n << "\n";
    const auto dir = std::filesystem::path(f->out);
    std::cout
        << "wrote " << (dir / "model.safetensors").string() << " and " << (dir / "config.json").string()
        << " (timm: push the directory to the hub and timm.create_model(\"hf-hub:USER/REPO\", "
           "pretrained=True), or pass config.json's model_args with pretrained_cfg_overlay=dict(file=...))\n";
    return 0;
  };
}

}  // namespace vit::app
