// Every environment variable vitcpp reads or sets, in one table, and the one function that
// reads them (src/core/settings.cpp is the only caller of getenv in the library and the vit
// program; README.md's "Environment variables" table is this table, and a test keeps the two
// the same).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vit {

// What a variable of vitcpp's own takes, so that a value it cannot use is an error naming it
// (VIT_TILED=onn), never a silent default. `other`: read by OpenMP, oneDNN or a launcher,
// which judge their own values.
enum class SettingKind {
  choice,   // one of the comma-separated words in `values`
  count,    // a whole number, 1 or more
  limit,    // a whole number, 0 or more (0: no limit)
  seconds,  // a number of seconds, 0 or more
  size,     // bytes with an optional unit: 512M, 16G
  other,
};

struct Setting {
  const char* name;
  const char* values;        // what it takes
  const char* default_text;  // what happens when it is unset
  const char* effect;        // what it changes
  SettingKind kind = SettingKind::other;
};

// The table, in the README's order.
const std::vector<Setting>& settings();

// The value of the environment variable `name`, or nullptr when it is unset or empty. `name`
// must be in the table (a name missing from it throws vit::Error: every variable is listed).
const char* setting(std::string_view name);
// Whether it is in the environment at all, empty included (libgomp warns about an empty one).
bool setting_present(std::string_view name);

// The typed readers of vitcpp's own variables: nothing (or "") when unset, else the value,
// checked against the table's kind. A value it cannot take throws vit::Error naming the
// variable, the value and what it takes ("VIT_TILED=onn: unknown; one of on, off (did you
// mean on?)").
std::string_view setting_choice(std::string_view name);  // a view of the table's text
std::optional<int64_t> setting_count(std::string_view name);
std::optional<int64_t> setting_limit(std::string_view name);
std::optional<double> setting_seconds(std::string_view name);
std::optional<size_t> setting_bytes(std::string_view name);

// Checks every variable of vitcpp's own that is set (throws as the readers do). The vit
// program calls it before any work, and so does every model's construction (model/vit.cpp):
// the readers run inside kernels and parallel regions, where an error would end the program.
void check_settings();

// The table's variables that are set, with their values, in the table's order: what a
// measurement or a bug report ran under (vit info's environment: line, vit bench --json's
// "environment"). vit sets OMP_WAIT_POLICY and GOMP_SPINCOUNT itself when unset (main.cpp).
std::vector<std::pair<std::string, std::string>> settings_set();

// Set variables that look meant for vitcpp but do nothing: a name it no longer reads, with what
// replaced it (VIT_SIMD: "VIT_ISA replaced it"), and a VIT_* name within two edits of one of
// the table's, with that one (VIT_TILE: "did you mean VIT_TILED?"). Other VIT_* names
// (VIT_TEST_FUZZ for scripts/test.sh, another program's) are not vitcpp's to judge.
std::vector<std::pair<std::string, std::string>> misspelt_settings();

}  // namespace vit
