#include "train/average.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/check.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "train/run_dir.h"

namespace vit {

namespace fs = std::filesystem;

namespace {

// The files one path names (see select_checkpoints).
std::vector<std::string> expand(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    VIT_CHECK(fs::exists(path, ec), path, ": no such file or directory");
    return {path};
  }
  std::vector<std::string> files;
  for (int64_t e : checkpoint_epochs(path)) files.push_back((fs::path(path) / checkpoint_name(e)).string());
  if (files.empty()) files.push_back(weights_file(path));
  return files;
}

// The metadata value `key` as a number, or nothing when absent or not a number.
bool read_metric(const std::map<std::string, std::string>& meta, const std::string& key, double& out) {
  const auto it = meta.find(key);
  if (it == meta.end()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || errno != 0 || !std::isfinite(v)) return false;
  out = v;
  return true;
}

}  // namespace

CheckpointSelection select_checkpoints(const std::vector<std::string>& paths, int64_t n, bool sort) {
  VIT_CHECK(!paths.empty(), "no checkpoints to average");
  CheckpointSelection sel;
  for (auto& p : paths)
    for (auto& f : expand(p)) sel.files.push_back({f, 0});
  sel.candidates = int64_t(sel.files.size());
  // The metric every file has (headers only): the one their run ranked by (their "metric"),
  // else eval_top1, else train_top1, else none. Losses rank lowest first.
  std::vector<std::map<std::string, std::string>> metas;
  for (auto& s : sel.files) metas.push_back(read_safetensors_metadata(s.file));
  std::vector<std::string> keys;
  if (const auto m = metas[0].find("metric");
      m != metas[0].end() && std::all_of(metas.begin(), metas.end(), [&](auto& x) {
        return x.count("metric") && x.at("metric") == m->second;
      }))
    keys.push_back(m->second);
  keys.insert(keys.end(), {"eval_top1", "train_top1"});
  const char* missing = nullptr;
  for (const auto& key : keys) {
    double v = 0;
    const auto lacks =
        std::find_if(metas.begin(), metas.end(), [&](auto& m) { return !read_metric(m, key, v); });
    if (lacks == metas.end()) {
      sel.metric = key;
      break;
    }
    if (!missing) missing = sel.files[size_t(lacks - metas.begin())].file.c_str();
  }
  for (size_t i = 0; i < sel.files.size() && !sel.metric.empty(); ++i)
    read_metric(metas[i], sel.metric, sel.files[i].value);
  if (n <= 0 || n >= sel.candidates) return sel;
  if (sort) {
    VIT_CHECK(!sel.metric.empty(), missing,
              ": no eval_top1 or train_top1 in its metadata to rank it by (vit train writes them); --no-sort "
              "averages the first ",
              n, " files as given");
    const bool lower = sel.lower_is_better();
    std::stable_sort(sel.files.begin(), sel.files.end(),
                     [&](auto& a, auto& b) { return lower ? a.value < b.value : a.value > b.value; });
    sel.ranked = true;
  }
  sel.files.resize(size_t(n));
  return sel;
}

Pretrained average_checkpoints(const std::vector<std::string>& files, const LoadOptions& opt) {
  VIT_CHECK(!files.empty(), "no checkpoints to average");
  Pretrained first = load_pretrained(files[0], opt);
  ViT& model = *first.model;
  const int64_t total = model.table().total();
  float* w = model.params().data();
  std::vector<double> sum(w, w + total);
  const std::string config = model.config().to_json(-1);
  for (size_t i = 1; i < files.size(); ++i) {
    const Pretrained other = load_pretrained(files[i], opt);
    const auto& a = model.table().specs();
    const auto& b = other.model->table().specs();
    for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
      VIT_CHECK(k < a.size() && k < b.size() && a[k].name == b[k].name && a[k].shape == b[k].shape,
                other.file, " is another model than ", first.file, ": ",
                k < a.size() ? a[k].name + " " + shape_str(a[k].shape) : std::string("nothing"), " against ",
                k < b.size() ? b[k].name + " " + shape_str(b[k].shape) : std::string("nothing"));
    }
    VIT_CHECK(
        first.class_names.empty() || other.class_names.empty() || first.class_names == other.class_names,
        other.file, " names other classes than ", first.file, "; their heads cannot be averaged");
    if (first.class_names.empty()) first.class_names = other.class_names;
    if (other.model->config().to_json(-1) != config)
      first.notes.push_back(other.file + ": its config differs from " + first.file +
                            "'s beyond the parameters; the average has " + first.file + "'s");
    const float* o = other.model->params().data();
    for (int64_t j = 0; j < total; ++j) sum[size_t(j)] += double(o[j]);
  }
  const double count = double(files.size());
  for (int64_t j = 0; j < total; ++j) w[j] = float(sum[size_t(j)] / count);
  return first;
}

}  // namespace vit
