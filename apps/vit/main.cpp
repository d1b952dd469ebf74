// vit: train, evaluate and run Vision Transformers. `vit --help` lists the subcommands.
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "commands.h"
#include "vit/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"vit: Vision Transformers in C++ (train, eval, predict)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vitcpp 0.1.0");
  std::map<CLI::App*, vit::app::Run> runs;
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* cmd = app.add_subcommand(name, help);
    runs[cmd] = adder(*cmd);
  };
  add("train", "train a model (from scratch; --synthetic for a demo without data)", vit::app::add_train);
  add("eval", "evaluate a checkpoint on a dataset", vit::app::add_eval);
  add("predict", "predict classes of images with a checkpoint", vit::app::add_predict);
  add("info", "print a model's config, parameters and FLOPs", vit::app::add_info);
  add("samples", "write dataset images as PNG files", vit::app::add_samples);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    args = vit::app::expand_recipe(vit::app::expand_resume(args));
  } catch (const std::exception& e) {
    std::cerr << "vit: error: " << e.what() << "\n";
    return 1;
  }
  vit::app::set_invocation(args);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [cmd, run] : runs)
      if (cmd->parsed()) return run();
  } catch (const vit::Error& e) {
    std::cerr << "vit: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "vit: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
