// int8 inference products: y = x w^T + b with w in int8, symmetric, one scale per output
// channel (quantized once: pack_int8), and x quantized per row at run time, symmetric s8 in
// [-127, 127] (quantize_rows_s8). The products of s8 values are summed exactly in int32 by the
// kernel table's gemm_s8 (kernel_set.h), the same bits on every path; the epilogue (the two
// scales, the bias, GELU) runs in fp32 in this folder's plain code, so y has the same bits on
// every path and thread count too.
//
// Why s8 activations and not u8 with a zero point: AVX2 without VNNI multiplies u8 by s8 in
// pairs summed into a saturating int16 (vpmaddubsw). With both operands in [-127, 127] it
// takes |a| as the u8 and moves a's sign onto w (vpsignb): a pair is at most 2 * 127 * 127 =
// 32258 < 32767, so it never saturates. u8 activations (0..255) could reach 64770. VNNI's
// vpdpbusd sums four u8 x s8 products into int32 without saturation; it takes a + 128 as its
// u8 and subtracts 128 * sum_k w[n, k] (Int8Weights::sum) afterwards, exactly.
// The int32 sums cannot overflow: |sum| <= K * 255 * 127 < 2^31 for K <= 66,000 (checked).
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cpu/cpu.h"  // Scratch

namespace vit::cpu {

// Output channels per packed block; k values per group (one 32-bit lane's four bytes).
inline constexpr int64_t kS8Block = 16, kS8Group = 4;
inline constexpr int64_t kS8MaxK = 65536;

// Where q(n, k) sits in the packed layout below (Kp: K padded to a multiple of 4).
inline int64_t s8_offset(int64_t n, int64_t k, int64_t Kp) {
  return (n / kS8Block) * Kp * kS8Block + (k / kS8Group) * kS8Block * kS8Group + (n % kS8Block) * kS8Group +
         k % kS8Group;
}

// Weights for gemm_s8: blocks of 16 output channels, each [Kp / 4][16][4] int8 (channel n's
// four k values of a group side by side), N padded with zero channels to 16 blocks and K with
// zeros to Kp, a multiple of 4.
struct Int8Weights {
  int64_t N = 0, K = 0, Kp = 0, blocks = 0;
  Scratch<int8_t> q;     // blocks * Kp * 16
  Scratch<float> scale;  // [N]: w[n, k] ~ scale[n] * q(n, k)
  Scratch<int32_t> sum;  // [blocks * 16]: sum over k of q(n, k)
  int8_t at(int64_t n, int64_t k) const { return q[size_t(s8_offset(n, k, Kp))]; }
};

// Symmetric per-row quantization of w[N, K]: scale[n] = max_k |w[n, k]| / 127 and
// q = round(w / scale) (nearest even) in [-127, 127]; a row of zeros has scale 0.
void quantize_weights_s8(int8_t* q, float* scale, const float* w, int64_t N, int64_t K);
// The packed form of fp32 weights, or of weights already quantized (q [N, K], scale [N]).
std::shared_ptr<Int8Weights> pack_int8(const float* w, int64_t N, int64_t K);
std::shared_ptr<Int8Weights> pack_int8(const int8_t* q, const float* scale, int64_t N, int64_t K);

// x[M, K] to s8 rows of leading dim ldq >= K (the columns K..ldq zeroed) and scale[M], as
// quantize_weights_s8 does per row. A row with a NaN or infinity gets scale NaN, so its
// outputs are NaN as fp32's would be.
void quantize_rows_s8(int8_t* q, int64_t ldq, float* scale, const float* x, int64_t M, int64_t K);

// y[M, N] = x w^T + b (b may be null), GELU of it when gelu. OpenMP-threaded.
void linear_forward_int8(float* y, const float* x, const Int8Weights& w, const float* b, int64_t M,
                         bool gelu);

// The generic quantize_row_s8 and gemm_s8: the loops every path is checked against.
float quantize_row_s8_reference(int8_t* q, const float* x, int64_t K, int64_t ldq);
void dequant_s8_reference(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx,
                          const float* sw, const float* b, int64_t rows, int64_t cols);
void gemm_s8_reference(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                       const int32_t* wsum, int64_t nb, int64_t Kp);

}  // namespace vit::cpu
