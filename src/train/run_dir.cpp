#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/check.h"
#include "core/file.h"
#include "core/json_number.h"
#include "core/json_parse.h"
#include "io/safetensors.h"

namespace vit {

namespace fs = std::filesystem;

namespace {
// What `vit train` writes into a run directory.
constexpr const char* kRunFiles[] = {
    "args.json",        "config.json",          "summary.csv",          "last.safetensors",
    "best.safetensors", "last_ema.safetensors", "best_ema.safetensors", kStateFile,
    kRecoveryFile};

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void refuse_if_run(const std::string& dir) {
  const auto files = run_files(dir);
  VIT_CHECK(files.empty(), "--output ", dir, " already holds a run (", joined(files),
            "); continue it with --resume ", shell_word(dir), " or choose another --output");
}
}  // namespace

RunDirLock::RunDirLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  VIT_CHECK(fd_ >= 0, dir, ": cannot open the run directory: ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  if (err == EWOULDBLOCK) {
    ::close(fd_);
    fd_ = -1;
    throw Error(detail::concat(
        dir, " is in use: another vit train is writing it; let it end, or stop it ",
        "(Ctrl-C, SIGTERM or SIGHUP: it stops after its step with a state), then --resume ", dir));
  }
  // No locks on this file system (ENOLCK, EINVAL, ...): go on unlocked, as before locks.
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

std::vector<std::string> run_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const char* f : kRunFiles)
    if (fs::exists(fs::path(dir) / f, ec)) out.push_back(f);
  for (int64_t e : checkpoint_epochs(dir)) out.push_back(checkpoint_name(e));
  return out;
}

bool run_has_state(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / kStateFile, ec) || fs::exists(fs::path(dir) / kRecoveryFile, ec);
}

bool remove_untrained_run(const std::string& dir, bool made_dir) {
  std::error_code ec;
  // By name: a corrupt state is kept too. And a finished epoch's weights with no state (the
  // state's write failed after them: a full disk) are kept: the one thing the run has to show.
  for (const char* kept : {kStateFile, kRecoveryFile, "last.safetensors"})
    if (fs::exists(fs::path(dir) / kept, ec)) return false;
  if (made_dir) return fs::remove_all(dir, ec) > 0 && !ec;
  for (const std::string& f : run_files(dir)) fs::remove(fs::path(dir) / f, ec);
  return true;
}

std::string checkpoint_name(int64_t epoch) {
  return "checkpoint-" + std::to_string(epoch) + ".safetensors";
}

std::vector<int64_t> kept_checkpoints(const std::vector<double>& scores, int64_t n) {
  std::vector<std::pair<double, int64_t>> kept;  // (score, epoch), best first
  for (size_t i = 0; i < scores.size() && n > 0; ++i) {
    if (int64_t(kept.size()) >= n && !(scores[i] > kept.back().first)) continue;
    if (int64_t(kept.size()) >= n) kept.pop_back();
    kept.emplace_back(scores[i], int64_t(i) + 1);
    std::stable_sort(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.first > b.first; });
  }
  std::vector<int64_t> epochs;
  for (auto& k : kept) epochs.push_back(k.second);
  return epochs;
}

namespace {
// N of a file named checkpoint-N.safetensors (no "checkpoint-07"), else -1.
int64_t checkpoint_epoch(const std::string& name) {
  constexpr std::string_view pre = "checkpoint-", post = ".safetensors";
  if (name.size() <= pre.size() + post.size() || !name.starts_with(pre) || !name.ends_with(post)) return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - post.size());
  if (digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return checkpoint_name(std::stoll(digits)) == name ? std::stoll(digits) : -1;
}
}  // namespace

bool is_run_file_name(const std::string& name) {
  return checkpoint_epoch(name) >= 0 ||
         std::find(std::begin(kRunFiles), std::end(kRunFiles), std::string_view(name)) != std::end(kRunFiles);
}

std::vector<int64_t> checkpoint_epochs(const std::string& dir) {
  std::vector<int64_t> epochs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (const int64_t e = checkpoint_epoch(it->path().filename().string()); e >= 0) epochs.push_back(e);
  std::sort(epochs.begin(), epochs.end());
  return epochs;
}

void prune_checkpoints(const std::string& dir, const std::vector<int64_t>& keep) {
  for (int64_t e : checkpoint_epochs(dir))
    if (std::find(keep.begin(), keep.end(), e) == keep.end()) fs::remove(fs::path(dir) / checkpoint_name(e));
}

