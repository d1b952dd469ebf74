// Checkpoint averaging (vit average; timm's avg_checkpoints.py): the element-wise mean of
// several checkpoints of one model. The best epochs of a run (vit train --checkpoint-hist)
// averaged often evaluate better than any one of them; so can fine-tuned copies of one
// pretrained model (a "model soup").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vit/io/pretrained.h"

namespace vit {

struct SelectedCheckpoint {
  std::string file;
  double top1 = -1;  // `metric` from the file's metadata, in percent; -1 without one
};
struct CheckpointSelection {
  std::vector<SelectedCheckpoint> files;  // best first when ranked, else in the order given
  std::string metric;                     // "eval_top1", "train_top1", or "" when some file has neither
  int64_t candidates = 0;                 // how many files there were to choose from
  bool ranked = false;                    // the files are the best `files.size()` of the candidates
};

// The files to average. Each path is a safetensors file, or a directory: a run directory's
// checkpoint history (checkpoint-E.safetensors) when it has one, else its weights as every
// vit command reads a directory (model.safetensors; a run directory's best.safetensors).
// With n > 0 and fewer than the files found, the n kept are the n best by the top-1 in their
// metadata when `sort` (eval_top1 where every file has it, else train_top1; a file with
// neither is an error that suggests sort = false; ties keep the order given), else the first n.
CheckpointSelection select_checkpoints(const std::vector<std::string>& paths, int64_t n, bool sort);

// Loads every file (vitcpp, timm or Hugging Face, as load_pretrained with opt) and returns the
// first with its parameters replaced by the mean: summed in double in the order given,
// divided by the count and rounded to float once, as timm does. The files must hold the same
// parameters (names and shapes) and, where they name their classes, the same classes; a file
// whose config differs otherwise (dropout rates, pooling) gets a note, and the first's wins.
Pretrained average_checkpoints(const std::vector<std::string>& files, const LoadOptions& opt = {});

}  // namespace vit
