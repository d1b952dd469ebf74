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
//
// On a CPU with AMX the products run instead as oneDNN's s8 x s8 -> s32 matmul on AMX tiles
// (linear_int8_onednn.cpp), 1.9-3.2x the AVX512-VNNI kernel's rate there: integer sums, so
// the same bits too.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "backends/cpu/cpu.h"  // Scratch, Activation

namespace vit::cpu {

// Output channels per packed block; k values per group (one 32-bit lane's four bytes).
inline constexpr int64_t kS8Block = 16, kS8Group = 4;
inline constexpr int64_t kS8MaxK = 65536;

// Where q(n, k) sits in the packed layout below (Kp: K padded to a multiple of 4).
inline int64_t s8_offset(int64_t n, int64_t k, int64_t Kp) {
  return (n / kS8Block) * Kp * kS8Block + (k / kS8Group) * kS8Block * kS8Group + (n % kS8Block) * kS8Group +
         k % kS8Group;
}

// Which product runs an int8 layer: the kernel table's gemm_s8, or oneDNN's int8 matmul.
enum class Int8Product { table, onednn };
// Whether oneDNN's product runs the int8 layers here: the path in use is avx512 and oneDNN runs
// int8 matmuls on AMX tiles (the CPU has AMX-INT8 and ONEDNN_MAX_CPU_ISA does not hold oneDNN
// below it). Elsewhere gemm_s8 is as fast as oneDNN or faster (docs/design.md, "int8 inference").
bool int8_on_amx();
// The product for a [N, K] weight: onednn where int8_on_amx() and both are at least
// kAmxMinWidth; narrower layers (mnist-seed's 8 and 32) ran 1.16x slower on AMX, oneDNN's
// call costing more than their sums.
inline constexpr int64_t kAmxMinWidth = 64;
Int8Product int8_product(int64_t N, int64_t K);
// Its name for vit info and vit bench: "amx" where int8_on_amx(), else the table's gemm_s8_name.
const char* int8_product_name();

struct Int8Onednn;  // the weights in oneDNN's blocked s8 layout, and its primitives per row count

// Weights for gemm_s8: blocks of 16 output channels, each [Kp / 4][16][4] int8 (channel n's
// four k values of a group side by side), N padded with zero channels to 16 blocks and K with
// zeros to Kp, a multiple of 4. Or, for the onednn product, the weights as oneDNN packs them
// (q and sum then empty).
struct Int8Weights {
  int64_t N = 0, K = 0, Kp = 0, blocks = 0;
  Int8Product product = Int8Product::table;
  Scratch<int8_t> q;     // blocks * Kp * 16
  Scratch<float> scale;  // [N]: w[n, k] ~ scale[n] * q(n, k)
  Scratch<int32_t> sum;  // [blocks * 16]: sum over k of q(n, k)
  std::shared_ptr<Int8Onednn> onednn;
  int8_t at(int64_t n, int64_t k) const {  // the table product's weights only
    return q[size_t(s8_offset(n, k, Kp))];
  }
};

// Symmetric per-row quantization of w[N, K]: scale[n] = max_k |w[n, k]| / 127 and
// q = round(w / scale) (nearest even) in [-127, 127]; a row of zeros has scale 0.
void quantize_weights_s8(int8_t* q, float* scale, const float* w, int64_t N, int64_t K);
// The packed form of fp32 weights, or of weights already quantized (q [N, K], scale [N]), for
// the product given (int8_product(N, K) by default; tests run either anywhere).
std::shared_ptr<Int8Weights> pack_int8(const float* w, int64_t N, int64_t K,
                                       std::optional<Int8Product> product = std::nullopt);
std::shared_ptr<Int8Weights> pack_int8(const int8_t* q, const float* scale, int64_t N, int64_t K,
                                       std::optional<Int8Product> product = std::nullopt);

// x[M, K] to s8 rows of leading dim ldq >= K (the columns K..ldq zeroed) and scale[M], as
// quantize_weights_s8 does per row. A row with a NaN or infinity gets scale NaN, so its
// outputs are NaN as fp32's would be.
void quantize_rows_s8(int8_t* q, int64_t ldq, float* scale, const float* x, int64_t M, int64_t K);

// y[M, N] = x w^T + b (b may be null), GELU of it when gelu. OpenMP-threaded.
void linear_forward_int8(float* y, const float* x, const Int8Weights& w, const float* b, int64_t M,
                         bool gelu);

// linear_int8_onednn.cpp: whether oneDNN's int8 sums are exact here (it runs VNNI, AMX, or
// its reference loops; below VNNI they are not, and pack_s8_onednn refuses); q [N, K] in
// oneDNN's layout; and C[M, N] (leading dim ldc) = the
// exact int32 sums of A [M, K] (leading dim lda) times q^T, on OpenMP's threads.
bool onednn_int8_exact();
std::shared_ptr<Int8Onednn> pack_s8_onednn(const int8_t* q, int64_t N, int64_t K);
void gemm_s8_onednn(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, Int8Onednn& w);

// A transformer block's MLP on int8 weights: y[M, fc2.N] = fc2(act(fc1(x))) with biases, a chunk
// of rows at a time, so the hidden activations exist in fp32 a chunk at a time and are
// quantized for fc2 while in cache. The bits are those of the two linear_forward_int8 calls
// with act_forward between them (the same operations per row on the same values).
void mlp_forward_int8(float* y, const float* x, const Int8Weights& fc1, const float* b1,
                      const Int8Weights& fc2, const float* b2, int64_t M, Activation act);

// The generic quantize_row_s8 and gemm_s8: the loops every path is checked against.
float quantize_row_s8_reference(int8_t* q, const float* x, int64_t K, int64_t ldq);
void dequant_s8_reference(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx,
                          const float* sw, const float* b, int64_t rows, int64_t cols);
void gemm_s8_reference(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                       const int32_t* wsum, int64_t nb, int64_t Kp);

}  // namespace vit::cpu
