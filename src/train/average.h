// Checkpoint averaging (vit average; timm's avg_checkpoints.py): the element-wise mean of
// several checkpoints of one model. The best epochs of a run (vit train --checkpoint-hist)
// averaged often evaluate better than any one of them; so can fine-tuned copies of one
// pretrained model (a "model soup").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/pretrained.h"

namespace vit {

struct SelectedCheckpoint {
  std::string file;
  double value = 0;  // `metric` from the file's metadata (accuracies in percent)
};
struct CheckpointSelection {
  std::vector<SelectedCheckpoint> files;  // best first when ranked, else in the order given
  std::string metric;      // the metadata key read ("eval_top1", ...); "" when some file lacks it
  int64_t candidates = 0;  // how many files there were to choose from
  bool ranked = false;     // the files are the best `files.size()` of the candidates
  bool lower_is_better() const { return metric.ends_with("_loss"); }
};

// The files to average. Each path is a safetensors file, or a directory: a run directory's
// checkpoint history (checkpoint-E.safetensors) when it has one, else its weights as every
// vit command reads a directory (model.safetensors; a run directory's best.safetensors).
// With n > 0 and fewer than the files found, the n kept are the n best by their metadata when
// `sort` (by the metric their run ranked by, its "metric" key, where they agree: eval_top1,
// eval_loss, ...; else eval_top1, else train_top1; a file without is an error that suggests
// sort = false; ties keep the order given), else the first n.
CheckpointSelection select_checkpoints(const std::vector<std::string>& paths, int64_t n, bool sort);

// Loads every file (vitcpp, timm or Hugging Face, as load_pretrained with opt) and returns the
// first with its parameters replaced by the mean: summed in double in the order given,
// divided by the count and rounded to float once, as timm does. The files must hold the same
// parameters (names and shapes) and, where they name their classes, the same classes; a file
// whose config differs otherwise (dropout rates, pooling) gets a note, and the first's wins.
Pretrained average_checkpoints(const std::vector<std::string>& files, const LoadOptions& opt = {});

}  // namespace vit
