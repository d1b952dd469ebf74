// vit train --resume DIR: the run's saved settings (args.json) as flags, the few flags that
// may be given anew, and whether anything is left to do.
#include "resume.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "commands.h"
#include "core/check.h"
#include "core/file.h"
#include "core/json_parse.h"
#include "train/run_dir.h"
#include "validators.h"

namespace vit::app {

namespace {
// Flags that change how a run is shown or scheduled on the machine, never its results: a
// resumed run may give them anew (they replace the saved ones). And --epochs, whose larger
// value extends a run (its schedule then spans the new length).
bool resume_may_change(const std::string& flag) {
  for (const char* f : {"--threads", "--workers", "--comm-timeout", "--progress", "--log-every",
                        "--recovery-interval", "--epochs", "--patience"})
    if (flag == f) return true;
  return false;
}

// A flag by the name args.json keeps it under (its first long name).
std::string canonical(const std::string& flag) {
  if (flag == "-j") return "--workers";
  if (flag == "--log-interval") return "--log-every";
  return flag;
}

nlohmann::json read_args_json(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "args.json").string();
  VIT_CHECK(std::filesystem::is_directory(dir), "--resume ", dir, ": no such directory");
  VIT_CHECK(std::filesystem::exists(path), "--resume ", dir,
            ": not a run directory (no args.json; vit train --output DIR makes one)");
  try {
    return parse_json(read_text_file(path), path);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
}

namespace {
// Integer values as they ran before args.json's version 5: CLI11 read them with base 0, 010 as
// octal (8), 0x10 as 16. In "--flag VALUE..." and "--flag=VALUE" forms, for the integer flags
// of vit train; every reader of a run's settings sees them so (the resume, and what it records).
void integers_as_they_ran(std::vector<std::string>& args) {
  CLI::App train;
  add_train(train);
  const auto is_flag = [](const std::string& a) {
    return a.size() > 1 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1])) && a[1] != '.';
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (!is_flag(args[i])) continue;
    const size_t eq = args[i].find('=');
    const CLI::Option* o = train.get_option_no_throw(args[i].substr(0, eq));
    if (!o || !is_integer_flag(*o)) continue;
    if (eq != std::string::npos) {
      args[i] = args[i].substr(0, eq + 1) + integer_as_before(args[i].substr(eq + 1));
      continue;
    }
    for (size_t j = i + 1; j < args.size() && !is_flag(args[j]); ++j) args[j] = integer_as_before(args[j]);
  }
}
}  // namespace

// The run's flags as a command line: args.json is {flag name: value} (true for a switch, a
// list for several values), or, from runs before that, the argv list itself.
std::vector<std::string> saved_args(const std::string& dir) {
  const nlohmann::json saved = read_args_json(dir);
  const std::string path = (std::filesystem::path(dir) / "args.json").string();
  std::vector<std::string> out;
  if (saved.is_object()) {
    out.push_back("train");
    auto text = [&](const nlohmann::json& v) {
      VIT_CHECK(v.is_string() || v.is_number(), path, ": not the settings of a vit train run");
      return v.is_string() ? v.get<std::string>() : v.dump();
    };
    for (auto& [name, value] : saved.items()) {
      if (name == "args-version") continue;  // the file's format, not a flag (cmd_train.cpp)
      VIT_CHECK(!name.empty() && name[0] != '-', path, ": not the settings of a vit train run (key '", name,
                "')");
      if (value.is_boolean()) {
        if (value.get<bool>()) out.push_back("--" + name);
        continue;
      }
      out.push_back("--" + name);
      if (value.is_array())
        for (auto& v : value) out.push_back(text(v));
      else
        out.push_back(text(value));
    }
    const nlohmann::json* version = saved.contains("args-version") ? &saved["args-version"] : nullptr;
    if (!version || !version->is_number_integer() || version->get<int64_t>() < 5) integers_as_they_ran(out);
    return out;
  }
  VIT_CHECK(saved.is_array() && !saved.empty() && saved[0] == "train", path,
            ": not the arguments of a vit train run");
  for (auto& a : saved) {
    VIT_CHECK(a.is_string(), path, ": not the arguments of a vit train run");
    out.push_back(a.get<std::string>());
  }
  integers_as_they_ran(out);
  return out;
}

// The value of `flag` in a saved command line: its last, else `fallback`.
int64_t int_flag_of(const std::vector<std::string>& args, const std::string& flag, int64_t fallback) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) {
      try {
        fallback = std::stoll(args[i + 1]);
      } catch (const std::exception&) {
        throw Error("args.json: " + flag + " " + args[i + 1] + " is not a number");
      }
    }
  return fallback;
}

