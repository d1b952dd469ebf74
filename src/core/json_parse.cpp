#include "core/json_parse.h"

#include "core/check.h"

namespace vit {

nlohmann::json parse_json(std::string_view text, const std::string& what) {
  using event = nlohmann::json::parse_event_t;
  // depth: the containers open around the one starting, so at most kMaxJsonDepth are open.
  return nlohmann::json::parse(text.begin(), text.end(), [&](int depth, event e, nlohmann::json&) {
    VIT_CHECK(!((e == event::object_start || e == event::array_start) && depth >= kMaxJsonDepth), what,
              ": JSON nested deeper than ", kMaxJsonDepth, " levels");
    return true;
  });
}

}  // namespace vit
