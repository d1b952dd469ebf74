// vitcpp._vitcpp: the bindings under python/vitcpp/__init__.py. Arrays cross as numpy
// float32 C-contiguous arrays read in place (the Python side converts or refuses anything
// else, with the reason); outputs are new numpy arrays that Python owns. Compute runs under
// compute() (bindings.h: no GIL, vitcpp's threads) and takes the model's lock (engine.h).
// vit::Error becomes vitcpp.Error, a RuntimeError with the engine's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "data/preprocess.h"
#include "engine.h"
#include "io/formats.h"
#include "ops/ops.h"
#include "vit/classifier.h"
#include "vit/core/version.h"

namespace py = pybind11;
using vit::python::Engine;

namespace {

using Floats = py::array_t<float, py::array::c_style>;   // no forcecast: Python converts first
using Bytes = py::array_t<uint8_t, py::array::c_style>;  // pixels; a patch mask, made uint8 by Python

std::string shape_of(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

// x must be [N, C, H, W] at the model's input size: a ValueError that says both otherwise.
// N = 0 is an empty batch, answered with empty outputs as torch answers it.
int64_t batch_of(const Engine& e, const Floats& x) {
  const vit::ViTConfig& c = e.config();
  const std::string want = "[N, " + std::to_string(c.in_chans) + ", " + std::to_string(c.img_h) + ", " +
                           std::to_string(c.img_w) + "]";
  if (x.ndim() != 4 || x.shape(1) != c.in_chans || x.shape(2) != c.img_h || x.shape(3) != c.img_w)
    throw py::value_error("the model takes images " + want + ", got " + shape_of(x));
  return x.shape(0);
}

// f(engine) under compute(), holding the model's lock (compute, and the calls that unpack or
// repack its weights).
template <typename F>
auto locked(Engine& e, F&& f) {
  return vit::python::compute([&] {
    std::lock_guard<vit::ForkSafeMutex> lock(e.lock());
    return f(e);
  });
}

Floats empty(std::vector<py::ssize_t> shape) {
  return Floats(std::move(shape));
}

py::array_t<float> logits(Engine& e, const Floats& x) {
  const int64_t B = batch_of(e, x);
  Floats out = empty({B, e.config().num_classes});
  float* o = out.mutable_data();
  if (B > 0) locked(e, [&](Engine& m) { m.logits(x.data(), B, o); });
  return out;
}

// (pooled [N, D] or None, tokens [N, T, D] or None)
// A patch mask [B, N] of 0 and 1 (vitcpp/__init__.py makes it from timm's attn_mask), or null.
const uint8_t* mask_of(const Engine& e, int64_t B, const std::optional<Bytes>& mask) {
  if (!mask) return nullptr;
  const int64_t N = e.config().num_patches();
  if (mask->ndim() != 2 || mask->shape(0) != B || mask->shape(1) != N)
    throw py::value_error("the patch mask must be [" + std::to_string(B) + ", " + std::to_string(N) +
                          "], got " + shape_of(*mask));
  return mask->data();
}

py::tuple features(Engine& e, const Floats& x, bool pooled, bool tokens, const std::optional<Bytes>& mask) {
  const int64_t B = batch_of(e, x), D = e.config().embed_dim, T = e.config().num_tokens();
  Floats p = empty({pooled ? B : 0, D}), t = empty({tokens ? B : 0, T, D});
  float *pp = pooled ? p.mutable_data() : nullptr, *tp = tokens ? t.mutable_data() : nullptr;
  const uint8_t* mk = mask_of(e, B, mask);
  if (B > 0) locked(e, [&](Engine& m) { m.features(x.data(), B, mk, pp, tp); });
  return py::make_tuple(pooled ? py::object(p) : py::none(), tokens ? py::object(t) : py::none());
}

// (attn [depth, N, H, T, T], pool_attn [N, H, T] or None)
py::tuple attention(Engine& e, const Floats& x) {
  const vit::ViTConfig& c = e.config();
  const int64_t B = batch_of(e, x), H = c.num_heads, T = c.num_tokens();
  Floats attn = empty({c.depth, B, H, T, T}), pool = empty({c.map_pool() ? B : 0, H, T});
  float *a = attn.mutable_data(), *p = c.map_pool() ? pool.mutable_data() : nullptr;
  if (B > 0) locked(e, [&](Engine& m) { m.attention(x.data(), B, a, p); });
  return py::make_tuple(attn, c.map_pool() ? py::object(pool) : py::none());
}

// (intermediates [K, N, T, D], tokens [N, T, D])
py::tuple intermediates(Engine& e, const Floats& x, const std::vector<int64_t>& ids,
                        const std::optional<Bytes>& mask) {
  const int64_t B = batch_of(e, x), T = e.config().num_tokens(), D = e.config().embed_dim;
  Floats out = empty({py::ssize_t(ids.size()), B, T, D}), tokens = empty({B, T, D});
  float *o = out.mutable_data(), *t = tokens.mutable_data();
  const uint8_t* mk = mask_of(e, B, mask);
  if (B > 0) locked(e, [&](Engine& m) { m.intermediates(x.data(), B, mk, ids, o, t); });
  return py::make_tuple(out, tokens);
}

// [N, grid_h, grid_w]
py::array_t<float> maps(Engine& e, const Floats& x, const std::string& method, int64_t layer, int64_t head) {
  const int64_t B = batch_of(e, x);
  Floats out = empty({B, e.config().grid_h(), e.config().grid_w()});
  float* o = out.mutable_data();
  if (B > 0) locked(e, [&](Engine& m) { m.maps(x.data(), B, method, layer, head, o); });
  return out;
}

// Every parameter, or those of `prefixes` (names starting with one of them) alone. The arrays
// are made with the GIL, then filled without it, under the model's lock: the lock was taken
// with the GIL held, so a state_dict() beside another thread's call stalled every Python
// thread for that call, and for the copy.
py::dict params(Engine& e, const std::vector<std::string>& prefixes) {
  std::vector<std::pair<std::string, Floats>> arrays;
  for (const Engine::Param& p : e.param_shapes(prefixes))
    arrays.emplace_back(p.name, Floats(std::vector<py::ssize_t>(p.shape.begin(), p.shape.end())));
  std::vector<float*> into;
  for (auto& [name, a] : arrays) into.push_back(a.mutable_data());
  locked(e, [&](Engine& m) {
    const std::vector<Engine::Param> params = m.params(prefixes);
    for (size_t i = 0; i < params.size(); ++i) std::copy_n(params[i].data, arrays[i].second.size(), into[i]);
  });
  py::dict out;
  for (auto& [name, a] : arrays) out[py::str(name)] = a;
  return out;
}

// {name: shape} of every parameter, without their values.
py::dict param_shapes(const Engine& e) {
  py::dict out;
  for (const Engine::Param& p : e.param_shapes()) out[py::str(p.name)] = py::tuple(py::cast(p.shape));
  return out;
}

// load_state_dict's copy: each array (float32, C order, as Python made it) into its parameter,
// checked for name and size first; the arrays are read without the GIL, under the lock.
void set_params(Engine& e, const py::dict& values) {
  std::vector<std::pair<std::string, const float*>> in;
  std::vector<py::array_t<float>> keep;  // alive until the copy is done
  std::map<std::string, int64_t> numel;
  for (const Engine::Param& p : e.param_shapes())
    numel[p.name] = std::accumulate(p.shape.begin(), p.shape.end(), int64_t(1), std::multiplies<>());
  for (const auto& [k, v] : values) {
    const std::string name = py::cast<std::string>(k);
    auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(v);
    if (!a) throw py::type_error(name + ": not an array of floats");
    const auto it = numel.find(name);
    if (it == numel.end() || a.size() != it->second)
      throw py::value_error(name + ": not a parameter of the model, or another size");
    in.emplace_back(name, a.data());
    keep.push_back(std::move(a));
  }
  locked(e, [&](Engine& m) { m.set_params(in); });
}

// One image's model input [C, H, W] from what fill writes.
template <typename F>
py::array_t<float> image(const vit::InputSpec& in, F&& fill) {
  Floats out = empty({in.channels, in.height, in.width});
  float* o = out.mutable_data();
  vit::python::compute([&] { fill(o); });
  return out;
}

// Raises type with what as Python text, bytes that are not UTF-8 replaced: a file name or
// header quoted in a message made PyErr_SetString fail, and the error arrived empty.
void raise_text(PyObject* type, const std::string& what) {
  PyObject* text = PyUnicode_DecodeUTF8(what.data(), Py_ssize_t(what.size()), "replace");
  PyErr_SetObject(type, text);
  Py_XDECREF(text);
}

// Python's own OSError for errno err: the subclass the number picks (FileNotFoundError,
// PermissionError, NotADirectoryError, ...), with errno, strerror and filename, as open() raises
// it.
void raise_os_error(int err, const std::string& message, const std::string& path) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), Py_ssize_t(message.size()), "replace");
  PyObject* file = PyUnicode_DecodeFSDefaultAndSize(path.data(), Py_ssize_t(path.size()));
  PyObject* exc = text && file ? PyObject_CallFunction(PyExc_OSError, "iOO", err, text, file) : nullptr;
  if (exc) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
  Py_XDECREF(exc);
  Py_XDECREF(file);
  Py_XDECREF(text);
}

}  // namespace

