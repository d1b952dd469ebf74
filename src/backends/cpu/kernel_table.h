// A compile-time table of function pointers to the instances of a kernel template on two
// small sizes (attention_narrow.cpp's head width D and count of key vectors NV), so that a
// call picks its instance with one load: k[a - 1][b - 1] = Pick<a, b>::fn.
#pragma once
#include <cstdint>
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

// Calls f.template operator()<V>() for the V of Vs equal to v, and says whether one was: a
// size known at run time to the instance of a kernel template made for it (skinny_gemm's K).
template <int... Vs, typename F>
bool with_constant(int64_t v, F&& f) {
  return ((v == Vs ? (f.template operator()<Vs>(), true) : false) || ...);
}

// The narrow attention backward's entry points (narrow.h) over a table of one path's
// backward_head<D, NV> (heads of D <= kMaxD, keys in NV <= kMaxNV vectors of W floats): the
// end of each path's attention_narrow.cpp, where backward_head, kMaxD and kMaxNV are visible.
#define VIT_NARROW_BACKWARD_ENTRIES(W)                                                                     \
  namespace {                                                                                              \
  using BackwardHead = void (*)(float*, float*, float*, const float*, const float*, const float*, int64_t, \
                                const float*, int64_t, const float*, int64_t, float);                      \
  template <int D, int NV>                                                                                 \
  struct PickBackward {                                                                                    \
    static constexpr BackwardHead fn = backward_head<D, NV>;                                               \
  };                                                                                                       \
  constexpr KernelTable<BackwardHead, kMaxD, kMaxNV, PickBackward> kBackwardHeads{                         \
      std::make_integer_sequence<int, kMaxD>{}};                                                           \
  }                                                                                                        \
  bool attention_backward_narrow_fits(int64_t T, int64_t D) {                                              \
    return D <= kMaxD && T <= (W)*kMaxNV;                                                                  \
  }                                                                                                        \
  void attention_backward_narrow(float* dq, float* dk, float* dv, const float* q, const float* k,          \
                                 const float* v, int64_t ld, const float* dO, int64_t ldo, const float* P, \
                                 int64_t T, int64_t D, float scale) {                                      \
    kBackwardHeads.k[D - 1][(T + (W)-1) / (W)-1](dq, dk, dv, q, k, v, ld, dO, ldo, P, T, scale);           \
  }

}  // namespace vit::cpu
