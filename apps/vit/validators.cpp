#include "validators.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>

#include "core/threads.h"

namespace vit::app {

namespace {
// A validator of numbers for which ok(value) holds; `want` names them in the message, `shown`
// in --help after the type (INT:POSITIVE, as CLI11's own).
CLI::Validator numbers(const std::function<bool(double)>& ok, const std::string& want,
                       const std::string& shown) {
  return CLI::Validator(
      [ok, want](std::string& text) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(text, &used);
          if (used == text.size() && std::isfinite(v) && ok(v)) return "";  // inf is no count or rate
        } catch (const std::exception&) {
        }
        return want + ", got " + text;
      },
      shown);
}
}  // namespace

bool is_integer_flag(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  return type.starts_with("INT") || type.starts_with("UINT");
}

namespace {
// integers_in_decimal's transform: leading zeros dropped, a base prefix refused, and a value
// past the type's range refused (CLI11's strtoll saturates: samples --epoch 2^64 ran epoch
// 2^63 - 1 without a word).
CLI::Validator decimal(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& text) -> std::string {
        // Blanks around it trimmed: CLI11's strtoll skips leading ones and read " 010" as 8.
        const size_t first = text.find_first_not_of(" \t\n\r\f\v");
        text = first == std::string::npos
                   ? ""
                   : text.substr(first, text.find_last_not_of(" \t\n\r\f\v") - first + 1);
        const size_t sign = text.starts_with('+') || text.starts_with('-') ? 1 : 0;
        if (text.size() <= sign || text.find_first_not_of("0123456789", sign) != std::string::npos) {
          if (text.size() > sign + 1 && text[sign] == '0' &&
              std::isalpha(static_cast<unsigned char>(text[sign + 1])))
            return "a whole number in decimal, got " + text;
          return "";  // not digits: CLI11 says what is wrong
        }
        const size_t digits = text.find_first_not_of('0', sign);
        text = text.substr(0, sign) + (digits == std::string::npos ? "0" : text.substr(digits));
        errno = 0;
        if (is_unsigned)
          std::strtoull(text.c_str() + (text[0] == '+'), nullptr, 10);
        else
          std::strtoll(text.c_str(), nullptr, 10);
        if (errno == ERANGE)
          return "a whole number in " + std::string(is_unsigned ? "[0, 2^64 - 1]" : "[-2^63, 2^63 - 1]") +
                 ", got " + text;
        return "";
      },
      "", "DECIMAL");
}
}  // namespace

void integers_in_decimal(CLI::App& app) {
  static const CLI::Validator signed_decimal = decimal(false), unsigned_decimal = decimal(true);
  for (CLI::Option* o : app.get_options())
    if (is_integer_flag(*o))
      o->transform(o->get_type_name().starts_with("UINT") ? unsigned_decimal : signed_decimal);
  for (CLI::App* sub : app.get_subcommands({})) integers_in_decimal(*sub);
}

std::string integer_as_before(const std::string& text) {
  const size_t sign = text.starts_with('+') || text.starts_with('-') ? 1 : 0;
  if (text.size() <= sign + 1 || text[sign] != '0') return text;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 0);
  return end && *end == '\0' && errno == 0 ? std::to_string(v) : text;
}

const CLI::Validator& positive() {
  static const CLI::Validator v = numbers([](double x) { return x > 0; }, "a positive number", "POSITIVE");
  return v;
}

const CLI::Validator& non_negative() {
  static const CLI::Validator v = numbers([](double x) { return x >= 0; }, "0 or more", "NONNEGATIVE");
  return v;
}

CLI::Validator at_least(double lowest) {
  std::ostringstream text;
  text << lowest;
  return numbers([lowest](double x) { return x >= lowest; }, text.str() + " or more", ">=" + text.str());
}

const CLI::Validator& fraction() {
  static const CLI::Validator v =
      numbers([](double x) { return x >= 0 && x < 1; }, "a fraction in [0, 1)", "[0, 1)");
  return v;
}

const CLI::Validator& rate() {
  static const CLI::Validator v =
      numbers([](double x) { return x >= 0 && x < 1; }, "a rate in [0, 1)", "[0, 1)");
  return v;
}

const CLI::Validator& thread_count() {
  static const CLI::Validator v =
      numbers([](double x) { return x >= 0 && x <= kMaxThreads && x == double(int64_t(x)); },
              "0 (every core) to " + std::to_string(kMaxThreads), "NONNEGATIVE");
  return v;
}

bool is_seed_text(const std::string& text) {
  const std::string digits = text.starts_with('+') ? text.substr(1) : text;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  std::strtoull(digits.c_str(), nullptr, 10);
  return errno != ERANGE;
}

const CLI::Validator& seed_value() {
  // CLI11 read -1 as 2^64 - 1 and 2^64 or 10^23 as 2^64 - 1 too: a sweep over such seeds ran
  // one run many times. torch.manual_seed refuses them.
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        return is_seed_text(text) ? "" : "a whole number in [0, 2^64 - 1], got " + text;
      },
      "");  // --help shows UINT, CLI11's own type name
  return v;
}

CLI::Validator dtype_of(const std::vector<std::string>& names) {
  std::string shown;
  for (const std::string& n : names) shown += (shown.empty() ? "" : ",") + n;
  shown = "{" + shown + "}";
  return CLI::Validator(
      [names, shown](std::string& text) -> std::string {
        static const std::vector<std::vector<std::string>> same = {{"fp32", "float32"}, {"bf16", "bfloat16"}};
        for (const std::string& n : names) {
          if (text == n) return "";
          for (const auto& spellings : same)
            if (std::find(spellings.begin(), spellings.end(), n) != spellings.end() &&
                std::find(spellings.begin(), spellings.end(), text) != spellings.end()) {
              text = n;
              return "";
            }
        }
        return text + " not in " + shown;
      },
      shown);
}

}  // namespace vit::app
