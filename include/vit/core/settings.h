// Every environment variable vitcpp reads or sets, in one table, and the one function that
// reads them (src/core/settings.cpp is the only caller of getenv in the library and the vit
// program; README.md's "Environment variables" table is this table, and a test keeps the two
// the same).
#pragma once
#include <string_view>
#include <vector>

namespace vit {

struct Setting {
  const char* name;
  const char* values;        // what it takes
  const char* default_text;  // what happens when it is unset
  const char* effect;        // what it changes
};

// The table, in the README's order.
const std::vector<Setting>& settings();

// The value of the environment variable `name`, or nullptr when it is unset or empty. `name`
// must be in the table (a name missing from it throws vit::Error: every variable is listed).
const char* setting(std::string_view name);

}  // namespace vit