void check_new_run_dir(const std::string& dir) {
  std::error_code ec;
  VIT_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec), "--output ", dir,
            " is a file; a run needs a directory");
  refuse_if_run(dir);
}

void check_writable_dir(const std::string& dir) {
  const std::string probe = (fs::path(dir) / (".write-test.tmp." + std::to_string(::getpid()))).string();
  write_file_atomic(probe, "vitcpp\n");  // names the directory and the errno on failure
  std::error_code ec;
  fs::remove(probe, ec);
}

void create_run_dir(const std::string& dir, const std::string& args_json) {
  check_new_run_dir(dir);
  // Not normalized: "lnk/../runs/a" is the kernel's to resolve, lnk may be a link.
  fs::path target = fs::path(dir);
  while (!target.has_filename() && target.has_relative_path()) target = target.parent_path();  // "runs/a/"
  std::error_code ec;
  if (fs::exists(target, ec)) {  // the user's directory (empty, or with other files)
    // Written whole under a temporary name, then linked in: link(2) fails where args.json
    // exists, so of two runs started at once into this directory one wins and the other's
    // args.json never replaces the winner's.
    const fs::path args = target / "args.json", tmp = temporary_name(args.string());
    write_file_atomic(tmp.string(), args_json);
    const int linked = ::link(tmp.c_str(), args.c_str()), err = errno;
    // On NFS a lost reply can report EEXIST for a link that was made: the same file is ours.
    const bool ours = linked == 0 || (err == EEXIST && fs::equivalent(tmp, args, ec));
    if (ours || err == EEXIST) fs::remove(tmp, ec);
    if (ours) return;
    refuse_if_run(dir);
    if (err == EEXIST)
      throw Error(detail::concat(args.string(), ": cannot create (", std::strerror(err), ")"));
    // A file system without hard links (FAT, exFAT, some SMB and FUSE mounts): renamed into
    // place, as before the link, after the check once more.
    if (std::rename(tmp.c_str(), args.c_str()) != 0) {
      const int rerr = errno;
      fs::remove(tmp, ec);
      throw Error(detail::concat(args.string(), ": cannot create (", std::strerror(rerr), ")"));
    }
    return;
  }
  // Made complete under a temporary name beside it, then renamed: rename(2) puts a
  // directory in place of a missing or empty one, and fails if a run filled it meanwhile.
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Named as the user gave it: the temporary name beside it meant nothing to them.
  const auto refuse = [&](const std::error_code& why) {
    throw Error(detail::concat("--output ", dir, ": cannot create the run directory in ", parent.string(),
                               " (", why.message(), ")"));
  };
  if (!fs::create_directories(parent, ec) && ec) refuse(ec);
  const fs::path tmp = temporary_name(target.string());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) refuse(ec);
  try {
    write_file_atomic((tmp / "args.json").string(), args_json);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    refuse_if_run(dir);
    throw Error(detail::concat(dir, ": cannot create the run directory (rename from ", tmp.string(),
                               " failed: ", std::strerror(err), ")"));
  }
}

std::optional<StateInfo> newest_state(const std::string& dir) {
  std::optional<StateInfo> best;
  for (const char* name : {kStateFile, kRecoveryFile}) {
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    const auto meta = read_safetensors_metadata(path);
    const auto it = meta.find("vitcpp_state");
    VIT_CHECK(it != meta.end(), path, ": not a vitcpp training state (no vitcpp_state metadata)");
    StateInfo s;
    s.path = path;
    try {
      const auto st = parse_json(it->second, path + ": vitcpp_state");
      s.epochs_done = json_int(st.at("epochs_done"), path + ": epochs_done");
      s.global_step = json_int(st.at("global_step"), path + ": global_step");
      s.since_best = json_int(st.at("since_best"), path + ": since_best");
      if (st.contains("step_in_epoch"))
        s.step_in_epoch = json_int(st.at("step_in_epoch"), path + ": step_in_epoch");
      if (st.contains("seed") && st.at("seed").is_number_unsigned()) s.seed = st.at("seed").get<uint64_t>();
    } catch (const nlohmann::json::exception& e) {
      throw Error(detail::concat(path, ": corrupt training state: ", e.what()));
    }
    if (!best || s.global_step > best->global_step) best = s;
  }
  return best;
}

}  // namespace vit