PYBIND11_MODULE(_vitcpp, m) {
  m.doc() = "vitcpp's engine (python/vitcpp wraps it with timm's API)";
  static py::exception<vit::Error> error(m, "Error", PyExc_RuntimeError);
  // A file system error (a directory where a file is meant, no permission) as Python's own
  // OSError subclass, as open() raises it.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const vit::Error& e) {
      raise_text(error.ptr(), e.what());
    } catch (const std::filesystem::filesystem_error& e) {
      raise_os_error(e.code().value(), e.code().message(), e.path1().string());
    }
  });
  m.attr("__version__") = vit::version();

  py::class_<vit::python::LoadArgs>(m, "LoadArgs")
      .def(py::init<>())
      .def_readwrite("num_classes", &vit::python::LoadArgs::num_classes)
      .def_readwrite("img_h", &vit::python::LoadArgs::img_h)
      .def_readwrite("img_w", &vit::python::LoadArgs::img_w)
      .def_readwrite("labels_file", &vit::python::LoadArgs::labels_file)
      .def_readwrite("global_pool", &vit::python::LoadArgs::global_pool)
      .def_readwrite("seed", &vit::python::LoadArgs::seed)
      .def_readwrite("pos_resample", &vit::python::LoadArgs::pos_resample)
      .def_readwrite("model_name", &vit::python::LoadArgs::model_name)
      .def_readwrite("drop_rate", &vit::python::LoadArgs::drop_rate)
      .def_readwrite("drop_path_rate", &vit::python::LoadArgs::drop_path_rate)
      .def_readwrite("attn_drop_rate", &vit::python::LoadArgs::attn_drop_rate)
      .def_readwrite("proj_drop_rate", &vit::python::LoadArgs::proj_drop_rate)
      .def_readwrite("pos_drop_rate", &vit::python::LoadArgs::pos_drop_rate);

  py::class_<Engine>(m, "Engine")
      .def_static("load",
                  [](const std::string& path, const vit::python::LoadArgs& a) {
                    return vit::python::compute([&] { return Engine::load(path, a); });
                  })
      .def_static("create",
                  [](const std::string& name, const vit::python::LoadArgs& a) {
                    return vit::python::compute([&] { return Engine::create(name, a); });
                  })
      .def("config_json", [](const Engine& e) { return e.config().to_json(-1); })
      .def_property_readonly("format", &Engine::format)
      .def_property_readonly("class_names", &Engine::class_names)
      .def_property_readonly("notes", &Engine::notes)
      .def_property_readonly("dtype", &Engine::dtype)
      .def_property_readonly("pos_resample", &Engine::pos_resample)
      .def_property_readonly("stored_dtype", &Engine::stored_dtype)
      .def("set_origin", &Engine::set_origin)
      .def("num_params", &Engine::num_params)
      .def("logits", &logits)
      .def("features", &features, py::arg("x"), py::arg("pooled") = true, py::arg("tokens") = true,
           py::arg("mask") = py::none())
      .def("attention", &attention)
      .def("maps", &maps)
      .def("intermediates", &intermediates, py::arg("x"), py::arg("ids"), py::arg("mask") = py::none())
      .def("set_dtype",
           [](Engine& e, const std::string& d) { locked(e, [&](Engine& m) { m.set_dtype(d); }); })
      .def("with_head",
           [](Engine& e, int64_t n, uint64_t seed) {
             return locked(e, [&](Engine& m) { return m.with_head(n, seed); });
           })
      .def("resized", [](Engine& e, int64_t h,
                         int64_t w) { return locked(e, [&](Engine& m) { return m.resized(h, w); }); })
      .def("params", &params, py::arg("prefixes") = std::vector<std::string>{})
      .def("clone", [](Engine& e) { return locked(e, [&](Engine& m) { return m.clone(); }); })
      .def("param_shapes", &param_shapes)
      .def("set_params", &set_params)
      .def(
          "save",
          [](Engine& e, const std::string& dir, const std::string& format, bool fp32) {
            return locked(e, [&](Engine& m) { return m.save(dir, format, fp32); });
          },
          py::arg("dir"), py::arg("format"), py::arg("fp32") = false)
      .def("export_onnx", [](Engine& e, const std::string& path, bool int8) {
        locked(e, [&](Engine& m) { m.export_onnx(path, int8); });
      });

  py::class_<vit::InputSpec>(m, "InputSpec")
      .def(py::init([](int64_t c, int64_t h, int64_t w, std::vector<float> mean, std::vector<float> std,
                       std::string interpolation, double crop_pct, std::string crop_mode) {
        vit::InputSpec in{c,
                          h,
                          w,
                          std::move(mean),
                          std::move(std),
                          std::move(interpolation),
                          crop_pct,
                          std::move(crop_mode)};
        in.validate();
        return in;
      }))
      .def_readonly("channels", &vit::InputSpec::channels)
      .def_readonly("height", &vit::InputSpec::height)
      .def_readonly("width", &vit::InputSpec::width);
  m.def("preprocess_file", [](const vit::InputSpec& in, const std::string& path) {
    return image(in, [&](float* o) { vit::load_image_input(path, in, o); });
  });
  m.def("preprocess_bytes", [](const vit::InputSpec& in, const py::bytes& data) {
    const std::string b = data;
    return image(in, [&](float* o) {
      vit::preprocess_encoded(reinterpret_cast<const uint8_t*>(b.data()), b.size(), in, o);
    });
  });
  m.def("preprocess_pixels", [](const vit::InputSpec& in, const Bytes& hwc) {
    if (hwc.ndim() != 3) throw py::value_error("pixels must be uint8 [H, W, C], got " + shape_of(hwc));
    return image(in, [&](float* o) {
      vit::preprocess_pixels(hwc.data(), hwc.shape(0), hwc.shape(1), hwc.shape(2), in, o);
    });
  });

  m.def("top_k", [](const Floats& logits, int64_t k, const std::vector<std::string>& names) {
    if (logits.ndim() != 1) throw py::value_error("top_k takes one row of logits, got " + shape_of(logits));
    std::vector<py::tuple> out;
    for (const vit::Prediction& p : vit::top_k(logits.data(), logits.shape(0), k, names))
      out.push_back(py::make_tuple(p.index, p.probability, p.label));
    return out;
  });
  m.def("preset_names", &vit::preset_names);
  // timm's architectures that create_model builds by name: every one vitcpp runs (its table
  // holds each as timm builds it).
  m.def("timm_names", &vit::detail::runnable_timm_architectures);
  m.def("timm_tagged_names", &vit::detail::timm_tagged_names);  // with their pretrained tags
  m.def("deprecated_timm_names", &vit::detail::deprecated_timm_names);
  m.def("preset_config_json", [](const std::string& name) { return vit::named_config(name).to_json(-1); });
  m.def("is_timm_architecture",
        [](const std::string& name) { return vit::detail::find_timm_architecture(name) != nullptr; });
  // What the CPU backend runs here, as vit info prints it (vitcpp.backend_info()).
  m.def("backend_info", [] {
    py::dict d;
    d["isa"] = vit::ops::cpu_isa();
    d["isa_detected"] = vit::ops::cpu_isa_detected();
    d["matrix_products"] = vit::ops::cpu_gemm_library();
    d["bf16"] = vit::ops::bf16_available();
    d["bf16_native"] = vit::ops::bf16_available() && vit::ops::bf16_emulated().empty();
    d["int8_product"] = vit::ops::cpu_int8_product();
    d["int8_narrow_product"] = vit::ops::cpu_int8_table_product();  // layers narrower than AMX's tiles
    d["int8_dot_product"] = vit::ops::cpu_int8_has_dot_product();
    return d;
  });
  m.def("_at_exit", &vit::python::close_calls);                       // gil.h: on Python's atexit
  m.def("_bf16_emulated", [] { return vit::ops::bf16_emulated(); });  // why bf16 is slow here, or ""
  m.def("set_threads", &vit::python::set_threads);
  m.def("threads", &vit::python::threads);
  // The OpenMP count a call computes on (tests: what compute() sets).
  m.def("_compute_threads", [] { return vit::python::compute([] { return vit::num_threads(); }); });
  vit::python::bind_train(m);
}
