// vit: train, evaluate and run Vision Transformers. `vit --help` lists the subcommands.
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "commands.h"
#include "core/check.h"
#include "core/settings.h"
#include "core/suggest.h"
#include "ops/ops.h"
#include "stop_signals.h"
#include "train/comm.h"
#include "validators.h"
#include "vit/core/version.h"

namespace {
// How OpenMP threads wait between parallel regions. libgomp's default spins for about 300,000
// iterations, which with another process on the second core makes a 2-thread step many times
// slower; waiting passively (futex) avoids that but pays a wake-up at every parallel region,
// much of a small op's time at batch 1. A short spin keeps both: 2,000 iterations gain on an
// idle machine and stay level next to a busy process, where longer spins lose
// (docs/design.md, "Fast kernels and threads"). libgomp reads them once, before main, so vit
// sets them and runs itself again when the user set no wait policy; OMP_WAIT_POLICY=PASSIVE
// or ACTIVE (and GOMP_SPINCOUNT) given by the user are kept.
//
// With OMP_PROC_BIND (or OMP_PLACES) set, libgomp has also bound this thread to its first
// place before main, and a process started by execv inherits that narrowed CPU mask: the
// second run's OpenMP then sees one CPU and puts every thread on it (docs/design.md, "Fast
// kernels and threads"). The places together are the CPUs the first run started with, so
// the mask is widened back to them first, and only when it was narrowed to a part of them.
void restore_affinity_before_exec() {
  const int places = omp_get_num_places();
  if (places <= 0) return;
  cpu_set_t all, now;
  CPU_ZERO(&all);
  for (int p = 0; p < places; ++p) {
    std::vector<int> ids(size_t(std::max(omp_get_place_num_procs(p), 0)));
    omp_get_place_proc_ids(p, ids.data());
    for (int id : ids)
      if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &all);
  }
  if (sched_getaffinity(0, sizeof now, &now) != 0) return;
  cpu_set_t both;
  CPU_AND(&both, &now, &all);
  const bool narrowed = CPU_EQUAL(&both, &now) && CPU_COUNT(&now) < CPU_COUNT(&all);
  if (narrowed) sched_setaffinity(0, sizeof all, &all);
}

// Whether this process should print what every process of an MPI job would: rank 0, or a
// process no launcher started.
bool first_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char* r = vit::setting(v)) return std::atoi(r) == 0;
  return true;
}

// "did you mean" for a misspelt subcommand (the first word that is none) or flag (one the
// subcommand does not have): the nearest name within two edits, or "".
// The run directory of `vit train --resume DIR` (or --resume=DIR), else "".
std::string resumed_dir(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "train") return "";
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--resume" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--resume=", 0) == 0) return args[i].substr(9);
  }
  return "";
}

// timm's flags whose vit names differ (the first word of each is the flag), and the names
// other trainers give a linear probe. They come before a near spelling: --gp is no --amp.
const std::pair<std::string, std::string> kTimmFlags[] = {
    {"--input-size", "--img-size (and --in-chans)"},
    {"--initial-checkpoint", "--pretrained"},
    {"--gp", "--pool"},
    {"--drop-connect", "--drop-path"},
    {"--head-only", "--freeze-backbone (a linear probe)"},
    {"--linear-probe", "--freeze-backbone (a linear probe)"},
    {"--log-freq", "--log-interval"},
    {"--log-freq", "--log-seconds"},
    {"--num-gpu", "--threads"},
    {"--train-split", "--data-dir"},
    {"--val-split", "--split"},
};

