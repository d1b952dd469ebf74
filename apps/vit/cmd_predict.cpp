// vit predict: top-k classes of image files (preprocessed as the model's config says) or
// of rows of a preprocessed tensor, as text or one JSON object per line.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_flags.h"
#include "vit/core/error.h"
#include "vit/core/threads.h"
#include "vit/data/open.h"
#include "vit/io/tensor_input.h"

namespace vit::app {

namespace {
struct PredictFlags {
  LoadFlags load;
  std::string tensor;
  std::vector<std::string> images;
  int64_t topk = 5, batch_size = 32;
  bool json = false, logits = false;
  int threads = 0;
  InputFlags input;
};

// Prints one prediction; `what` is {"image": path} or {"row": i}.
void print(const PredictFlags& f, nlohmann::json what, const float* z, int64_t K,
           const std::vector<std::string>& names) {
  const double mx = *std::max_element(z, z + K);
  double sum = 0;
  for (int64_t k = 0; k < K; ++k) sum += std::exp(z[k] - mx);
  std::vector<int64_t> order(K);
  for (int64_t k = 0; k < K; ++k) order[k] = k;
  const int64_t top = std::min(f.topk, K);
  std::partial_sort(order.begin(), order.begin() + top, order.end(),
                    [&](int64_t a, int64_t b) { return z[a] > z[b]; });
  auto label = [&](int64_t k) { return k < int64_t(names.size()) ? names[k] : std::to_string(k); };
  if (f.json) {
    nlohmann::json j = what;
    j["topk"] = nlohmann::json::array();
    for (int64_t i = 0; i < top; ++i)
      j["topk"].push_back(
          {{"index", order[i]}, {"label", label(order[i])}, {"prob", std::exp(z[order[i]] - mx) / sum}});
    if (f.logits) j["logits"] = std::vector<float>(z, z + K);
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << (what.contains("image") ? what["image"].get<std::string>() : "row " + what["row"].dump())
            << ":";
  for (int64_t i = 0; i < top; ++i)
    std::cout << (i ? "," : "") << " " << label(order[i]) << " " << std::fixed << std::setprecision(4)
              << std::exp(z[order[i]] - mx) / sum;
  std::cout << "\n";
}
}  // namespace

Run add_predict(CLI::App& cmd) {
  auto f = std::make_shared<PredictFlags>();
  f->load.add_to(cmd);
  cmd.add_option("--topk", f->topk, "how many classes to print")->capture_default_str();
  cmd.add_flag("--json", f->json, "one JSON object per line per image");
  cmd.add_flag("--logits", f->logits, "with --json, include the raw logits");
  cmd.add_option("--tensor", f->tensor,
                 "FILE.safetensors:NAME: predict on a preprocessed float tensor [B,C,H,W]");
  cmd.add_option("-b,--batch-size", f->batch_size, "images per forward pass")->capture_default_str();
  cmd.add_option("--threads", f->threads, "threads (default: all cores)");
  f->input.add_to(cmd);
  cmd.add_option("images", f->images, "PNG or JPEG files");
  return [f] {
    set_num_threads(f->threads);
    VIT_CHECK(f->topk > 0 && f->batch_size > 0, "--topk and --batch-size must be positive");
    VIT_CHECK(!f->images.empty() || !f->tensor.empty(), "give image files or --tensor FILE:NAME");
    const Pretrained loaded = f->load.load();
    ViT& model = *loaded.model;
    f->input.prepare(model, f->batch_size);
    const ViTConfig& cfg = model.config();
    const auto& names = loaded.class_names;
    const int64_t K = cfg.num_classes, n = cfg.in_chans * cfg.img_h * cfg.img_w;
    if (!f->tensor.empty()) {
      const TensorSpec spec = parse_tensor_spec(f->tensor);
      int64_t rows = 0;
      const auto x = read_tensor_input(SafeTensors::open(spec.file), spec.name, cfg.in_chans, cfg.img_h,
                                       cfg.img_w, &rows);
      std::vector<float> logits(rows * K);
      for (int64_t first = 0; first < rows; first += f->batch_size) {
        const int64_t B = std::min(f->batch_size, rows - first);
        model.infer(x.data() + first * n, B, nullptr, logits.data() + first * K);
      }
      for (int64_t i = 0; i < rows; ++i) print(*f, {{"row", i}}, logits.data() + i * K, K, names);
      return 0;
    }
    const InputSpec in = f->input.spec(cfg);
    std::vector<float> x(f->batch_size * n), logits(f->batch_size * K);
    const int64_t N = int64_t(f->images.size());
    for (int64_t first = 0; first < N; first += f->batch_size) {
      const int64_t B = std::min(f->batch_size, N - first);
      for (int64_t b = 0; b < B; ++b) load_image_input(f->images[first + b], in, x.data() + b * n);
      model.infer(x.data(), B, nullptr, logits.data());
      for (int64_t b = 0; b < B; ++b)
        print(*f, {{"image", f->images[first + b]}}, logits.data() + b * K, K, names);
    }
    return 0;
  };
}

}  // namespace vit::app
