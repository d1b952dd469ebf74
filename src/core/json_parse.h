// JSON from files vitcpp did not write itself (a safetensors header, a config.json, a run's
// args.json), parsed with a limit on nesting. nlohmann's DOM takes about 80 bytes a level:
// a 10 MB safetensors header of "[[[[..." took 400 MB, a 300 MB config.json 11 GB and 106 s.
// Rust's safetensors (serde_json) stops at 128 levels and Python's json near 1,000; vitcpp's
// files nest 4 deep.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace vit {

constexpr int kMaxJsonDepth = 64;

// nlohmann::json::parse(text), but deeper nesting than kMaxJsonDepth throws vit::Error
// ("WHAT: JSON nested deeper than 64 levels") as soon as it is met. Parse errors throw
// nlohmann's exceptions, as json::parse does (callers name the file in their messages).
nlohmann::json parse_json(std::string_view text, const std::string& what);

}  // namespace vit