std::string did_you_mean(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* cmd = nullptr;
  std::vector<std::string> commands;
  for (CLI::App* sub : app.get_subcommands({})) {
    commands.push_back(sub->get_name());
    if (sub->parsed()) cmd = sub;
  }
  std::string hints;
  for (const std::string& a : args) {
    if (!cmd) {
      if (a.empty() || a[0] == '-') continue;
      const std::string near = vit::nearest_name(a, commands);
      if (!near.empty()) return "vit: '" + a + "' is not a subcommand; did you mean 'vit " + near + "'?";
      std::string list;  // nothing near: the commands there are
      for (const std::string& c : commands) list += (list.empty() ? "" : ", ") + c;
      return "vit: '" + a + "' is not a subcommand; the subcommands: " + list;
    }
    if (a.rfind("--", 0) != 0) continue;
    const std::string flag = a.substr(0, a.find('='));
    if (cmd->get_option_no_throw(flag)) continue;
    std::vector<std::string> flags;
    for (const CLI::Option* o : cmd->get_options())
      for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
    // timm's name for one of vit's, a typo, or a flag cut short (--batch: --batch-size).
    std::string near;
    for (const auto& [timm, ours] : kTimmFlags)
      if (near.empty() && flag == timm && cmd->get_option_no_throw(ours.substr(0, ours.find(' '))))
        near = ours.find(' ') == std::string::npos || ours.find("(and") != std::string::npos
                   ? ours + " (timm's " + timm + ")"
                   : ours;
    if (near.empty()) near = vit::nearest_name(flag, flags);
    for (const std::string& f : flags)
      if (near.empty() && f.rfind(flag + "-", 0) == 0) near = f;
    const std::string prefix = "vit " + cmd->get_name() + ": " + flag + ": ";
    hints += (hints.empty() ? "" : "\n") + (near.empty() ? prefix + "not a flag of vit " + cmd->get_name()
                                                         : prefix + "did you mean " + near + "?");
  }
  return hints;
}

// predict and attention take image files after their flags, and CLI11 lets a flag of a
// variable number of values take them too (`--img-size 56 a.png` failed as "Could not convert:
// --img-size = 56,a.png"). The values such a flag can have are known, so each of these flags
// moves with its values to the end of the line, after the images, whose order stays.
// A whole number as a flag's value, signed (--img-size -1 is a value, refused by its check).
bool integer(const std::string& a) {
  const size_t digits = a.size() > 1 && a[0] == '-' ? 1 : 0;
  return a.size() > digits && a.size() < 10 &&
         std::all_of(a.begin() + long(digits), a.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// --img-size and --patch-size take S or H W, so CLI11 joined two of them (`--img-size 16
// --img-size 18`, a recipe's and the user's) into one H W of 16 x 18. The last one wins, as
// for every other flag: the earlier ones are dropped with their values.
std::vector<std::string> last_size_wins(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) flag.erase(eq);
    if (flag != "--img-size" && flag != "--patch-size") {
      out.push_back(args[i]);
      continue;
    }
    size_t end = i + 1;  // past the values: up to two, one of them after '='
    for (int k = eq != std::string::npos ? 1 : 0; k < 2 && end < args.size() && integer(args[end]); ++k)
      ++end;
    const bool later = std::any_of(args.begin() + long(end), args.end(), [&](const std::string& a) {
      return a == flag || a.rfind(flag + "=", 0) == 0;
    });
    if (!later) out.insert(out.end(), args.begin() + long(i), args.begin() + long(end));
    i = end - 1;
  }
  return out;
}

// Whether the word after --features is its mode, not an image: pooled or tokens, or a word
// that names no file and looks like no path (a misspelt "token" is then refused as a mode;
// it was read as an image and said "token: cannot open for reading").
bool features_mode(const std::string& word) {
  if (word == "pooled" || word == "tokens") return true;
  std::error_code ec;
  return !word.empty() && word[0] != '-' && word.find_first_of("./") == std::string::npos &&
         !std::filesystem::exists(word, ec);
}

