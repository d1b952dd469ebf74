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
// Keeps a run's new length and patience in DIR/args.json (--resume DIR --epochs N --patience
// P), so that resuming it again goes on under them; no write when the file says them already.
void record_resumed(const std::string& dir, const TrainConfig& t);

}  // namespace vit::app
