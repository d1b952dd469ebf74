// A float as the decimal it was most likely written as: the shortest decimal that reads back
// to the same float (0.1307f -> 0.1307, not 0.1307000070810318), as a double. What a config
// file's number meant: JSON written back tidy, and Python's double where timm computes with one.
#pragma once

namespace vit {

double shortest_decimal(float f);

}  // namespace vit
