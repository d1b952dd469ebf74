// vit eval: top-1, top-5, loss, per-class accuracy and the confusion matrix of a checkpoint
// on a dataset split.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "core/check.h"
#include "core/file.h"
#include "core/threads.h"
#include "core/utf8.h"
#include "data/open.h"
#include "model_flags.h"
#include "outputs.h"
#include "train/progress.h"
#include "train/trainer.h"
#include "validators.h"
#include "viz/figures.h"

namespace vit::app {

namespace {
struct EvalFlags {
  LoadFlags load;
  std::string data_dir, dataset = "auto", split = "test", confusion_png, predictions, results_file,
                        results_format, progress = "auto";
  double log_seconds = 10;
  int64_t batch_size = 256;
  int threads = 0;
  InputFlags input;
  bool json = false, skip_bad_images = false;
};

// --predictions: index,label,prediction per image in dataset order, then label_name and
// prediction_name where the classes have names (the data's for the labels, the model's for
// its predictions: a folder of other classes than the model's numbers them its own way), and
// file where the data knows its files.
void write_predictions(const std::string& path, const EvalResult& r, const Dataset& data,
                       const std::vector<std::string>& names, const std::vector<std::string>& predicted) {
  const bool named = !names.empty(), files = data.size() > 0 && !data.source(0).empty();
  std::string csv = std::string("index,label,prediction") + (named ? ",label_name,prediction_name" : "") +
                    (files ? ",file" : "") + "\n";
  for (size_t i = 0; i < r.predictions.size(); ++i) {
    csv += std::to_string(i) + "," + std::to_string(r.labels[i]) + "," + std::to_string(r.predictions[i]);
    if (named)
      csv +=
          "," + csv_field(names[size_t(r.labels[i])]) + "," + csv_field(predicted[size_t(r.predictions[i])]);
    if (files) csv += "," + csv_field(data.source(int64_t(i)));
    csv += "\n";
  }
  write_file_atomic(path, csv);
}

// --results-file: timm validate.py's results, accuracies in percent to 4 decimals, as JSON
// or as timm's CSV (a header, then the row).
void write_results_file(const std::string& path, const std::string& format, const std::string& checkpoint,
                        const ViT& model, const InputSpec& in, double top1, double top5) {
  int64_t params = 0;
  for (const auto& s : model.table().specs()) params += s.numel();
  // To `per` parts of one (10000: 4 decimals), divided last so that 0.69 prints as 0.69
  // (multiplied by 1e-4 it was 0.6900000000000001).
  auto round_to = [](double v, double per) { return std::round(v * per) / per; };
  const nlohmann::ordered_json res = {{"model", checkpoint},
                                      {"top1", round_to(top1, 1e4)},
                                      {"top1_err", round_to(100 - top1, 1e4)},
                                      {"top5", round_to(top5, 1e4)},
                                      {"top5_err", round_to(100 - top5, 1e4)},
                                      {"param_count", round_to(double(params) / 1e6, 100)},
                                      {"img_size", in.height},
                                      {"crop_pct", in.crop_pct},
                                      {"interpolation", resize_filter(in)}};
  if (format == "json") {
    write_file_atomic(path, json_for_output(res, 4) + "\n");
    return;
  }
  std::string header, row;
  for (const auto& [key, v] : res.items()) {
    header += (header.empty() ? "" : ",") + key;
    row += (row.empty() ? "" : ",") + (v.is_string() ? csv_field(v.get<std::string>()) : v.dump());
  }
  write_file_atomic(path, header + "\n" + row + "\n");
}

// "top-1 T%  top-5 F%  loss L  (N images", as vit eval prints it.
std::string summary(const EvalResult& r) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << "top-1 " << 100 * r.top1 << "%  top-5 " << 100 * r.top5
    << "%  loss " << std::setprecision(4) << r.loss << "  (" << r.count << " images";
  return s.str();
}

// The confusion matrix as rows of counts, a row per true class.
nlohmann::json confusion_rows(const EvalResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t k = 0; k < r.num_classes; ++k)
    rows.push_back(std::vector<int64_t>(r.confusion.begin() + k * r.num_classes,
                                        r.confusion.begin() + (k + 1) * r.num_classes));
  return rows;
}
}  // namespace

