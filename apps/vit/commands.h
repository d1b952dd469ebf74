// The vit program's subcommands. Each registers its flags on the CLI11 app and returns the
// function that runs it; apps only parse flags and print, the library does the work.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace vit::app {

using Run = std::function<int()>;

Run add_train(CLI::App& app);
Run add_eval(CLI::App& app);
Run add_predict(CLI::App& app);
Run add_info(CLI::App& app);

}  // namespace vit::app