// --output=~/runs: the shell expands ~ only at a word's start, so the path was a folder named
// "~" here (and a later rm -rf ~ of it is the home's). Refused with the spelling that works,
// unless a "~" here is what is meant (it exists).
void refuse_unexpanded_home(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    const size_t eq = a.find("=~");
    if (!a.starts_with("--") || eq == std::string::npos || (eq + 2 < a.size() && a[eq + 2] != '/')) continue;
    std::error_code ec;
    if (std::filesystem::exists("~", ec)) continue;
    const std::string flag = a.substr(0, eq), path = a.substr(eq + 1);
    VIT_VALUE_CHECK(false, a,
                    ": the shell expands ~ only at a word's start, so the path is a folder named '~' "
                    "here, not the home folder: write ",
                    flag, " ", path, " (or $HOME", path.substr(1), ")");
  }
}

std::vector<std::string> images_last(std::vector<std::string> args) {
  if (args.empty() || (args[0] != "predict" && args[0] != "attention")) return args;
  std::vector<std::string> kept, moved;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0 && args[i] == "--img-size") {  // S or H W
      moved.push_back(args[i]);
      for (int k = 0; k < 2 && i + 1 < args.size() && integer(args[i + 1]); ++k) moved.push_back(args[++i]);
    } else if (i > 0 && args[i].rfind("--img-size=", 0) == 0) {  // --img-size=H W
      moved.push_back(args[i]);
      if (i + 1 < args.size() && integer(args[i + 1])) moved.push_back(args[++i]);
    } else if (i > 0 && args[i] == "--features") {  // [pooled|tokens]
      moved.push_back(args[i]);
      if (i + 1 < args.size() && features_mode(args[i + 1])) moved.push_back(args[++i]);
    } else {
      kept.push_back(args[i]);
    }
  }
  kept.insert(kept.end(), moved.begin(), moved.end());
  return kept;
}

// An exception's message for the error line. Two from the standard library say it in words:
// a failed allocation ("std::bad_alloc" tells no one what to change) and a file system error
// ("filesystem error: cannot create directories: Not a directory [out]" becomes "out: cannot
// create directories: Not a directory", the path first as in every other message).
std::string error_words(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return "out of memory (an allocation failed): lower --batch-size or use a smaller model";
  if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    std::string what = fe->what();
    const std::string prefix = "filesystem error: ";
    if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
    if (const size_t at = what.find(" ["); at != std::string::npos) what.erase(at);
    return fe->path1().empty() ? what : fe->path1().string() + ": " + what;
  }
  // std::thread's start refused (it said "Resource temporarily unavailable", naming nothing).
  if (const auto* se = dynamic_cast<const std::system_error*>(&e);
      se && se->code() == std::errc::resource_unavailable_try_again)
    return std::string("cannot start a thread (") + se->code().message() +
           "): the limit on processes (ulimit -u, a container's pids limit) or on memory (ulimit -v) is "
           "reached; lower --threads or -j";
  return e.what();
}

// Whether a tool preloaded into this process would lose it at an exec: valgrind refuses
// /proc/self/exe ("You cannot run ... directly"), and heaptrack traced the first second alone
// and called all of it leaked.
bool under_valgrind_or_heaptrack() {
  const char* preload = vit::setting("LD_PRELOAD");
  const std::string p = preload ? preload : "";
  return p.find("vgpreload") != std::string::npos || p.find("heaptrack") != std::string::npos;
}

// Whether libgomp takes OMP_NUM_THREADS's value: positive decimal counts, comma-separated,
// each with optional spaces and '+' ("4", " +4 ", "4 ,2"; not "", "0", "-1", "4,", "1e2", or
// a count past 2^63 - 1). Checked against libgomp 12 by the test that runs vit with each.
bool libgomp_takes_counts(const char* v) {
  for (;;) {
    while (std::isspace(static_cast<unsigned char>(*v))) ++v;
    if (*v == '+') ++v;
    if (!std::isdigit(static_cast<unsigned char>(*v))) return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (errno == ERANGE || n == 0 || n > (1ul << 63) - 1) return false;
    v = end;
    while (std::isspace(static_cast<unsigned char>(*v))) ++v;
    if (*v == '\0') return true;
    if (*v++ != ',') return false;
  }
}