namespace {
// vit eval's flags, into f.
void add_eval_flags(CLI::App& cmd, EvalFlags& f) {
  f.load.add_to(cmd);
  cmd.add_option("--data-dir", f.data_dir, "dataset directory (only the --split evaluated is read)")
      ->required();
  cmd.add_option(
         "--dataset", f.dataset,
         "auto, idx, cifar10, cifar100 (its fine labels), cifar100-coarse (its 20 superclasses) or folder")
      ->capture_default_str();
  cmd.add_option("--split", f.split, "test, val (the same: the held-out split) or train")
      ->check(CLI::IsMember({"test", "val", "train"}))
      ->capture_default_str();
  cmd.add_option("-b,--batch-size", f.batch_size, "batch size")->capture_default_str();
  cmd.add_option("--threads", f.threads, "threads (default: all cores)")->check(thread_count());
  f.input.add_to(cmd);
  cmd.add_flag("--json", f.json, "print one JSON object");
  add_progress_flags(cmd, f.progress, f.log_seconds, "when stderr is a terminal");
  cmd.add_option("--confusion-png", f.confusion_png, "also draw the confusion matrix as a PNG heatmap");
  cmd.add_option("--predictions", f.predictions,
                 "also write index,label,prediction per image (dataset order) to this CSV file, then "
                 "label_name,prediction_name where the classes have names, and file for image folders; - "
                 "writes it to stdout (the other lines then go to stderr)");
  cmd.add_option(
      "--results-file", f.results_file,
      "also write timm validate.py's results (model, top1, top1_err, top5, top5_err, param_count, "
      "img_size, crop_pct, interpolation; accuracies in percent) to this file: JSON, or timm's CSV "
      "for a .csv name; - writes it to stdout (the other lines then go to stderr)");
  cmd.add_option("--results-format", f.results_format,
                 "the --results-file's format whatever its name: json or csv (timm's)")
      ->check(CLI::IsMember({"csv", "json"}));
  cmd.add_flag("--skip-bad-images", f.skip_bad_images,
               "image folders: leave out files that do not decode (listed on stderr) instead of stopping");
}
}  // namespace

