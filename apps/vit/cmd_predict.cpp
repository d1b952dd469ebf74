// vit predict: top-k classes of image files or folders of them (preprocessed as the model's
// config says) or of rows of a preprocessed tensor, as text or one JSON object per line, and
// with --results-file a CSV as timm's inference.py writes (filename, then the top-k indices,
// labels and probabilities in columns of their own); or, with --features, their embeddings
// (the pooled pre-logits, or every token's features) to a .safetensors or .npy file.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/check.h"
#include "core/file.h"
#include "core/threads.h"
#include "core/utf8.h"
#include "data/folder.h"
#include "data/open.h"
#include "image_args.h"
#include "io/array_file.h"
#include "io/tensor_input.h"
#include "model_flags.h"
#include "outputs.h"
#include "train/progress.h"
#include "validators.h"
#include "vit/classifier.h"
#include "vit/core/version.h"

namespace vit::app {

namespace {
struct PredictFlags {
  LoadFlags load;
  std::string tensor, results_file, results_format, features, out, progress = "auto";
  double log_seconds = 10;
  std::vector<std::string> images;
  int64_t topk = 5, batch_size = 32;
  bool json = false, logits = false, fullname = false, skip_bad_images = false;
  int threads = 0;
  InputFlags input;
};

// An image's name in the results file: its file name, or with --fullname its path (timm's
// inference.py).
std::string results_name(const PredictFlags& f, const std::string& path) {
  return f.fullname ? path : std::filesystem::path(path).filename().string();
}

// Prints one prediction; `what` is {"image": path} or {"row": i}. With results, also appends
// its row (name, the top-k indices, labels and probabilities): a CSV line, or with
// --results-format json a JSON line of the same columns (timm's inference.py, lines=True).
void print(const PredictFlags& f, nlohmann::json what, const float* z, int64_t K,
           const std::vector<std::string>& names, std::string* csv = nullptr) {
  const std::vector<Prediction> top = top_k(z, K, f.topk, names);
  auto label = [&](const Prediction& p) {
    return p.index < int64_t(names.size()) ? names[size_t(p.index)] : std::to_string(p.index);
  };
  if (csv && f.results_format == "json") {
    nlohmann::ordered_json row;
    row["filename"] = what.contains("image") ? nlohmann::json(results_name(f, what["image"])) : what["row"];
    for (const char* col : {"index", "label", "prob"})
      for (size_t i = 0; i < top.size(); ++i) {
        const std::string key = std::string(col) + "_" + std::to_string(i);
        if (col[0] == 'i')
          row[key] = top[i].index;
        else if (col[0] == 'l')
          row[key] = label(top[i]);
        else
          row[key] = top[i].probability;
      }
    *csv += json_for_output(row) + "\n";
  } else if (csv) {
    std::string row = csv_field(what.contains("image") ? results_name(f, what["image"]) : what["row"].dump());
    std::string idx, lab, prob;
    for (const Prediction& t : top) {
      char p[32];
      std::snprintf(p, sizeof p, "%.6g", t.probability);
      idx += "," + std::to_string(t.index), lab += "," + csv_field(label(t)), prob += std::string(",") + p;
    }
    *csv += row + idx + lab + prob + "\n";
  }
  if (f.json) {
    nlohmann::json j = what;
    j["topk"] = nlohmann::json::array();
    for (const Prediction& t : top)
      j["topk"].push_back({{"index", t.index}, {"label", label(t)}, {"prob", t.probability}});
    if (f.logits) j["logits"] = std::vector<float>(z, z + K);
    std::cout << json_for_output(j) << "\n";
    return;
  }
  std::cout << (what.contains("image") ? what["image"].get<std::string>() : "row " + what["row"].dump())
            << ":";
  for (size_t i = 0; i < top.size(); ++i)
    std::cout << (i ? "," : "") << " " << label(top[i]) << " " << std::fixed << std::setprecision(4)
              << top[i].probability;
  std::cout << "\n";
}
}  // namespace

namespace {
// Flags that change nothing here, said (they were taken in silence).
void note_moot_flags(const PredictFlags& f, const CLI::App& cmd) {
  if (f.logits && !f.json) std::cerr << "vit predict: note: --logits: no effect without --json\n";
  if (cmd.count("--results-format") > 0 && f.results_file.empty())
    std::cerr << "vit predict: note: --results-format: no effect without --results-file\n";
  if (cmd.count("--features") > 0)
    for (const char* flag : {"--topk", "--fullname"})
      if (cmd.count(flag) > 0) std::cerr << "vit predict: note: " << flag << ": no effect with --features\n";
}

// Flags that cannot work together, refused before the model is loaded; --features alone
// means pooled.
void check_flags(PredictFlags& f, bool want_features) {
  VIT_USAGE_CHECK(f.topk > 0, "--topk must be positive, got ", f.topk);
  VIT_USAGE_CHECK(f.batch_size > 0, "--batch-size must be positive, got ", f.batch_size);
  VIT_USAGE_CHECK(!f.images.empty() || !f.tensor.empty(), "give image files or --tensor FILE:NAME");
  VIT_USAGE_CHECK(f.images.empty() || f.tensor.empty(),
                  "give image files or --tensor FILE:NAME, not both (got ", f.images.size(),
                  " image argument(s) and --tensor ", f.tensor, ")");
  if (want_features && f.features.empty()) f.features = "pooled";
  VIT_USAGE_CHECK(!want_features || f.features == "pooled" || f.features == "tokens",
                  "--features: pooled or tokens, got '", f.features, "'");
  VIT_USAGE_CHECK(want_features == !f.out.empty(), want_features
                                                       ? "--features needs --out FILE (.safetensors or .npy)"
                                                       : "--out is for --features");
  VIT_USAGE_CHECK(!f.skip_bad_images || !want_features,
                  "--skip-bad-images: not with --features (the rows of --out are the inputs, in order)");
}

// Decodes files[0..B) into x on the threads, one image of n floats each. A file that does not
// decode stops it (the first bad file's error, as in order), or with skip is said on stderr,
// its row left zero and its error in bad[b] (empty for a good file). Returns the files skipped.
int64_t decode_batch(const std::string* files, int64_t B, const InputSpec& in, bool skip, float* x,
                     std::vector<std::string>& bad) {
  const int64_t n = in.channels * in.height * in.width;
  for_items_on_threads(B, [&](int64_t b) {
    bad[size_t(b)].clear();
    try {
      load_image_input(files[b], in, x + b * n);
    } catch (const ResourceError&) {
      throw;  // descriptors, memory or I/O short: not a bad image, and no hint to skip it
    } catch (const Error& e) {
      if (!skip) throw Error(std::string(e.what()) + " (--skip-bad-images leaves such files out)");
      bad[size_t(b)] = e.what();
      std::fill(x + b * n, x + (b + 1) * n, 0.f);
    }
  });
  int64_t skipped = 0;
  for (int64_t b = 0; b < B; ++b)
    if (!bad[size_t(b)].empty()) {
      std::cerr << "vit predict: skipped " << bad[size_t(b)] << "\n";
      ++skipped;
    }
  return skipped;
}
}  // namespace

namespace {
// vit predict's flags, into f; returns --features (its count says whether it was given).
CLI::Option* add_predict_flags(CLI::App& cmd, PredictFlags& f) {
  f.load.add_to(cmd);
  cmd.add_option("--topk", f.topk, "how many classes to print")->capture_default_str();
  cmd.add_flag("--json", f.json, "one JSON object per line per image (with --features: one for the file)");
  cmd.add_flag("--logits", f.logits, "with --json, include the raw logits");
  cmd.add_option("--tensor", f.tensor,
                 "FILE.safetensors:NAME: predict on a preprocessed float tensor [B,C,H,W]");
  cmd.add_option("-b,--batch-size", f.batch_size, "images per forward pass")->capture_default_str();
  cmd.add_option("--threads", f.threads, "threads (default: all cores)")->check(thread_count());
  f.input.add_to(cmd);
  CLI::Option* results = cmd.add_option(
      "--results-file", f.results_file,
      "also write the predictions to this file, as timm's inference.py: filename (the file's name; "
      "--fullname: its path), index_0.., "
      "label_0.., prob_0.. (the top-k, best first); CSV, or JSON lines for a .json/.jsonl name; - writes "
      "it to stdout (the other lines then go to stderr)");
  cmd.add_option("--results-format", f.results_format,
                 "the --results-file's format whatever its name: csv or json (JSON lines; timm's)")
      ->check(CLI::IsMember({"csv", "json"}));
  cmd.add_flag("--fullname", f.fullname,
               "the --results-file's filename column holds each image's path, not its file name (timm's)")
      ->needs(results);
  cmd.add_option(
      "images", f.images,
      "PNG or JPEG files, or folders of them (their images in timm's order: img2 before img10); - reads "
      "one image from standard input");
  cmd.add_flag("--skip-bad-images", f.skip_bad_images,
               "leave out image files that do not decode (each said on stderr) instead of stopping");
  add_progress_flags(cmd, f.progress, f.log_seconds,
                     "when stderr is a terminal and stdout is not (results to a file)");
  CLI::Option* features =
      cmd.add_option(
             "--features", f.features,
             "write embeddings instead of classes, to --out: pooled (the default: the [N, D] vector the "
             "head reads, timm's pre_logits) or tokens (every token after the final norm, [N, T, D], "
             "timm's forward_features)")
          ->expected(0, 1);
  cmd.add_option("-o,--out", f.out,
                 "with --features: the .safetensors (tensor \"features\", with the inputs' names in its "
                 "metadata) or .npy file to write, rows in the order the inputs are listed");
  return features;
}
}  // namespace

Run add_predict(CLI::App& cmd) {
  auto f = std::make_shared<PredictFlags>();
  CLI::Option* features = add_predict_flags(cmd, *f);
  return [f, features, &cmd] {
    use_threads(f->threads);
    note_moot_flags(*f, cmd);
    const bool want_features = features->count() > 0;
    check_flags(*f, want_features);
    route_stdout({{"--results-file", &f->results_file}});
    const Pretrained loaded = f->input.load_for_inference(f->load, f->batch_size);
    ViT& model = *loaded.model;
    const ViTConfig& cfg = model.config();
    const int64_t n = cfg.in_chans * cfg.img_h * cfg.img_w;

    // The inputs: rows of a tensor, or image files (preprocessed as the model's config says).
    std::vector<float> rows;
    std::vector<std::string> files;
    int64_t N = 0;
    if (!f->tensor.empty()) {
      const TensorSpec spec = parse_tensor_spec(f->tensor);
      rows =
          read_tensor_input(SafeTensors::open(spec.file), spec.name, cfg.in_chans, cfg.img_h, cfg.img_w, &N);
    } else {
      files = image_files(f->images);
      N = int64_t(files.size());
    }
    {  // before any inference: an output must not replace what is read (a folder's images too)
      std::vector<std::string> inputs = files;
      inputs.insert(inputs.end(), {loaded.file, f->load.labels});
      if (!f->tensor.empty()) inputs.push_back(parse_tensor_spec(f->tensor).file);
      check_outputs({{"--results-file", f->results_file}, {"--out", f->out}}, inputs);
    }
    const InputSpec in = f->input.spec(cfg);
    std::vector<float> x(size_t(std::min(f->batch_size, N) * n));
    // Progress on stderr: a bar where it does not mix with results on the same terminal.
    const bool bar = f->progress == "bar" ||
                     (f->progress == "auto" && redraws_on(STDERR_FILENO) && ::isatty(STDOUT_FILENO) == 0);
    EvalProgress progress(std::cerr, bar, bar || f->progress == "log" ? f->log_seconds : 0, "predict");
    progress.start(N);
    // Runs infer(first, B, images) for batches of the inputs, in order. With --skip-bad-images
    // a file that does not decode is said and its row left zero; bad[b] marks it.
    std::vector<std::string> bad(size_t(std::min(f->batch_size, N)));
    int64_t skipped = 0;
    auto for_batches = [&](auto&& infer) {
      for (int64_t first = 0; first < N; first += f->batch_size) {
        const int64_t B = std::min(f->batch_size, N - first);
        if (files.empty()) {
          infer(first, B, rows.data() + first * n);
        } else {
          skipped += decode_batch(files.data() + first, B, in, f->skip_bad_images, x.data(), bad);
          infer(first, B, x.data());
        }
        progress.update(first + B, -1);
      }
      progress.finish();
      if (skipped > 0) std::cerr << "vit predict: " << skipped << " of " << N << " image(s) skipped\n";
    };
    auto what = [&](int64_t i) {
      return files.empty() ? nlohmann::json{{"row", i}} : nlohmann::json{{"image", files[size_t(i)]}};
    };

    if (want_features) {
      const bool tokens = f->features == "tokens";
      const int64_t D = cfg.embed_dim, T = cfg.num_tokens(), per = tokens ? T * D : D;
      const Shape shape = tokens ? Shape{N, T, D} : Shape{N, D};
      nlohmann::json inputs = nlohmann::json::array();
      for (int64_t i = 0; i < N; ++i)
        inputs.push_back(files.empty() ? nlohmann::json(i) : nlohmann::json(files[i]));
      ArrayFileWriter out(
          f->out, "features", shape,
          {{"features", f->features}, {"inputs", json_for_output(inputs)}, {"vitcpp_version", version()}});
      std::vector<float> y(size_t(std::min(f->batch_size, N) * per));
      for_batches([&](int64_t, int64_t B, const float* images) {
        model.infer_features(images, B, nullptr, tokens ? nullptr : y.data(), tokens ? y.data() : nullptr);
        out.append(y.data(), B * per);
      });
      out.finish();
      if (f->json)  // one JSON object, as every --json prints
        std::cout << json_for_output(nlohmann::json{
                         {"features", f->features}, {"shape", shape}, {"count", N}, {"out", f->out}})
                  << "\n";
      else
        std::cout << "wrote " << f->features << " features " << shape_str(shape) << " of " << N
                  << (files.empty() ? " rows" : " images") << " to " << f->out << "\n";
      return 0;
    }

    const auto& names = loaded.class_names;
    const int64_t K = cfg.num_classes;
    VIT_CHECK(model.has_head(), loaded.file,
              ": the model has no classifier head (num_classes 0); ask for its embeddings with --features");
    // --results-file: the header, then a row per prediction; written once, atomically.
    std::string csv;
    std::string* rows_csv = f->results_file.empty() ? nullptr : &csv;
    f->results_format = results_format(f->results_file, f->results_format, "csv");  // timm's default
    if (rows_csv && f->results_format == "csv") {
      csv = "filename";
      for (const char* col : {"index", "label", "prob"})
        for (int64_t i = 0; i < std::min(f->topk, K); ++i)
          csv += std::string(",") + col + "_" + std::to_string(i);
      csv += "\n";
    }
    std::vector<float> logits(size_t(std::min(f->batch_size, N) * K));
    for_batches([&](int64_t first, int64_t B, const float* images) {
      model.infer(images, B, nullptr, logits.data());
      for (int64_t b = 0; b < B; ++b)
        if (files.empty() || bad[size_t(b)].empty())
          print(*f, what(first + b), logits.data() + b * K, K, names, rows_csv);
    });
    if (rows_csv) write_file_atomic(f->results_file, csv);
    return 0;
  };
}

}  // namespace vit::app
