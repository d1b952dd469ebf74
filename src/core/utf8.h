// UTF-8 checks for text that goes into JSON (args.json, checkpoint metadata, --json lines):
// nlohmann's dump throws on bytes that are not UTF-8, with a message that names no file.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace vit {

// Whether s is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool is_utf8(std::string_view s);

// j as JSON text for a person or a log to read (stdout, a results file): bytes that are not
// UTF-8 (a file name in Latin-1) become U+FFFD rather than an error.
// (nlohmann::json, or ordered_json where the keys keep their order.)
template <class Json = nlohmann::json>
std::string json_for_output(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace vit
