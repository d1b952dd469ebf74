// "Did you mean": the nearest of some names to a misspelt word.
#pragma once
#include <string>
#include <vector>

namespace vit {

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b);
// The name nearest to word, if at most max_edits edits away (the first of equals); else "".
std::string nearest_name(const std::string& word, const std::vector<std::string>& names,
                         size_t max_edits = 2);

}  // namespace vit