void default_to_short_spinning(char** argv) {
  if (vit::setting("OMP_WAIT_POLICY") || under_valgrind_or_heaptrack()) return;
  // libgomp has said "Invalid value" for it once, in this process, and goes on without it;
  // the second run goes on without it too, and does not say so a second time.
  if (const char* n = vit::setting("OMP_NUM_THREADS");
      vit::setting_present("OMP_NUM_THREADS") && (!n || !libgomp_takes_counts(n)))
    unsetenv("OMP_NUM_THREADS");
  setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
  setenv("GOMP_SPINCOUNT", "2000", 0);  // a user's own value stays
  restore_affinity_before_exec();
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the defaults
}
}  // namespace

namespace {
int run_vit(int argc, char** argv);

// Results go to stdout (predict, eval --json, bench --json, --help): a write that failed (a
// full disk) must not end in success, as coreutils and Python say.
int check_stdout(int code) {
  std::cout.flush();
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout) return code;
  // errno from the write that failed, if nothing since set another (a write's own errors only).
  // A long command (vit train) sets errno many times after its first failed write: one more
  // byte, on output already incomplete, asks the file again why.
  auto is_write_error = [](int e) {
    return e == ENOSPC || e == EIO || e == EPIPE || e == EDQUOT || e == EFBIG;
  };
  if (!is_write_error(errno)) {
    std::clearerr(stdout);
    errno = 0;
    if (std::fputc('\n', stdout) != EOF) std::fflush(stdout);
  }
  const int err = errno;
  const bool write_error = is_write_error(err);
  if (code == 0)
    vit::print_error_line(std::string("vit: error: writing standard output: ") +
                          (write_error ? std::strerror(err) : "a write failed"));
  return code ? code : 1;
}
}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which every writer reports
  // with the file's name, its previous version kept; the default SIGXFSZ killed the program
  // silently, a temporary file left (CPython ignores it too).
  std::signal(SIGXFSZ, SIG_IGN);
  return check_stdout(run_vit(argc, argv));
}

