// vitcpp.train's C++ half: `vit train` run in the Python process (apps/vit/train_hooks.h),
// on a dataset directory or on numpy arrays (arrays.h). The run releases the GIL; it takes
// it back after each optimizer step to let Python's signal handlers run (Ctrl-C raises
// KeyboardInterrupt there, which stops the run after its step with a state that resume=
// continues), and after each epoch to call the callback.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <locale.h>
#include <CLI/CLI.hpp>
#include <cctype>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>

#include "apps/vit/train_hooks.h"
#include "apps/vit/validators.h"
#include "arrays.h"
#include "bindings.h"
#include "engine.h"
#include "train/trainer.h"

namespace py = pybind11;

namespace vit::python {

namespace {

using Pixels = py::array_t<uint8_t, py::array::c_style>;
using Floats = py::array_t<float, py::array::c_style>;
using Labels = py::array_t<int64_t, py::array::c_style>;

// x: uint8 or float32 [N, C, H, W], y: int64 [N] (the Python side has shaped and typed them).
ArraySplit split_of(const py::array& x, const Labels& y, const char* name) {
  if (x.ndim() != 4) throw py::value_error(std::string(name) + ": images must be [N, C, H, W]");
  if (y.ndim() != 1 || y.shape(0) != x.shape(0))
    throw py::value_error(std::string(name) + ": labels must be [N] with N = " + std::to_string(x.shape(0)) +
                          " (one per image)");
  ArraySplit s;
  s.x = x.data();
  s.is_float = x.dtype().is(py::dtype::of<float>());
  s.n = x.shape(0);
  s.c = x.shape(1);
  s.h = x.shape(2);
  s.w = x.shape(3);
  s.y = y.data();
  return s;
}

// One epoch's summary.csv row as a dict. Without evaluation data the eval_ figures are None,
// not summary.csv's 0 (a 0% top-1 read as a result).
py::dict epoch_dict(const EpochStats& e, bool ema, bool has_eval) {
  py::dict d;
  for (const auto& [name, v] : summary_row(e, ema)) {
    if (name == "epoch")
      d[py::str(name)] = int64_t(v);
    else if (!has_eval && name.rfind("eval_", 0) == 0)
      d[py::str(name)] = py::none();
    else
      d[py::str(name)] = v;
  }
  return d;
}

// The C library's numbers in the "C" locale on this thread for the run: a Python program that
// called locale.setlocale(LC_ALL, "") under de_DE had every fractional option refused (strtod
// stopped at the '.': "drop: a rate in [0, 1), got 0.1") and its log in decimal commas.
class ClassicNumbers {
 public:
  ClassicNumbers() : c_(newlocale(LC_ALL_MASK, "C", locale_t(0))), old_(c_ ? uselocale(c_) : locale_t(0)) {}
  ~ClassicNumbers() {
    if (!c_) return;
    uselocale(old_);
    freelocale(c_);
  }
  ClassicNumbers(const ClassicNumbers&) = delete;
  ClassicNumbers& operator=(const ClassicNumbers&) = delete;

 private:
  locale_t c_, old_;
};

// The run's lines into Python's sys.stdout (what a notebook shows, and what redirect_stdout
// captures), not the process's standard output: each whole line, and whatever a flush asks
// for (a progress bar's \r updates), written with the GIL held. An exception from the write
// (a closed stream, KeyboardInterrupt raised in its Python code) becomes the run's `raised`,
// which stops it as the callback's would; later lines are dropped.
class PythonStdout : public std::streambuf {
 public:
  explicit PythonStdout(std::optional<py::error_already_set>& raised) : raised_(raised) {}
  void write_out() {
    std::lock_guard<std::mutex> lock(mu_);
    if (text_.empty()) return;
    WithGil gil;
    if (!raised_) {
      try {
        const py::object out = py::module_::import("sys").attr("stdout");
        if (!out.is_none()) {
          out.attr("write")(py::str(text_.data(), text_.size()));
          out.attr("flush")();
        }
      } catch (py::error_already_set& e) {
        raised_.emplace(std::move(e));
      }
    }
    text_.clear();
  }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }
  std::streamsize xsputn(const char* p, std::streamsize n) override {
    bool line = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      text_.append(p, size_t(n));
      line = std::memchr(p, '\n', size_t(n)) != nullptr;
    }
    if (line) write_out();
    return n;
  }
  int sync() override {
    write_out();
    return 0;
  }

 private:
  std::optional<py::error_already_set>& raised_;
  std::mutex mu_;
  std::string text_;
};

// (status, history [dict], engine or None, class names, stop message): status is vit
// train's exit status (0 done, 128 + signal stopped). A Python exception raised in the
// callback or by a signal handler during the run is raised again here, after the run has
// stopped with its state written.
// A message about vit train's flags in train()'s keywords: "--num-classes: ..." as
// "num_classes: ...", and a number after a flag as the keyword's value ("set num_classes=11").
// A flag is a word of its own (after a space, a bracket or a quote: "/tmp/--x" is a path),
// and a vit command the message suggests ("vit train --resume DIR") is left whole, to its
// clause's end.
std::string keyword_words(const std::string& text) {
  std::string out;
  bool command = false;  // inside "vit <command> ..."
  for (size_t i = 0; i < text.size(); ++i) {
    const char before = i == 0 ? ' ' : text[i - 1];
    const bool word_start = std::strchr(" ([\"'", before) != nullptr;
    if (word_start && text.compare(i, 4, "vit ") == 0 && i + 4 < text.size() &&
        std::islower(static_cast<unsigned char>(text[i + 4])))
      command = true;
    else if (std::strchr(";\n)", text[i]) != nullptr)
      command = false;
    const bool flag = !command && word_start && text.compare(i, 2, "--") == 0 && i + 2 < text.size() &&
                      std::islower(static_cast<unsigned char>(text[i + 2]));
    if (!flag) {
      out += text[i];
      continue;
    }
    for (i += 2; i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '-');
         ++i)
      out += text[i] == '-' ? '_' : text[i];
    if (i + 1 < text.size() && text[i] == ' ' && std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      out += '=';
      ++i;
    }
    --i;
  }
  return out;
}

