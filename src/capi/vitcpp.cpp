// The C API (include/vitcpp.h) over vit::Classifier: every entry point catches everything
// and turns it into a status and this thread's last-error message.
#include "vitcpp.h"

#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/threads.h"
#include "vit/classifier.h"

static_assert(VITCPP_MAX_THREADS == vit::kMaxThreads);

struct vitcpp_model {
  vit::Classifier classifier;
};

namespace {

thread_local std::string last_error;

// A bad argument found by an entry point, thrown inside guarded(): every entry point's work,
// its messages' strings included, runs there, so that nothing it throws (std::bad_alloc
// building a message) crosses the C boundary.
struct InvalidArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

vitcpp_status fail(vitcpp_status s, const char* msg) noexcept {
  try {
    last_error = msg;
  } catch (...) {  // no memory for the message
    last_error.clear();
  }
  return s;
}

// Runs f, returning VITCPP_OK, or the status and message of what it threw.
template <typename F>
vitcpp_status guarded(F&& f) noexcept {
  try {
    f();
    return VITCPP_OK;
  } catch (const InvalidArgument& e) {
    return fail(VITCPP_INVALID_ARGUMENT, e.what());
  } catch (const vit::Error& e) {
    return fail(VITCPP_ERROR, e.what());
  } catch (const std::bad_alloc&) {
    return fail(VITCPP_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(VITCPP_INTERNAL_ERROR, e.what());
  } catch (...) {
    return fail(VITCPP_INTERNAL_ERROR, "unknown exception");
  }
}

const char* pixels_kind(int kind) {
  return kind == VITCPP_IMAGE_PIXELS ? "VITCPP_IMAGE_PIXELS" : "VITCPP_IMAGE_PIXELS_SIZED";
}

// The C++ inputs of count C images; throws InvalidArgument, after `call`, for one that cannot
// be described.
std::vector<vit::ImageInput> inputs(const vitcpp_image* images, size_t count, const char* call) {
  std::vector<vit::ImageInput> out;
  std::string bad;
  for (size_t i = 0; i < count && bad.empty(); ++i) {
    const vitcpp_image& im = images[i];
    const std::string which = "image " + std::to_string(i);
    switch (im.kind) {
      case VITCPP_IMAGE_FILE:
        if (!im.path)
          bad = which + ": VITCPP_IMAGE_FILE with a NULL path";
        else
          out.push_back(vit::ImageInput::file(im.path));
        break;
      case VITCPP_IMAGE_ENCODED:
        if (!im.data || im.size == 0)
          bad = which + ": VITCPP_IMAGE_ENCODED without data";
        else
          out.push_back(vit::ImageInput::encoded(im.data, im.size));
        break;
      // PIXELS does not read size (API 3's programs leave anything there); PIXELS_SIZED
      // takes it as the buffer's length, and refuses one smaller than the pixels.
      case VITCPP_IMAGE_PIXELS:
      case VITCPP_IMAGE_PIXELS_SIZED:
        if (!im.data)
          bad = which + ": " + pixels_kind(im.kind) + " without data";
        else if (im.kind == VITCPP_IMAGE_PIXELS_SIZED && im.width > 0 && im.height > 0 && im.channels > 0 &&
                 (uint64_t(im.width) > im.size || uint64_t(im.height) > im.size ||
                  uint64_t(im.width) * uint64_t(im.height) > im.size / uint64_t(im.channels)))
          bad = which + ": VITCPP_IMAGE_PIXELS_SIZED of " + std::to_string(im.width) + " x " +
                std::to_string(im.height) + " x " + std::to_string(im.channels) + " bytes, but size is " +
                std::to_string(im.size);
        else
          out.push_back(vit::ImageInput::pixels(static_cast<const uint8_t*>(im.data), im.width, im.height,
                                                im.channels));
        break;
      default: bad = which + ": unknown kind " + std::to_string(im.kind);
    }
  }
  if (!bad.empty()) throw InvalidArgument(std::string(call) + ": " + bad);
  return out;
}

// f, whose vit::ValueError (the Classifier's check of the mask's length and bytes) is an
// argument of fn's that is wrong.
template <class F>
void with_mask(const char* fn, F&& f) {
  try {
    f();
  } catch (const vit::ValueError& e) {
    throw InvalidArgument(std::string(fn) + ": " + e.what());
  }
}
}  // namespace

extern "C" {

const char* vitcpp_version(void) {
  return vit::version();
}

const char* vitcpp_last_error(void) {
  return last_error.c_str();
}

void vitcpp_options_init(vitcpp_options* o) {
  if (!o) return;
  *o = vitcpp_options{};
  o->struct_size = sizeof(vitcpp_options);
}

uint32_t vitcpp_api_version(void) {
  return VITCPP_API_VERSION;
}

vitcpp_status vitcpp_open_with_options(const char* checkpoint, const vitcpp_options* options,
                                       vitcpp_model** out) {
  return guarded([&] {
    if (!checkpoint || !out) throw InvalidArgument("vitcpp_open: checkpoint and out must not be NULL");
    *out = nullptr;
    // The fields the caller's struct_size covers; the defaults for the rest (an older caller).
    vitcpp_options o;
    vitcpp_options_init(&o);
    if (options) {
      // The struct as API version 2 first defined it; later versions add fields after it.
      const size_t first = offsetof(vitcpp_options, max_batch) + sizeof(int64_t);
      if (options->struct_size < first || options->struct_size > sizeof(vitcpp_options))
        throw InvalidArgument("vitcpp_open: options->struct_size is " + std::to_string(options->struct_size) +
                              "; this vitcpp (API " + std::to_string(VITCPP_API_VERSION) + ") takes " +
                              std::to_string(first) + " to " + std::to_string(sizeof(vitcpp_options)) +
                              " (fill it with vitcpp_options_init)");
      std::memcpy(&o, options, options->struct_size);
    }
    vit::ClassifierOptions co;
    if (o.dtype) co.dtype = o.dtype;
    if (!co.dtype.empty() && co.dtype != "fp32" && co.dtype != "bf16" && co.dtype != "int8")
      throw InvalidArgument("vitcpp_open: dtype must be fp32, bf16 or int8, got '" + co.dtype + "'");
    if (o.labels_file) co.labels_file = o.labels_file;
    if (o.threads < 0 || o.threads > VITCPP_MAX_THREADS)
      throw InvalidArgument("vitcpp_open: threads must be 0 to " + std::to_string(VITCPP_MAX_THREADS) +
                            ", got " + std::to_string(o.threads));
    if (o.max_batch < 0) throw InvalidArgument("vitcpp_open: max_batch must be >= 0");
    co.threads = o.threads;
    if (o.max_batch > 0) co.max_batch = o.max_batch;
    *out = new vitcpp_model{vit::Classifier(checkpoint, co)};
  });
}

vitcpp_status vitcpp_open_with_labels(const char* checkpoint, const char* dtype, const char* labels_file,
                                      vitcpp_model** out) {
  vitcpp_options o;
  vitcpp_options_init(&o);
  o.dtype = dtype;
  o.labels_file = labels_file;
  return vitcpp_open_with_options(checkpoint, &o, out);
}

vitcpp_status vitcpp_open(const char* checkpoint, const char* dtype, vitcpp_model** out) {
  return vitcpp_open_with_labels(checkpoint, dtype, nullptr, out);
}

void vitcpp_close(vitcpp_model* model) {
  delete model;
}

vitcpp_status vitcpp_replica(const vitcpp_model* model, int32_t threads, vitcpp_model** out) {
  return guarded([&] {
    if (!model || !out) throw InvalidArgument("vitcpp_replica: model and out must not be NULL");
    *out = nullptr;
    if (threads < 0 || threads > VITCPP_MAX_THREADS)
      throw InvalidArgument("vitcpp_replica: threads must be 0 to " + std::to_string(VITCPP_MAX_THREADS) +
                            ", got " + std::to_string(threads));
    *out = new vitcpp_model{model->classifier.replica(threads)};
  });
}

void vitcpp_set_threads(int n) {
  vit::Classifier::set_threads(n < VITCPP_MAX_THREADS ? n : VITCPP_MAX_THREADS);  // it cannot fail
}

int64_t vitcpp_num_classes(const vitcpp_model* m) {
  return m ? m->classifier.num_classes() : 0;
}
int64_t vitcpp_embed_dim(const vitcpp_model* m) {
  return m ? m->classifier.embed_dim() : 0;
}
int64_t vitcpp_num_tokens(const vitcpp_model* m) {
  return m ? m->classifier.num_tokens() : 0;
}

void vitcpp_input_size(const vitcpp_model* m, int64_t* channels, int64_t* height, int64_t* width) {
  if (channels) *channels = m ? m->classifier.channels() : 0;
  if (height) *height = m ? m->classifier.height() : 0;
  if (width) *width = m ? m->classifier.width() : 0;
}

const char* vitcpp_class_name(const vitcpp_model* m, int64_t index) {
  if (!m) return nullptr;
  const auto& names = m->classifier.class_names();
  return index >= 0 && index < int64_t(names.size()) ? names[size_t(index)].c_str() : nullptr;
}

vitcpp_status vitcpp_classify(vitcpp_model* m, const vitcpp_image* images, size_t count, int64_t k,
                              vitcpp_prediction* out) {
  return guarded([&] {
    if (!m || !images || !out || count == 0 || k <= 0)
      throw InvalidArgument("vitcpp_classify: needs a model, images, out, count > 0 and k > 0");
    const auto in = inputs(images, count, "vitcpp_classify");
    const auto top = m->classifier.classify(in, k);
    for (size_t i = 0; i < count; ++i)
      for (int64_t j = 0; j < k; ++j) {
        vitcpp_prediction& p = out[i * size_t(k) + size_t(j)];
        if (j < int64_t(top[i].size())) {
          const vit::Prediction& t = top[i][size_t(j)];
          p = {t.index, t.probability, vitcpp_class_name(m, t.index)};
        } else {
          p = {-1, 0.0, nullptr};
        }
      }
  });
}

vitcpp_status vitcpp_logits(vitcpp_model* m, const vitcpp_image* images, size_t count, float* out) {
  return guarded([&] {
    if (!m || !images || !out || count == 0)
      throw InvalidArgument("vitcpp_logits: needs a model, images, out and count > 0");
    const auto in = inputs(images, count, "vitcpp_logits");
    const std::vector<float> z = m->classifier.logits(in);
    std::copy(z.begin(), z.end(), out);
  });
}

vitcpp_status vitcpp_embed(vitcpp_model* m, const vitcpp_image* images, size_t count, float* pooled,
                           float* tokens) {
  return guarded([&] {
    if (!m || !images || count == 0 || (!pooled && !tokens))
      throw InvalidArgument("vitcpp_embed: needs a model, images, count > 0 and pooled or tokens");
    m->classifier.features(inputs(images, count, "vitcpp_embed"), pooled, tokens);
  });
}

vitcpp_status vitcpp_preprocess(const vitcpp_model* m, const vitcpp_image* image, float* out) {
  return guarded([&] {
    if (!m || !image || !out) throw InvalidArgument("vitcpp_preprocess: NULL argument");
    m->classifier.preprocess(inputs(image, 1, "vitcpp_preprocess").front(), out);
  });
}

vitcpp_status vitcpp_logits_tensor(vitcpp_model* m, const float* x, size_t count, float* out) {
  return guarded([&] {
    if (!m || !x || !out || count == 0)
      throw InvalidArgument("vitcpp_logits_tensor: needs a model, x, out and count > 0");
    m->classifier.logits(x, int64_t(count), out);
  });
}

vitcpp_status vitcpp_embed_tensor(vitcpp_model* m, const float* x, size_t count, float* pooled,
                                  float* tokens) {
  return guarded([&] {
    if (!m || !x || count == 0 || (!pooled && !tokens))
      throw InvalidArgument("vitcpp_embed_tensor: needs a model, x, count > 0 and pooled or tokens");
    m->classifier.features(x, int64_t(count), pooled, tokens);
  });
}

int64_t vitcpp_num_patches(const vitcpp_model* m) {
  return m ? m->classifier.num_patches() : 0;
}

vitcpp_status vitcpp_logits_tensor_masked(vitcpp_model* m, const float* x, size_t count, const uint8_t* mask,
                                          size_t mask_size, float* out) {
  return guarded([&] {
    if (!m || !x || !out || count == 0)
      throw InvalidArgument("vitcpp_logits_tensor_masked: needs a model, x, out and count > 0");
    with_mask("vitcpp_logits_tensor_masked",
              [&] { m->classifier.logits(x, int64_t(count), mask, mask_size, out); });
  });
}

vitcpp_status vitcpp_embed_tensor_masked(vitcpp_model* m, const float* x, size_t count, const uint8_t* mask,
                                         size_t mask_size, float* pooled, float* tokens) {
  return guarded([&] {
    if (!m || !x || count == 0 || (!pooled && !tokens))
      throw InvalidArgument("vitcpp_embed_tensor_masked: needs a model, x, count > 0 and pooled or tokens");
    with_mask("vitcpp_embed_tensor_masked",
              [&] { m->classifier.features(x, int64_t(count), mask, mask_size, pooled, tokens); });
  });
}

}  // extern "C"
