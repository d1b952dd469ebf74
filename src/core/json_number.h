// JSON numbers read without undefined behaviour. nlohmann's get<int64_t>() on a float value
// is a static_cast, undefined past int64's range (a config.json with "hidden_size": 1e300
// tripped UBSan in fuzz_pretrained_config), and get<int>() on 3e9 is the same. These accept
// integers, and floats with an integral value (768.0, as Python's json.dump can write), and
// throw vit::Error naming the field for anything else.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/check.h"

namespace vit {

inline int64_t json_int(const nlohmann::json& v, std::string_view what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    VIT_CHECK(u <= uint64_t(std::numeric_limits<int64_t>::max()), what, " = ", v.dump(), " is too large");
    return int64_t(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  VIT_CHECK(v.is_number_float(), what, " must be an integer, got ", v.dump());
  const double d = v.get<double>();
  // 2^53: beyond it a double no longer holds every integer, and every size vitcpp reads is far below.
  VIT_CHECK(std::isfinite(d) && std::trunc(d) == d && std::abs(d) <= 9007199254740992.0, what,
            " must be an integer, got ", v.dump());
  return int64_t(d);
}

// An integer that must also fit an int (PIL's resample codes and the like).
inline int json_int32(const nlohmann::json& v, std::string_view what) {
  const int64_t i = json_int(v, what);
  VIT_CHECK(i >= std::numeric_limits<int>::min() && i <= std::numeric_limits<int>::max(), what, " = ", i,
            " is out of range");
  return int(i);
}

// A number (a float or an integer) as a double.
inline double json_double(const nlohmann::json& v, std::string_view what) {
  VIT_CHECK(v.is_number(), what, " must be a number, got ", v.dump());
  return v.get<double>();
}

inline bool json_bool(const nlohmann::json& v, std::string_view what) {
  VIT_CHECK(v.is_boolean(), what, " must be true or false, got ", v.dump());
  return v.get<bool>();
}

}  // namespace vit
