#include "core/suggest.h"

#include <algorithm>

namespace vit {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest_name(const std::string& word, const std::vector<std::string>& names, size_t max_edits) {
  std::string best;
  size_t best_d = max_edits + 1;
  for (const std::string& n : names)
    if (const size_t d = edit_distance(word, n); d < best_d) best_d = d, best = n;
  return best;
}

}  // namespace vit