py::tuple run(const std::vector<std::string>& args, const py::object& train_x, const py::object& train_y,
              const py::object& val_x, const py::object& val_y, const py::object& callback) {
  app::TrainHooks hooks;
  std::optional<ArraySplit> train, val;
  py::array tx, vx;
  Labels ty, vy;
  if (!train_x.is_none()) {
    tx = train_x;
    ty = train_y;
    train = split_of(tx, ty, "train");
    if (!val_x.is_none()) {
      vx = val_x;
      vy = val_y;
      val = split_of(vx, vy, "val");
    }
    hooks.data_name = "numpy arrays (" + std::to_string(train->n) + " training images" +
                      (val ? ", " + std::to_string(val->n) + " for evaluation" : std::string()) + ")";
    hooks.data = [&](const InputSpec& in, double val_split, uint64_t seed) {
      return array_datasets(*train, val ? &*val : nullptr, in, val_split, seed);
    };
  }
  std::optional<py::error_already_set> raised;  // the first Python exception of the run
  bool callback_stop = false;
  hooks.stop_requested = [&]() -> int {
    if (raised) return SIGINT;
    if (callback_stop || calls_closing()) return SIGTERM;  // closing: the program ends (gil.h)
    WithGil gil;
    if (PyErr_CheckSignals() != 0) {
      raised.emplace();  // takes the pending exception (KeyboardInterrupt for Ctrl-C)
      return SIGINT;
    }
    return 0;
  };
  PythonStdout buffer(raised);
  std::ostream log(&buffer);
  hooks.log = &log;
  hooks.log_is_terminal = [] {
    const py::object out = py::module_::import("sys").attr("stdout");
    try {
      return !out.is_none() && out.attr("isatty")().cast<bool>();
    } catch (py::error_already_set&) {  // a stream without isatty: not a terminal
      return false;
    }
  }();
  std::vector<EpochStats> seen;
  hooks.on_epoch_end = [&](const EpochStats& e) {
    seen.push_back(e);
    if (callback.is_none() || raised) return;
    WithGil gil;
    try {
      const py::object answer = callback(epoch_dict(e, hooks.model_ema && hooks.has_eval, hooks.has_eval));
      // Python's truth (False, 0, numpy's False stop; a string goes on); an array of several
      // values raises, as `if answer:` would.
      if (!answer.is_none()) {
        const int truth = PyObject_IsTrue(answer.ptr());
        if (truth < 0) throw py::error_already_set();
        if (truth == 0) callback_stop = true;  // False: stop here
      }
    } catch (py::error_already_set& err) {
      raised.emplace(std::move(err));
    }
  };
  // --threads, when given, sets OpenMP's count inside; compute() gives the old one back after.
  int status = 0;
  try {
    status = compute([&] {
      const ClassicNumbers numbers;
      return app::run_train(args, &hooks);
    });
  } catch (const CLI::ParseError& e) {  // an option's value: Python's ValueError, in keywords
    throw py::value_error(keyword_words(e.what()));
  } catch (const ValueError& e) {  // a value or options that cannot work together, in keywords too
    throw py::value_error(keyword_words(e.what()));
  } catch (const Error& e) {  // "--num-classes 11" as the keyword the program passed
    throw Error(keyword_words(e.what()));
  }
  buffer.write_out();  // what is left after the last line
  if (raised) {
    // Ctrl-C: where the run stopped rides on the KeyboardInterrupt (Python 3.11's notes), as
    // vit train prints it (the log is not written once an exception is pending).
    const py::object exc = raised->value();
    if (!hooks.stopped.empty() && py::hasattr(exc, "add_note"))
      exc.attr("add_note")("vitcpp.train " + hooks.stopped);
    throw *raised;
  }
  const bool ema = hooks.model_ema && hooks.has_eval;
  py::list history;
  for (const EpochStats& e : hooks.history.empty() ? seen : hooks.history)  // seen: a stop's epochs
    history.append(epoch_dict(e, ema, hooks.has_eval));
  py::object engine = py::none();
  if (hooks.model) engine = py::cast(Engine::adopt(std::move(hooks.model), hooks.class_names));
  return py::make_tuple(status, history, engine, hooks.stopped);
}

// vit train's long flag names, without "--" (Python's keyword arguments, `-` as `_`), each with
// whether it is a switch (--amp: no value; Python's True or False).
std::vector<std::pair<std::string, bool>> train_flags() {
  CLI::App app;
  app::add_train(app, nullptr);
  std::vector<std::pair<std::string, bool>> out;
  for (const CLI::Option* o : app.get_options())
    for (const std::string& name : o->get_lnames())
      if (name != "help" && name != "resume" && name != "output" && name != "data-dir" &&
          name != "pretrained")
        out.emplace_back(name, o->get_expected_max() == 0);
  return out;
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("train_flags", &train_flags);
  m.def("train", &run, py::arg("args"), py::arg("train_x"), py::arg("train_y"), py::arg("val_x"),
        py::arg("val_y"), py::arg("callback"));
}

}  // namespace vit::python
