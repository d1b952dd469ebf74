// Whether two safetensors files hold the same tensors, bit for bit: what "resumes to the
// same bits" means in the run tests.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "io/safetensors.h"

namespace vit::test {

// Every tensor of a and b bit-identical; names each that differs and how many values.
inline void expect_same_tensors(const std::string& a, const std::string& b) {
  const SafeTensors x = SafeTensors::open(a), y = SafeTensors::open(b);
  ASSERT_EQ(x.tensors().size(), y.tensors().size()) << a << " vs " << b;
  for (const auto& t : x.tensors()) {
    const auto u = x.to_float(t.name), v = y.to_float(t.name);
    ASSERT_EQ(u.size(), v.size()) << t.name;
    size_t diff = 0;
    for (size_t i = 0; i < u.size(); ++i) diff += std::memcmp(&u[i], &v[i], sizeof(float)) != 0;
    EXPECT_EQ(diff, 0u) << t.name << ": " << diff << " of " << u.size() << " values differ in " << b;
  }
}

}  // namespace vit::test
