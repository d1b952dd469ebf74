// `vit train` run from another program (Python's vitcpp.train): the same flags, defaults,
// run directory and bits, with the parts the vit program gets from its command line and
// its process in the caller's hands: the data, the stop request, a call after each epoch,
// and the trained model at the end.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "data/open.h"
#include "model/vit.h"
#include "train/trainer.h"

namespace vit::app {

struct TrainHooks {
  // In place of --data-dir and --synthetic: the datasets at the model's input `in` (training
  // images at training_input(in)), split as --val-split says; named `data_name` in the log.
  std::function<DataSources(const InputSpec& in, double val_split, uint64_t seed)> data;
  std::string data_name = "arrays";
  // In place of SIGINT and SIGTERM (TrainConfig::stop_requested): a nonzero answer stops the
  // run after its step, with a state that --resume continues.
  std::function<int()> stop_requested;
  std::function<void(const EpochStats&)> on_epoch_end;  // TrainConfig::on_epoch_end
  // In place of standard output: where the run's lines and progress go (Python's sys.stdout,
  // which a notebook shows and redirect_stdout captures), and whether it is a terminal
  // (--progress auto draws a bar there).
  std::ostream* log = nullptr;
  bool log_is_terminal = false;

  // Filled by the run: the history (summary.csv's rows), whether the run wrote files
  // and an eval set was used, the model as training left it (also when stopped), and the
  // stop's message ("stopped after epoch 2 ...") when a stop request ended it.
  std::vector<EpochStats> history;
  bool has_eval = false, model_ema = false;
  std::unique_ptr<ViT> model;
  std::vector<std::string> class_names;  // the data's, where it names its classes
  std::string stopped;
};

// `vit train`'s flags on cmd, run with hooks (null: as the vit program runs it).
std::function<int()> add_train(CLI::App& cmd, TrainHooks* hooks);

// Runs `vit train ARGS` (ARGS without "train"; --recipe and --resume expanded as the vit
// program expands them) with `hooks` (may be null). Returns its exit status; a bad flag
// throws CLI::ParseError, a failure vit::Error, as the vit program would report them.
int run_train(const std::vector<std::string>& args, TrainHooks* hooks);

}  // namespace vit::app