namespace {
int run_vit(int argc, char** argv) {
  default_to_short_spinning(argv);
  CLI::App app{"vit: Vision Transformers in C++ (train, eval, predict)", "vit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("vitcpp ") + vit::version());
  std::map<CLI::App*, vit::app::Run> runs;
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* cmd = app.add_subcommand(name, help);
    runs[cmd] = adder(*cmd);
  };
  add("train", "train a model (from scratch; --synthetic for a demo without data)", vit::app::add_train);
  add("eval", "evaluate a checkpoint (vitcpp, timm or Hugging Face) on a dataset", vit::app::add_eval);
  add("predict", "predict classes of images with a checkpoint", vit::app::add_predict);
  add("info", "print a model's config, parameters and FLOPs", vit::app::add_info);
  add("export", "write a checkpoint (vitcpp, timm or Hugging Face) for timm, Hugging Face or ONNX",
      vit::app::add_export);
  add("quantize", "write an int8 checkpoint: the blocks' products per output channel, about 4x smaller",
      vit::app::add_quantize);
  add("average", "average checkpoints' weights: a run's best epochs (timm's avg_checkpoints.py)",
      vit::app::add_average);
  add("samples", "write dataset images as PNG files", vit::app::add_samples);
  add("attention", "draw where the model looks: attention maps and rollout over images",
      vit::app::add_attention);
  add("plot", "draw a run's training curves or a checkpoint's position-embedding similarity",
      vit::app::add_plot);
  add("bench", "time a model's inference or training step (images/s, GFLOP/s, peak RSS)",
      vit::app::add_bench);
  add("serve",
      "serve classifiers over HTTP and gRPC: KServe v2 and TorchServe endpoints, dynamic batching, metrics",
      vit::app::add_serve);
  vit::app::integers_in_decimal(app);
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::vector<std::string> typed = args;  // before --resume brings in args.json's flags
  try {
    vit::check_settings();  // a VIT_* value vitcpp cannot use stops here, before any work
    vit::ops::cpu_isa();    // as does a VIT_ISA this CPU cannot run
    if (first_rank())
      for (const auto& [name, hint] : vit::misspelt_settings())
        std::cerr << "vit: note: " << name << " is set, but vitcpp reads no such variable (" << hint << ")\n";
    refuse_unexpanded_home(typed);
    args = images_last(last_size_wins(vit::app::expand_recipe(vit::app::expand_resume(args))));
  } catch (const vit::ValueError& e) {  // --recipe nope
    vit::print_error_line(std::string("vit: error: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    vit::print_error_line(std::string("vit: error: ") + e.what());
    return 1;
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A command line vit cannot take: said as every other error is, with exit status 2 (as
    // Python's argparse, which timm's scripts use) rather than CLI11's own codes (104-109).
    if (!first_rank()) return 2;  // under mpirun every rank parses the same flags: one says so
    CLI::App* cmd = nullptr;
    for (CLI::App* sub : app.get_subcommands({}))
      if (sub->parsed()) cmd = sub;
    std::string what = e.what();
    // CLI11 lists the arguments it did not expect in the order it took them: last first.
    if (const size_t colon = what.find(": ");
        dynamic_cast<const CLI::ExtrasError*>(&e) && colon != what.npos) {
      std::vector<std::string> words;
      std::istringstream in(what.substr(colon + 2));
      for (std::string w; in >> w;) words.insert(words.begin(), w);
      what.erase(colon + 2);
      for (size_t i = 0; i < words.size(); ++i) what += (i ? " " : "") + words[i];
    }
    // A value from a resumed run's args.json, not from the command line: said so.
    if (const std::string dir = resumed_dir(typed); !dir.empty()) {
      const size_t dash = what.find("--");
      const std::string flag =
          dash == std::string::npos ? "" : what.substr(dash, what.find_first_of(" =,", dash) - dash);
      if (flag.empty() || std::find(typed.begin(), typed.end(), flag) == typed.end())
        what = (std::filesystem::path(dir) / "args.json").string() + " (the run's settings): " + what;
    }
    vit::print_error_line("vit: error: " + what);
    std::cerr << "run 'vit" << (cmd ? " " + cmd->get_name() : "") << " --help' for the options\n";
    if (const std::string hint = did_you_mean(app, args); !hint.empty()) std::cerr << hint << "\n";
    return 2;
  }
  int code = 0;
  try {
    for (auto& [cmd, run] : runs)
      if (cmd->parsed()) {
        // vit train and vit serve stop on SIGINT/SIGTERM themselves; the other commands end
        // there, with their files' temporaries removed (a 330 MB NAME.tmp.PID stayed).
        if (cmd->get_name() != "train" && cmd->get_name() != "serve")
          vit::app::remove_temporaries_on_stop_signals();
        code = run();
      }
  } catch (const vit::ValueError& e) {
    // Flags that cannot work together, found by the command before any work: as CLI11's.
    if (vit::Comm* w = vit::world_if_started(); !w || w->root()) {
      vit::print_error_line(std::string("vit: error: ") + e.what());
      for (auto& [cmd, run] : runs)
        if (cmd->parsed()) std::cerr << "run 'vit " << cmd->get_name() << " --help' for the options\n";
    }
    code = 2;
  } catch (const vit::RankFailure& e) {
    // Every rank of a data-parallel run stopped at the same point: rank 0 says why.
    if (vit::Comm* w = vit::world_if_started(); !w || w->root())
      vit::print_error_line(std::string("vit: error: ") + e.what());
    code = 1;
  } catch (const std::exception& e) {
    const std::string what = error_words(e);
    vit::Comm* w = vit::world_if_started();
    if (w && w->size() > 1) {
      // Only this rank knows: end the job rather than leave the others waiting.
      vit::print_error_line(
          vit::detail::concat("vit: error: rank ", w->rank(), ": ", what, " (ending the job)"));
      w->abort(1);
    }
    vit::print_error_line(std::string("vit: error: ") + what);
    code = 1;
  }
  vit::finalize_world();
  return code;
}
}  // namespace
