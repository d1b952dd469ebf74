// Tensor views: a pointer, a shape in PyTorch order, and the device the memory lives on.
// Views never own memory; arenas do. Ops check shapes on views and dispatch on the device.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace vit {

enum class Device { CPU, CUDA };

const char* device_name(Device d);

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"

struct Tensor {
  float* data = nullptr;
  Shape shape;
  Device device = Device::CPU;

  Tensor() = default;
  Tensor(float* d, Shape s, Device dev = Device::CPU) : data(d), shape(std::move(s)), device(dev) {}
  int64_t numel() const { return vit::numel(shape); }
  int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  int ndim() const { return static_cast<int>(shape.size()); }
};

// The same memory under another shape with as many elements.
Tensor reshape(const Tensor& t, Shape s);
// Throws vit::Error naming `what` when t's shape differs from want.
void check_shape(const Tensor& t, const Shape& want, const char* what);
// Throws unless every tensor lives on the same device; returns it.
Device common_device(std::initializer_list<const Tensor*> ts, const char* op);

}  // namespace vit
