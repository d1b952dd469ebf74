// The arithmetic a linear layer's product runs in: fp32, bf16 inference (bf16 weights and
// inputs, fp32 accumulation), int8 inference (int8 weights per channel, int8 inputs per row,
// int32 accumulation: backends/cpu/int8.h) or amp (mixed-precision training: bf16 operands, fp32
// accumulation and results, torch.autocast's). The ops and every backend share the word.
#pragma once

namespace vit {

enum class Precision { fp32, bf16, amp, int8 };

}  // namespace vit
