// vit average: the mean of several checkpoints' weights (timm's avg_checkpoints.py), by
// default the 10 best of a run's checkpoint history by their eval top-1.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/check.h"
#include "core/file.h"
#include "io/checkpoint.h"
#include "model_flags.h"
#include "outputs.h"
#include "train/average.h"
#include "validators.h"

namespace vit::app {

namespace fs = std::filesystem;

Run add_average(CLI::App& cmd) {
  struct Flags {
    std::vector<std::string> inputs;
    std::string output;
    int64_t n = 10;
    bool no_sort = false;
    int64_t num_heads = 0;
  };
  auto f = std::make_shared<Flags>();
  cmd.add_option("inputs", f->inputs,
                 "checkpoints (vitcpp, timm or Hugging Face .safetensors), or directories: a vit train run's "
                 "checkpoint history (--checkpoint-hist: its checkpoint-EPOCH.safetensors), else the "
                 "directory's weights (model.safetensors, a run's best.safetensors)")
      ->required();
  cmd.add_option("-o,--output", f->output, "the averaged checkpoint to write (.safetensors)")->required();
  cmd.add_option("-n", f->n,
                 "average the N best by the metric their run ranked by (--eval-metric; else eval top-1, "
                 "else train top-1, from their metadata), or the first N with --no-sort (timm's; 0 = all)")
      ->check(non_negative())
      ->capture_default_str();
  cmd.add_flag("--no-sort", f->no_sort, "take the files in the order given instead of the best");
  cmd.add_option("--num-heads", f->num_heads, "attention heads, for a timm file whose config does not say")
      ->check(positive());
  return [f] {
    // The output first: nothing is read when it cannot be written.
    std::error_code ec;
    VIT_USAGE_CHECK(fs::path(f->output).extension() == ".safetensors", "--output ", f->output,
                    ": the average is written as safetensors; name the file NAME.safetensors");
    VIT_CHECK(!fs::is_directory(f->output, ec), "--output ", f->output,
              " is a directory; name a .safetensors file");
    create_parent_folder(f->output);
    const CheckpointSelection sel = select_checkpoints(f->inputs, f->n, !f->no_sort);
    for (auto& s : sel.files)
      VIT_CHECK(!fs::equivalent(s.file, f->output, ec), "--output ", f->output, " is one of the inputs (",
                s.file, "); write the average to another file");
    check_outputs({{"--output", f->output}}, {}, true);  // not a run's own file (best.safetensors)
    std::cout << "averaging " << sel.files.size() << " checkpoint(s)";
    if (sel.ranked)
      std::cout << ", the best by " << sel.metric << " of " << sel.candidates;
    else if (int64_t(sel.files.size()) < sel.candidates)
      std::cout << ", the first of " << sel.candidates;
    std::cout << ":\n";
    for (auto& s : sel.files) {
      std::cout << "  " << s.file;
      if (sel.lower_is_better())
        std::cout << "  " << sel.metric << " " << std::setprecision(4) << s.value;
      else if (!sel.metric.empty())
        std::cout << "  " << sel.metric << " " << std::fixed << std::setprecision(2) << s.value << "%";
      std::cout << "\n";
    }
    std::vector<std::string> files;
    for (auto& s : sel.files) files.push_back(s.file);
    LoadOptions opt;
    opt.num_heads = f->num_heads;
    const Pretrained avg = average_checkpoints(files, opt);
    print_notes(avg, std::cerr);
    // The files as named here (two model.safetensors of two directories stay apart).
    std::map<std::string, std::string> meta = {{"averaged_from", nlohmann::json(files).dump()}};
    if (!avg.class_names.empty()) meta["class_names"] = nlohmann::json(avg.class_names).dump();
    save_checkpoint(f->output, *avg.model, meta, false);
    std::cout << "wrote " << f->output << " (evaluate it: vit eval --checkpoint " << shell_word(f->output)
              << " --data-dir DIR)" << std::endl;
    return 0;
  };
}

}  // namespace vit::app
