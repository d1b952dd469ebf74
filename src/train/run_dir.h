// A run directory's rules, so that no run is ever lost: a new run never writes into a
// directory that holds another run; a new directory appears with its args.json already
// inside (so any directory a killed run leaves can be resumed); and --resume finds the
// newest training state by reading the states' headers alone (a ViT-B state is 1 GB).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vit {

// The training states a run writes (src/train/trainer.cpp): at the end of every epoch,
// and a recovery state every --recovery-interval steps within one.
constexpr const char* kStateFile = "last.state.safetensors";
constexpr const char* kRecoveryFile = "recovery.state.safetensors";

// The names of the run files (args.json, config.json, summary.csv, checkpoints, states)
// that directory `dir` holds; empty when it does not exist.
std::vector<std::string> run_files(const std::string& dir);
// Whether `name` (a file name) is one vit train writes into a run directory, or may write
// later: the fixed names, and checkpoint-N.safetensors for any epoch N.
bool is_run_file_name(const std::string& name);

// Throws unless `dir` may take a new run: it does not exist, or it is a directory that
// holds no run files. The message names the files and says how to continue the run.
void check_new_run_dir(const std::string& dir);
// Creates and removes a file in dir: a read-only or full directory is an error naming it.
void check_writable_dir(const std::string& dir);

// Makes `dir` hold args.json with `args_json`. A directory that does not exist (or is
// empty) is made under a temporary name and renamed into place, so it never exists
// without its args.json; an existing one gets args.json written atomically. Checks again
// that no run has appeared in the meantime.
void create_run_dir(const std::string& dir, const std::string& args_json);

// A run that failed before it wrote anything to resume from (no training state): its files
// are removed, and the directory too when the run made it (made_dir), so that the same
// command, mended (--skip-bad-images), may take the name again; nothing trained is lost.
// Returns whether it removed them (false: a state exists, and --resume continues it; or an
// epoch's weights, last.safetensors, without one, which are kept).
bool remove_untrained_run(const std::string& dir, bool made_dir);
// Whether `dir` holds a training state (kStateFile or kRecoveryFile) to resume from.
bool run_has_state(const std::string& dir);

// One writer per run directory: an exclusive flock(2) on the directory itself (its inode
// stays while the files in it are replaced), held until this is destroyed or the process
// ends, a crash or SIGKILL included. Throws when another process holds it, so that a
// --resume started while the run still goes (a second terminal, a requeued job whose
// first copy still runs) stops before it touches anything. Where the file system has no
// such locks (some network mounts) the directory is not locked.
class RunDirLock {
 public:
  explicit RunDirLock(const std::string& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

// The checkpoint history (vit train --checkpoint-hist N, timm's CheckpointSaver): after each
// epoch the N best epochs' weights stay in the run directory as checkpoint-E.safetensors
// (E from 1, as summary.csv counts), for vit average or to pick an epoch by hand.
std::string checkpoint_name(int64_t epoch);
// The epochs a history of n keeps after epochs with these scores (scores[i] is epoch i + 1's,
// higher is better), best first. timm's rule, replayed epoch by epoch: an epoch enters while
// fewer than n are kept, or when it beats the worst kept one strictly (which then leaves);
// among equal scores the earlier epoch ranks first. So a resumed run keeps what it would
// have kept without the interruption, from its history alone.
std::vector<int64_t> kept_checkpoints(const std::vector<double>& scores, int64_t n);
// The epochs of the checkpoint-E.safetensors files in dir, ascending.
std::vector<int64_t> checkpoint_epochs(const std::string& dir);
// Removes dir's checkpoint-E.safetensors files whose epoch is not in keep.
void prune_checkpoints(const std::string& dir, const std::vector<int64_t>& keep);

// Where a run stands, from its newest training state's header.
struct StateInfo {
  std::string path;  // the state file
  int64_t epochs_done = 0, global_step = 0;
  int64_t step_in_epoch = 0;     // > 0: a recovery state within epoch epochs_done + 1
  int64_t since_best = 0;        // epochs without a better eval top-1 (early stopping)
  std::optional<uint64_t> seed;  // the seed the run used
};
// The newest of dir's training states (the most optimizer steps), or nothing when the run
// has none yet (killed before its first). Throws on a state that cannot be read.
std::optional<StateInfo> newest_state(const std::string& dir);

}  // namespace vit
