// vit export: any checkpoint vitcpp reads, written for another program: a directory timm
// loads as it is (--format timm), a Hugging Face ViTForImageClassification directory (hf),
// or one ONNX file (onnx).
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/check.h"
#include "io/onnx_export.h"
#include "model_flags.h"
#include "outputs.h"
#include "validators.h"

namespace vit::app {

namespace {
struct ExportFlags {
  LoadFlags load;
  std::string out, format = "timm", dtype;  // dtype "": the checkpoint's
};

// Writes the loaded model as --format says.
int write_export(const ExportFlags& f, const Pretrained& p, const std::filesystem::path& dir) {
  if (f.format == "onnx") {
    create_parent_folder(f.out);
    // As every command runs a vit quantize file: in int8 unless --dtype says otherwise.
    const bool int8 = f.dtype.empty() ? p.stored_dtype == "int8" : f.dtype == "int8";
    const OnnxExportInfo info = export_onnx(*p.model, f.out, p.class_names, -1, int8);
    const ViTConfig& c = p.model->config();
    std::cout << "wrote " << f.out << " (" << (int8 ? "int8, " : "") << info.bytes << " bytes, opset "
              << info.opset << ", " << info.nodes
              << " nodes, checked by ONNX's checker; input pixel_values [N," << c.in_chans << "," << c.img_h
              << "," << c.img_w << "] normalized as the model's preprocessing, output "
              << (c.num_classes > 0 ? "logits [N," + std::to_string(c.num_classes)
                                    : "features [N," + std::to_string(c.embed_dim))
              << "])\n";
    if (!info.data_file.empty())
      std::cout << "wrote " << info.data_file
                << " (the weights, ONNX external data: keep it beside the model, under this name)\n";
    return 0;
  }
  if (f.format == "hf") {
    for (const auto& n : export_hf(*p.model, f.out, p.class_names)) std::cerr << "vit: export: " << n << "\n";
    std::cout << "wrote " << (dir / "model.safetensors").string() << ", " << (dir / "config.json").string()
              << " and " << (dir / "preprocessor_config.json").string()
              << " (transformers: " << hf_class(p.model->config()) << ".from_pretrained(\"" << dir.string()
              << "\"))\n";
    return 0;
  }
  for (const auto& n : export_timm(*p.model, f.out, p.class_names)) std::cerr << "vit: export: " << n << "\n";
  std::cout << "wrote " << (dir / "model.safetensors").string() << " and " << (dir / "config.json").string()
            << " (timm: timm.create_model(\"local-dir:" << dir.string()
            << "\", pretrained=True); vitcpp: vitcpp.create_model(\"local-dir:" << dir.string() << "\"))\n";
  return 0;
}
}  // namespace

Run add_export(CLI::App& cmd) {
  auto f = std::make_shared<ExportFlags>();
  f->load.add_to(cmd);
  cmd.add_option("--format", f->format,
                 "timm: model.safetensors + config.json, timm's layout; hf: Hugging Face's "
                 "ViTForImageClassification directory (+ preprocessor_config.json); onnx: one ONNX file "
                 "(opset 17, input pixel_values [N,C,H,W], output logits [N,K], or features [N,D] for a "
                 "model without "
                 "a head)")
      ->check(CLI::IsMember({"timm", "hf", "onnx"}))
      ->capture_default_str();
  cmd.add_option("--out", f->out, "output directory (timm, hf) or file (onnx; - for standard output)")
      ->required();
  cmd.add_option(
         "--dtype", f->dtype,
         "onnx: fp32, or int8 (the blocks' products as onnxruntime's quantize_dynamic writes them: "
         "DynamicQuantizeLinear and MatMulInteger on int8 weights per output channel); default: fp32, "
         "or int8 for a vit quantize checkpoint")
      ->transform(dtype_of({"fp32", "int8"}));
  return [f] {
    // --out - or /dev/stdout: the ONNX bytes alone on standard output, the lines on stderr.
    if (f->format == "onnx") route_stdout({{"--out", &f->out}});
    const auto dir = std::filesystem::path(f->out);
    VIT_USAGE_CHECK(!f->out.empty(), "--out: empty; name the ", f->format == "onnx" ? "file" : "directory",
                    " to write");
    VIT_USAGE_CHECK(f->format != "onnx" || !dir.filename().empty(), "--out ", f->out,
                    ": a directory name; --format onnx writes one file (e.g. --out ",
                    (dir / "model.onnx").string(), ")");
    VIT_USAGE_CHECK(f->dtype != "int8" || f->format == "onnx",
                    "--dtype int8: for --format onnx (timm and Hugging Face ",
                    "hold fp32 weights; vit quantize writes an int8 checkpoint)");
    if (f->format != "onnx") check_export_dir(f->out);  // not a run's directory: before any work
    const Pretrained p = f->load.load();
    // The file written must not be the one read: --out RUN/best.safetensors, or a timm
    // directory exported onto itself, would replace the weights.
    check_outputs({{"--out", f->format == "onnx" ? f->out : (dir / "model.safetensors").string()}},
                  {p.file, f->load.labels}, true);
    // The folder the export makes goes again if the export fails (it stayed, empty).
    const std::filesystem::path made = f->format == "onnx" ? dir.parent_path() : dir;
    std::error_code ec;
    const bool fresh = !made.empty() && !std::filesystem::exists(made, ec);
    try {
      return write_export(*f, p, dir);
    } catch (...) {
      if (fresh) std::filesystem::remove(made, ec);  // only when empty: nothing of anyone's is lost
      throw;
    }
  };
}

}  // namespace vit::app
