#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

namespace {
// The threads a pass over these tensors is worth (the update reads and writes ~8 floats an
// element, a sum or a scaling ~2).
template <typename T>
int threads_over(const T* x, int64_t count, int64_t per_element) {
  int64_t n = 0;
  for (int64_t k = 0; k < count; ++k) n += x[k].n;
  return threads_for(n * per_element);
}
}  // namespace

void optimizer_step(const ParamUpdate* updates, int64_t count, const UpdateRule& rule, Device d) {
  switch (d) {
    case Device::CPU: return cpu::optimizer_step(updates, count, rule, threads_over(updates, count, 8));
    default: unsupported("optimizer_step", d);
  }
}

void lamb_moments(const ParamUpdate* pieces, int64_t count, const UpdateRule& rule, double* update_sq,
                  double* weight_sq, Device d) {
  switch (d) {
    case Device::CPU:
      return cpu::lamb_moments(pieces, count, rule, update_sq, weight_sq, threads_over(pieces, count, 12));
    default: unsupported("lamb_moments", d);
  }
}

void lamb_apply(const ParamUpdate* pieces, int64_t count, const UpdateRule& rule, const float* ratio,
                Device d) {
  switch (d) {
    case Device::CPU: return cpu::lamb_apply(pieces, count, rule, ratio, threads_over(pieces, count, 8));
    default: unsupported("lamb_apply", d);
  }
}

void sums_of_squares(double* out, const Span* x, int64_t count, Device d) {
  switch (d) {
    case Device::CPU: return cpu::sums_of_squares(out, x, count, threads_over(x, count, 2));
    default: unsupported("sums_of_squares", d);
  }
}

void scale_spans(const Span* x, int64_t count, float scale, Device d) {
  switch (d) {
    case Device::CPU: return cpu::scale_spans(x, count, scale, threads_over(x, count, 2));
    default: unsupported("scale_spans", d);
  }
}

void scale_each_span(const Span* x, const float* scales, int64_t count, Device d) {
  switch (d) {
    case Device::CPU: return cpu::scale_each_span(x, scales, count, threads_over(x, count, 2));
    default: unsupported("scale_each_span", d);
  }
}

void clamp_spans(const Span* x, int64_t count, float limit, Device d) {
  switch (d) {
    case Device::CPU: return cpu::clamp_spans(x, count, limit, threads_over(x, count, 2));
    default: unsupported("clamp_spans", d);
  }
}

}  // namespace vit::ops