// An --aa string as the program before args.json's version 2 ran it, written for today's
// parser: "rand-m9-n2-mstd0.5" ran as rand-m9-n2, "rand-m15-n2" at magnitude 15.
std::string legacy_rand_augment(const std::string& aa) {
  int m = 0, n = 0;
  if (std::sscanf(aa.c_str(), "rand-m%d-n%d", &m, &n) != 2) return aa;  // it failed then too
  return "rand-m" + std::to_string(m) + "-n" + std::to_string(n) +
         (m > 10 ? "-mmax" + std::to_string(m) : "");
}
}  // namespace

std::vector<std::string> expand_resume(std::vector<std::string> args) {
  if (args.empty() || args[0] != "train") return args;
  std::string dir;
  std::vector<std::string> extra, bad;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--resume" && i + 1 < args.size()) {
      dir = args[++i];
    } else if (args[i].rfind("--resume=", 0) == 0) {
      dir = args[i].substr(9);
    } else if (resume_may_change(canonical(args[i])) && i + 1 < args.size()) {
      extra.insert(extra.end(), {canonical(args[i]), args[i + 1]});
      ++i;
    } else if (const size_t eq = args[i].find('=');
               eq != std::string::npos && resume_may_change(canonical(args[i].substr(0, eq)))) {
      extra.insert(extra.end(), {canonical(args[i].substr(0, eq)), args[i].substr(eq + 1)});  // --epochs=N
    } else {
      bad.push_back(args[i]);
    }
  }
  if (dir.empty()) return args;
  // A directory that is not there is the first thing to say (not the flags given beside it).
  VIT_CHECK(std::filesystem::exists(dir), "--resume ", dir, ": no such directory");
  // The state file itself names its run directory; another file (a checkpoint) is no run.
  if (std::filesystem::is_regular_file(dir)) {
    const std::filesystem::path file(dir);
    dir = file.parent_path().empty() ? "." : file.parent_path().string();
    VIT_CHECK(std::filesystem::exists(std::filesystem::path(dir) / "args.json"), "--resume ", file.string(),
              ": not a run (a run is the directory vit train --output made, or its state file); to fine-tune "
              "a checkpoint's weights, give --pretrained ",
              file.string());
    // A checkpoint of the run holds weights alone: resuming would take the newest state instead.
    VIT_CHECK(file.filename() == kStateFile || file.filename() == kRecoveryFile, "--resume ", file.string(),
              ": a checkpoint of the run (weights alone, no optimizer state or position); --resume ", dir,
              " continues the run from its newest state, and --pretrained ", file.string(),
              " starts a new run from these weights");
  }
  VIT_CHECK(bad.empty(), "--resume ", dir, ": the run's flags come from ", dir,
            "/args.json; only --threads, --workers, --comm-timeout, --progress, --log-every, "
            "--recovery-interval, --epochs (to train longer) and --patience may be given (got ",
            bad.empty() ? "" : bad[0], ")");
  const std::vector<std::string> saved = saved_args(dir);
  // The data and weights the run was given: runs before 2026-12-05 kept them as typed, so a
  // relative path names them from the directory the run started in only.
  // The pretrained weights are read again only when the run has no state yet (a state holds
  // every weight, and config.json the model: TrainCommand::make_model), so a run moved
  // elsewhere, or whose file was deleted, resumes.
  const bool has_state = run_has_state(dir);
  for (size_t i = 0; i + 1 < saved.size(); ++i)
    for (const char* flag : {"--data-dir", "--pretrained", "--teacher"})
      VIT_CHECK(saved[i] != flag || (has_state && saved[i] == std::string("--pretrained")) ||
                    std::filesystem::exists(saved[i + 1]),
                "--resume ", dir, ": ", dir, "/args.json gives ", flag, " ", saved[i + 1],
                ", which does not exist from here",
                std::filesystem::path(saved[i + 1]).is_relative()
                    ? " (a relative path: resume from the directory the run started in)"
                    : "");
  auto given = [&](const std::string& flag) {
    return std::find(extra.begin(), extra.end(), flag) != extra.end();
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < saved.size(); ++i) {
    const std::string& a = saved[i];
    if (resume_may_change(a) && given(a) && i + 1 < saved.size()) {  // replaced by the one given now
      ++i;
      continue;
    }
    out.push_back(a);
  }
  // Runs recorded before --crop-fill existed padded their crops with the mean.
  auto saved_has = [&](const char* flag) {
    return std::find(saved.begin(), saved.end(), flag) != saved.end();
  };
  if (saved_has("--crop-pad") && !saved_has("--crop-fill")) out.insert(out.end(), {"--crop-fill", "mean"});
  // And those recorded before --aa-fill filled RandAugment's geometric ops with 0.5 gray.
  if (saved_has("--aa") && !saved_has("--aa-fill")) out.insert(out.end(), {"--aa-fill", "gray"});
  // And those recorded before --aa-ops drew from vitcpp's mild ops.
  if (saved_has("--aa") && !saved_has("--aa-ops")) out.insert(out.end(), {"--aa-ops", "mild"});
  // Runs recorded before args.json's version 2 read --aa as rand-mM-nN alone (anything after it
  // ignored, M up to 30 unclamped): the same, as today's parser takes it.
  const nlohmann::json recorded = read_args_json(dir);
  const int64_t version = recorded.is_object() && recorded.contains("args-version") &&
                                  recorded.at("args-version").is_number_integer()
                              ? recorded.at("args-version").get<int64_t>()
                              : 1;
  VIT_CHECK(version <= kArgsVersion, dir, "/args.json: written by a newer vitcpp (args-version ", version,
            "; this one reads up to ", kArgsVersion, "): resume it with that version");
  if (version < 2)
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i] == "--aa") out[i + 1] = legacy_rand_augment(out[i + 1]);
  // And those before version 3 applied --color-jitter beside --aa.
  if (version < 3 && saved_has("--aa") && saved_has("--color-jitter") && !saved_has("--force-color-jitter"))
    out.push_back("--force-color-jitter");
  // And before version 4 --opt sgd was plain momentum SGD (timm's momentum).
  if (version < 4)
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i] == "--opt" && out[i + 1] == "sgd") out[i + 1] = "momentum";
  // And before version 6 a --model beside --pretrained was a recipe's, left unused (a --model
  // of the user's was refused there): the file alone gave the model.
  if (version < 6 && saved_has("--pretrained"))
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i] == "--model") out.erase(out.begin() + long(i), out.begin() + long(i) + 2);
  // Runs begun before --seed was checked kept the text typed (-1, 2^64, 0x10), which CLI11
  // read as some seed: the state holds the one the run used.
  if (const std::optional<StateInfo> st = newest_state(dir); st && st->seed)
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i] == "--seed" && !is_seed_text(out[i + 1])) out[i + 1] = std::to_string(*st->seed);
  // The model of --config FILE is the run's config.json, written when the run began: FILE may
  // be relative to another directory, or edited since (its new values trained without a word).
  const std::filesystem::path own = std::filesystem::path(dir) / "config.json";
  for (size_t i = 0; i + 1 < out.size(); ++i)
    if (out[i] == "--config" && std::filesystem::exists(own)) out[i + 1] = own.string();
  out.insert(out.end(), extra.begin(), extra.end());
  out.insert(out.end(), {"--resume", dir});
  return out;
}

