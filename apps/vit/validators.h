// Checks for numeric flags whose "not given" is a sentinel (0 or -1): a value outside the
// range must be refused, not taken for "not given". CLI11's own PositiveNumber prints its
// range with DBL_MAX written out in full; these say what is wanted in words
// ("--depth: a positive number, got -2").
#pragma once
#include <CLI/CLI.hpp>

namespace vit::app {

const CLI::Validator& positive();      // > 0
const CLI::Validator& non_negative();  // >= 0
const CLI::Validator& rate();          // in [0, 1): a dropout or drop-path rate
const CLI::Validator& fraction();      // in [0, 1): a share of a dataset (0: none)
const CLI::Validator& thread_count();  // 0 (the default: every core) to kMaxThreads

}  // namespace vit::app
