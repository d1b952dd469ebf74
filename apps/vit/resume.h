// vit train --resume DIR: the run's own flags from DIR/args.json, and what is left to do.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

#include "train/trainer.h"

namespace vit::app {

// Whether the run in `dir` has nothing left to do under `t` (all t.epochs done, or stopped
// early by t.patience); if so, says so on `out` and nothing is written. --epochs fewer than
// the epochs already begun is an error.
bool resume_finished(const std::string& dir, const TrainConfig& t, std::ostream& out);
// Keeps a run's new length in DIR/args.json (--resume DIR --epochs N), so that resuming it
// again continues to N epochs; no write when N is what the file says already.
void record_epochs(const std::string& dir, int64_t epochs);

}  // namespace vit::app
