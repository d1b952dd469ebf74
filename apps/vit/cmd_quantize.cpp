// vit quantize: a checkpoint with the blocks' four products in int8 per output channel
// (io/checkpoint.h, save_int8_checkpoint), which every command loads and runs in int8 by default.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "core/check.h"
#include "io/checkpoint.h"
#include "model_flags.h"
#include "outputs.h"

namespace vit::app {

namespace {
struct QuantizeFlags {
  LoadFlags load;
  std::string out;
};

// "87.6 MiB", "12.7 KiB".
std::string size_text(int64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  if (bytes >= (int64_t(1) << 20))
    s << double(bytes) / double(1 << 20) << " MiB";
  else
    s << double(bytes) / 1024.0 << " KiB";
  return s.str();
}
}  // namespace

Run add_quantize(CLI::App& cmd) {
  auto f = std::make_shared<QuantizeFlags>();
  f->load.add_to(cmd);
  cmd.add_option("--out", f->out,
                 "the int8 checkpoint to write (.safetensors; written to a temporary name, then renamed)")
      ->required();
  return [f] {
    // An ONNX name is a mix-up with vit export (the file would be safetensors all the same).
    VIT_CHECK(
        std::filesystem::path(f->out).extension() != ".onnx", "--out ", f->out,
        ": vit quantize writes a safetensors checkpoint; an int8 ONNX graph is vit export --format onnx "
        "--dtype int8");
    const Pretrained loaded = f->load.load();
    check_outputs({{"--out", f->out}}, {loaded.file, f->load.labels}, true);  // never the checkpoint read
    const ViT& model = *loaded.model;
    std::map<std::string, std::string> meta;
    if (!loaded.class_names.empty()) meta["class_names"] = nlohmann::json(loaded.class_names).dump();
    create_parent_folder(f->out);
    save_int8_checkpoint(f->out, model, meta);
    int64_t blocks_fp32 = 0, blocks_int8 = 0;
    for (const auto& s : model.table().specs())
      if (int8_stored(s.name)) {
        blocks_fp32 += 4 * s.numel();
        blocks_int8 += s.numel() + 4 * s.shape[0];
      }
    const auto size = int64_t(std::filesystem::file_size(f->out));
    std::cout
        << "wrote " << f->out << " (" << size_text(size) << "): the blocks' qkv, proj, fc1 and fc2 weights "
        << "in int8 per output channel, " << size_text(blocks_fp32) << " -> " << size_text(blocks_int8)
        << " (" << std::fixed << std::setprecision(2) << double(blocks_fp32) / double(blocks_int8)
        << "x smaller); the rest in fp32. Every command loads it and runs it with --dtype int8 by default.\n";
    return 0;
  };
}

}  // namespace vit::app
