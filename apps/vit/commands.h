// The vit program's subcommands. Each registers its flags on the CLI11 app and returns the
// function that runs it; apps only parse flags and print, the library does the work.
#pragma once
#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/settings.h"
#include "core/threads.h"

namespace vit::app {

using Run = std::function<int()>;

// --threads (0 keeps OpenMP's count), then each thread bound to a CPU of its own where they
// are as many as the CPUs (vit::bind_threads says when and why), as VIT_BIND says: auto as
// vit::binds_by_default (inference on two threads), on any run, off nothing. Training (vit
// train, bench --mode train) is left free by default: its data loader's thread would share a
// CPU with one of the bound threads, and the other would wait on it.
// Says when OMP_THREAD_LIMIT holds --threads n to fewer (exact_teams holds the count to it).
inline void note_thread_limit(int n) {
  if (n > thread_limit())
    std::cerr << "vit: note: --threads " << n << ": OMP_THREAD_LIMIT=" << thread_limit() << " holds it to "
              << thread_limit() << "\n";
}

inline void use_threads(int n, bool training = false) {
  set_num_threads(n);
  note_thread_limit(n);
  const std::string_view bind = setting_choice("VIT_BIND");  // "" is auto
  if (bind == "on" || (bind != "off" && binds_by_default(num_threads(), training))) bind_threads();
}

// The variables of docs/environment.md that are set, as NAME=value words (a sentence saying so when none is):
// what vit info and vit bench ran under.
inline std::string environment_line() {
  std::string line;
  for (const auto& [name, value] : settings_set()) line += (line.empty() ? "" : " ") + name + "=" + value;
  return line.empty() ? "none of vitcpp's environment variables set" : line;
}

// A file output's folder is made when missing (mkdir -p), as `vit train --output` makes its
// run directory: `vit average`, `vit quantize` and `vit export --format onnx`.
inline void create_parent_folder(const std::string& file) {
  if (const std::filesystem::path parent = std::filesystem::path(file).parent_path(); !parent.empty())
    std::filesystem::create_directories(parent);
}

// A CSV field (predict's --results-file, eval's --predictions): quoted when it holds a
// comma, a quote or a line break.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// A --results-file's format: the one given (--results-format), else by the file's name
// (.csv, .json or .jsonl), else `fallback`.
inline std::string results_format(const std::string& path, const std::string& given,
                                  const std::string& fallback) {
  if (!given.empty()) return given;
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".csv" ? "csv" : ext == ".json" || ext == ".jsonl" ? "json" : fallback;
}

// args.json's format, written into every new run beside the flags (not a flag: --resume
// leaves it out): 2 since --aa reads timm's options after -nN (2026-12-06), 3 since --aa
// leaves --color-jitter out (2026-12-06), 4 since --opt sgd is Nesterov's, as timm's
// (2026-12-06), 6 since --model beside --pretrained names the model the file is (2026-12-07).
// resume.cpp reads a run of an older version as the older program ran it.
constexpr int kArgsVersion = 6;

// `vit train --resume DIR [--threads N]` becomes the run's saved arguments from
// DIR/args.json plus those; other command lines are returned unchanged.
std::vector<std::string> expand_resume(std::vector<std::string> args);
// `vit train --recipe NAME ...` becomes the recipe's flags followed by the given ones.
std::vector<std::string> expand_recipe(std::vector<std::string> args);
std::vector<std::string> recipe_names();

Run add_train(CLI::App& app);
Run add_eval(CLI::App& app);
Run add_predict(CLI::App& app);
Run add_info(CLI::App& app);
Run add_samples(CLI::App& app);
Run add_export(CLI::App& app);
Run add_quantize(CLI::App& app);
Run add_average(CLI::App& app);
Run add_attention(CLI::App& app);
Run add_plot(CLI::App& app);
Run add_bench(CLI::App& app);
Run add_serve(CLI::App& app);

}  // namespace vit::app
