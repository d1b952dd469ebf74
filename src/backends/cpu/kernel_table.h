// A compile-time table of function pointers to the instances of a kernel template on two
// small sizes (attention_narrow.cpp's head width D and count of key vectors NV), so that a
// call picks its instance with one load: k[a - 1][b - 1] = Pick<a, b>::fn.
#pragma once
#include <utility>

namespace vit::cpu {

template <typename Fn, int A, int B, template <int, int> class Pick>
struct KernelTable {
  Fn k[A][B] = {};

  template <int... a>
  constexpr explicit KernelTable(std::integer_sequence<int, a...>) {
    (row<a>(std::make_integer_sequence<int, B>{}), ...);
  }

 private:
  template <int a, int... b>
  constexpr void row(std::integer_sequence<int, b...>) {
    ((k[a][b] = Pick<a + 1, b + 1>::fn), ...);
  }
};

}  // namespace vit::cpu