Run add_eval(CLI::App& cmd) {
  auto f = std::make_shared<EvalFlags>();
  add_eval_flags(cmd, *f);
  return [f, &cmd] {
    use_threads(f->threads);
    if (cmd.count("--results-format") > 0 && f->results_file.empty())  // taken in silence before
      std::cerr << "vit eval: note: --results-format: no effect without --results-file\n";
    VIT_USAGE_CHECK(f->batch_size > 0, "batch size must be positive, got ", f->batch_size);
    route_stdout({{"--predictions", &f->predictions}, {"--results-file", &f->results_file}});
    check_png_name("--confusion-png", f->confusion_png);  // before the checkpoint loads
    const Pretrained loaded = f->input.load_for_inference(f->load, f->batch_size);
    check_outputs({{"--predictions", f->predictions},
                   {"--results-file", f->results_file},
                   {"--confusion-png", f->confusion_png}},
                  {loaded.file, f->load.labels});
    const auto& model = loaded.model;
    const ViTConfig& cfg = model->config();
    const InputSpec in = f->input.spec(cfg);
    DataSources d = make_datasets(f->data_dir, f->dataset, in, 0.0, 0, f->skip_bad_images,
                                  f->split == "train" ? Splits::train : Splits::eval, loaded.class_names,
                                  /*timm_order=*/loaded.format == "timm" && loaded.class_names.empty());
    if (d.kind == "folder" && loaded.class_names.empty() &&
        int64_t(d.class_names.size()) != cfg.num_classes) {
      // A model without class names reads a folder's classes by their order alone.
      d.notes.push_back(detail::concat(
          f->data_dir, ": ", d.class_names.size(), " class folders for a model of ", cfg.num_classes,
          " classes without class names: the folders are classes 0, 1, ... in ",
          loaded.format == "timm" ? "timm's order (" : "sorted order (", class_numbering(d.class_names),
          loaded.format == "timm" ? "), as timm's folder reader numbers them"
                                  : "), as torchvision's ImageFolder numbers them"));
    }
    print_data_notes(d, std::cerr);  // stderr: --json keeps stdout one object
    const Dataset& data = f->split == "train" ? *d.train : *d.eval;
    // Read before the evaluation, so a bad labels file fails at once.
    // Class names for --confusion-png: --labels, else the dataset's, else the checkpoint's.
    const auto& names = !f->load.labels.empty() || d.class_names.empty() ? loaded.class_names : d.class_names;
    // Progress on stderr (--json keeps stdout one object): a bar where stderr is a terminal,
    // lines with --progress log, else none.
    const bool bar = f->progress == "bar" || (f->progress == "auto" && redraws_on(STDERR_FILENO));
    EvalProgress progress(std::cerr, bar, f->log_seconds, "eval");
    // A batch no larger than the split, as timm's loader gives (-b 2000000 on 10,000 images
    // held 6.6 GB of buffers for the same numbers).
    const int64_t batch = std::min<int64_t>(f->batch_size, std::max<int64_t>(data.size(), 1));
    const EvalResult r =
        evaluate(*model, data, batch, nullptr, bar || f->progress == "log" ? &progress : nullptr);
    const auto per_class = r.per_class();
    // Class names where the model or the data has them, the indices alone for classes past
    // them (a 5-class head fine-tuned on 3 named folders; vit predict names them so too).
    const bool named = !names.empty() && int64_t(names.size()) <= r.num_classes;
    // An index past the names, "#9" where a name is "9" (a folder 9 that is class 8).
    std::vector<std::string> class_name =
        named ? names_for_every_class(names, r.num_classes) : std::vector<std::string>{};
    for (int64_t k = int64_t(class_name.size()); k < r.num_classes; ++k)
      class_name.push_back(std::to_string(k));
    auto class_images = [&](size_t k) {  // the images of true class k
      int64_t n = 0;
      for (int64_t j = 0; j < r.num_classes; ++j) n += r.confusion[k * size_t(r.num_classes) + size_t(j)];
      return n;
    };
    // Accuracies in percent, as timm writes them under the same names.
    const double top1 = 100 * r.top1, top5 = 100 * r.top5;
    std::vector<double> per_class_pct(per_class.size());
    for (size_t k = 0; k < per_class.size(); ++k) per_class_pct[k] = 100 * per_class[k];
    try {
      if (!f->predictions.empty())
        write_predictions(
            f->predictions, r, data, named ? class_name : std::vector<std::string>{},
            int64_t(loaded.class_names.size()) == r.num_classes ? loaded.class_names : class_name);
      if (!f->results_file.empty())
        write_results_file(f->results_file, results_format(f->results_file, f->results_format, "json"),
                           f->load.checkpoint, *model, in, top1, top5);
      if (!f->confusion_png.empty()) {
        char title[96];
        std::snprintf(title, sizeof title, "confusion matrix: top-1 %.2f%% on %lld images", top1,
                      static_cast<long long>(r.count));
        viz::confusion_figure(r.confusion, r.num_classes, named ? class_name : names, title,
                              f->confusion_png);
      }
    } catch (const Error&) {
      // A file that could not be written (a full disk) does not lose the evaluation: its
      // numbers come before the error.
      std::cerr << "vit eval: " << summary(r) << "); an output could not be written:" << std::endl;
      throw;
    }
    // Where the files went: lines of their own, or fields of the JSON object.
    const std::pair<const char*, const std::string*> written[] = {{"predictions", &f->predictions},
                                                                  {"results_file", &f->results_file},
                                                                  {"confusion_png", &f->confusion_png}};
    if (f->json) {
      nlohmann::json per_class_json = nlohmann::json::array();  // null for a class without images here
      for (size_t k = 0; k < per_class_pct.size(); ++k)
        per_class_json.push_back(class_images(k) ? nlohmann::json(per_class_pct[k])
                                                 : nlohmann::json(nullptr));
      nlohmann::json j = {{"top1", top1},
                          {"top5", top5},
                          {"loss", r.loss},
                          {"count", r.count},
                          {"dtype", model->infer_dtype()},  // the blocks' products: fp32, bf16 or int8
                          {"per_class", per_class_json}};
      if (named) j["class_names"] = class_name;  // per_class's and confusion's order
      for (auto [key, file] : written)
        if (!file->empty()) j[key] = *file;
      j["confusion"] = confusion_rows(r);
      std::cout << json_for_output(j) << "\n";
      return 0;
    }
    std::cout << data.describe() << "\n"
              << summary(r)
              << (model->infer_dtype() == "fp32" ? "" : ", " + model->infer_dtype() + " products")
              << ")\nper class:";
    // Each class by its name where it has one; "n/a" for a class without images here.
    const size_t per_line = named ? 5 : 10;
    for (size_t k = 0; k < per_class.size(); ++k) {
      const int64_t images = class_images(k);
      std::cout << (k % per_line ? "  " : "\n  ") << class_name[k] << ": ";
      if (images == 0)
        std::cout << "n/a";
      else
        std::cout << std::fixed << std::setprecision(1) << per_class_pct[k] << "%";
    }
    std::cout << "\n";
    for (auto [key, file] : written)
      if (!file->empty()) std::cout << "wrote " << *file << " (" << key << ")\n";
    return 0;
  };
}

}  // namespace vit::app