bool resume_finished(const std::string& dir, const TrainConfig& t, std::ostream& out) {
  const std::optional<StateInfo> s = newest_state(dir);
  if (!s) return false;  // killed before its first state: it starts again from step 0
  const int64_t begun = s->epochs_done + (s->step_in_epoch > 0 ? 1 : 0);
  VIT_CHECK(t.total_epochs() >= begun, "--epochs ", t.epochs,
            t.cooldown_epochs > 0 ? " (+ " + std::to_string(t.cooldown_epochs) + " cooldown)" : "",
            " is fewer than the ", begun, " epoch(s) the run in ", dir,
            " has begun; it can only be extended");
  if (t.patience > 0 && s->since_best >= t.patience && s->step_in_epoch == 0) {
    out << dir << ": this run stopped early after epoch " << s->epochs_done << " (no better eval "
        << metric_words(t.eval_metric) << " for " << s->since_best
        << (s->since_best == 1 ? " epoch" : " epochs") << ", --patience " << t.patience
        << "); nothing to do, no file was changed" << std::endl;
    return true;
  }
  if (s->epochs_done < t.total_epochs()) return false;
  out << dir << ": this run is finished (" << s->epochs_done << " of " << t.total_epochs()
      << " epochs); nothing to do, no file was changed. To train it longer: vit train --resume "
      << shell_word(dir) << " --epochs N (N > " << t.epochs << ")" << std::endl;
  return true;
}

void record_resumed(const std::string& dir, const TrainConfig& t) {
  const std::vector<std::string> args = saved_args(dir);
  const TrainConfig defaults;
  std::vector<std::pair<std::string, int64_t>> changed;
  for (const auto& [name, value, fallback] : {std::tuple{"epochs", t.epochs, defaults.epochs},
                                              std::tuple{"patience", t.patience, defaults.patience}})
    if (int_flag_of(args, std::string("--") + name, fallback) != value) changed.emplace_back(name, value);
  if (changed.empty()) return;
  nlohmann::json saved = read_args_json(dir);
  for (const auto& [name, value] : changed) {
    if (saved.is_object()) {
      saved[name] = value;
      continue;
    }
    std::vector<std::string> argv = saved;  // the argv list of an older run
    for (size_t i = 0; i + 1 < argv.size();)
      if (argv[i] == "--" + name)
        argv.erase(argv.begin() + long(i), argv.begin() + long(i) + 2);
      else
        ++i;
    argv.insert(argv.end(), {"--" + name, std::to_string(value)});
    saved = argv;
  }
  write_file_atomic((std::filesystem::path(dir) / "args.json").string(), saved.dump(1) + "\n");
}

}  // namespace vit::app
