// Checks for numeric flags whose "not given" is a sentinel (0 or -1): a value outside the
// range must be refused, not taken for "not given". CLI11's own PositiveNumber prints its
// range with DBL_MAX written out in full; these say what is wanted in words
// ("--depth: a positive number, got -2").
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/check.h"

namespace vit::app {

// A command line that cannot work, found after parsing: flags that conflict, or a value its
// validator cannot judge alone (--topk 0 against the model, --recipe nope). main says it as
// CLI11's errors ("run 'vit CMD --help'") and exits 2, as argparse does; vit::Error's other
// failures (a bad file, a run that does not fit) exit 1.
class UsageError : public ValueError {
 public:
  using ValueError::ValueError;
};

// Throws UsageError with the streamed arguments when cond is false (VIT_CHECK's twin).
#define VIT_USAGE_CHECK(cond, ...)                                                 \
  do {                                                                             \
    if (!(cond)) throw ::vit::app::UsageError(::vit::detail::concat(__VA_ARGS__)); \
  } while (0)

const CLI::Validator& positive();        // > 0 and finite
const CLI::Validator& non_negative();    // >= 0 and finite
CLI::Validator at_least(double lowest);  // >= lowest and finite
const CLI::Validator& rate();            // in [0, 1): a dropout or drop-path rate
const CLI::Validator& fraction();        // in [0, 1): a share of a dataset (0: none)
const CLI::Validator& thread_count();    // 0 (the default: every core) to kMaxThreads
// A uint64 as written (a '+' before it taken, as Python's int()): no '-', no wrap, no clamp.
const CLI::Validator& seed_value();
bool is_seed_text(const std::string& text);  // what seed_value() takes
// Every integer flag of app and its subcommands read in decimal, as Python's int() and argparse
// read them: CLI11 reads with base 0, so -b 0100 trained at batch 64 and --seed 010 was seed 8
// (and args.json kept "0100"). Leading zeros are dropped; 0x, 0o and 0b prefixes are refused.
void integers_in_decimal(CLI::App& app);
// What an integer flag's text meant before integers_in_decimal (CLI11's base 0): args.json of
// those runs holds the text typed, which their resume reads as they ran it.
std::string integer_as_before(const std::string& text);
bool is_integer_flag(const CLI::Option& option);
// A precision among `names` (fp32, bf16, int8, bfloat16), PyTorch's spelling taken for vitcpp's
// and the other way round (float32 as fp32, bfloat16 as bf16; bf16 as bfloat16 where that is
// the name): the value becomes the name in `names`.
CLI::Validator dtype_of(const std::vector<std::string>& names);

}  // namespace vit::app
