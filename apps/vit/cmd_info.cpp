// vit info: a model's config, parameter count, FLOPs per image and parameter table, and what
// the CPU backend runs here (instruction-set path, matrix-product libraries, bf16 and int8).
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "core/check.h"
#include "model/params.h"
#include "model_flags.h"
#include "ops/ops.h"
#include "validators.h"

namespace vit::app {

namespace {
// What --dtype int8 gains with this CPU's int8 product (AMX tiles through oneDNN, or the
// kernel table's gemm_s8). Without VNNI or a dot product its
// products come no faster than fp32's FMAs (an AMD Zen 2 ran whole models at 0.96-1.13x
// fp32's speed; docs/design.md, "int8 inference"): it saves memory more than time.
std::string int8_note() {
  if (std::string(ops::cpu_int8_product()) == "amx")
    return std::string(
               " (oneDNN on AMX tiles: a 16 x 64 byte tile times a 64 x 16 one per instruction, into "
               "int32; layers narrower than 64: ") +
           ops::cpu_int8_table_product() + ")";
  if (ops::cpu_int8_has_dot_product()) return " (four byte products per instruction into int32)";
  if (std::string(ops::cpu_int8_product()) == "generic") return " (plain loops: for tests, not speed)";
  const std::string where = std::string(ops::cpu_isa()) == ops::cpu_isa_detected()
                                ? "on this CPU"
                                : std::string("on the ") + ops::cpu_isa() + " path VIT_ISA forces";
  return " (no VNNI or dot product " + where + ": --dtype int8 saves 3/4 of the weights' memory, not time)";
}
}  // namespace

Run add_info(CLI::App& cmd) {
  struct Flags {
    ModelFlags model;
    std::string checkpoint;
    bool table = false;
  };
  auto f = std::make_shared<Flags>();
  f->model.add_to(cmd);
  CLI::App* app = &cmd;  // (it outlives the run)
  cmd.add_option("--checkpoint", f->checkpoint,
                 "read the config from a checkpoint instead (vitcpp, timm or Hugging Face); with --model, "
                 "as that model (a bare timm state dict takes its heads and preprocessing)");
  cmd.add_flag("--params", f->table, "list every parameter tensor");
  return [f, app] {
    ViTConfig cfg;
    if (f->checkpoint.empty()) {
      cfg = f->model.resolve();
    } else {
      LoadOptions o = load_options(f->model.img_size, f->model.num_heads);
      o.config_only = true;  // the header alone: no weight is read
      const std::string name = app->count("--model") > 0 ? f->model.model : "";
      VIT_USAGE_CHECK(name.empty() || f->model.num_heads == 0,
                      "--num-heads with --model: the model's name gives its heads");
      const Pretrained p = load_checkpoint(f->checkpoint, name, o, "--model");
      print_notes(p, std::cerr);
      cfg = p.config;
    }
    ParamTable table(cfg);
    int64_t total = 0, trainable = 0;
    for (auto& s : table.specs()) {
      total += s.numel();
      trainable += s.trainable ? s.numel() : 0;
      if (f->table)
        std::cout << std::left << std::setw(34) << s.name << std::setw(20) << shape_str(s.shape)
                  << (s.trainable ? (s.decay ? "decay" : "no-decay") : "fixed") << "\n";
    }
    std::cout << cfg.to_json() << "\nparameters: " << total << " (" << trainable << " trainable)\n"
              << "forward GFLOPs per image: " << std::setprecision(4) << forward_flops(cfg) / 1e9;
    if (ViT::cls_tail_applies(cfg))  // what vitcpp runs: the last block on the class token's row
      std::cout << " (vitcpp runs " << forward_flops(cfg, true) / 1e9 << ": the class-token tail)";
    std::cout << "\n";
    // The instruction-set path the CPU kernels take (backends/cpu/isa.h).
    std::cout << "isa: " << ops::cpu_isa() << " (best on this CPU: " << ops::cpu_isa_detected()
              << "; VIT_ISA=generic|avx2|avx512|neon forces one)\n"
              << "matrix products: " << ops::cpu_gemm_library() << "\n"
              << "bf16 products: "
              << (ops::bf16_available() ? "oneDNN's (--dtype bf16, --amp)" : "none: " + ops::bf16_missing())
              << (ops::bf16_emulated().empty() ? "" : ", but " + ops::bf16_emulated()) << "\n"
              << "int8 products: " << ops::cpu_int8_product() << int8_note() << "\n"
              << "environment: " << environment_line() << "\n";
    return 0;
  };
}

}  // namespace vit::app
