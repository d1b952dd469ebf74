// vit::Classifier: load_pretrained, the model's eval transform and ViT::infer, set up as
// `vit predict` sets them up (apps/vit/cmd_predict.cpp), so both give the same numbers.
#include "vit/classifier.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/threads.h"
#include "data/open.h"
#include "data/preprocess.h"
#include "io/pretrained.h"

namespace vit {

std::vector<Prediction> top_k(const float* logits, int64_t K, int64_t k,
                              const std::vector<std::string>& class_names) {
  VIT_CHECK(K > 0 && k > 0, "top_k: needs K > 0 classes and k > 0, got K = ", K, ", k = ", k);
  const double mx = *std::max_element(logits, logits + K);
  double sum = 0;
  for (int64_t i = 0; i < K; ++i) sum += std::exp(logits[i] - mx);
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i) order[size_t(i)] = i;
  const int64_t top = std::min(k, K);
  // Equal scores in class order, as the argmax and vit eval take them, whatever k (an
  // unstable sort put another of them first for each k); NaN first, as torch's topk.
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int64_t a, int64_t b) {
    const bool na = std::isnan(logits[a]), nb = std::isnan(logits[b]);
    if (na != nb) return na;
    if (!na && logits[a] != logits[b]) return logits[a] > logits[b];
    return a < b;
  });
  std::vector<Prediction> out(static_cast<size_t>(top));
  for (int64_t i = 0; i < top; ++i) {
    const int64_t c = order[size_t(i)];
    out[size_t(i)] = {c, std::exp(logits[c] - mx) / sum,
                      c < int64_t(class_names.size()) ? class_names[size_t(c)] : std::string()};
  }
  return out;
}

namespace {
void check_threads(int n) {
  VIT_CHECK(n >= 0 && n <= kMaxThreads, "threads must be 0 (the process's) to ", kMaxThreads, ", got ", n);
}
}  // namespace

struct Classifier::Impl {
  std::shared_ptr<const Pretrained> loaded;  // shared with the replicas
  std::unique_ptr<ViT> replica;              // a replica's model: loaded's, with its own activations
  InputSpec in;
  int64_t max_batch = 32;
  int threads = 0;       // ClassifierOptions::threads
  std::vector<float> x;  // one forward pass's inputs, [max_batch, C, H, W]

  // The threads of this model's calls: its own count, else the process's (set_threads), else
  // the calling thread's OpenMP setting.
  int call_threads() const { return threads > 0 ? threads : process_threads(); }

  ViT& model() { return replica ? *replica : *loaded->model; }
  const ViTConfig& cfg() const { return loaded->model->config(); }
  int64_t image_floats() const { return cfg().in_chans * cfg().img_h * cfg().img_w; }

  // Runs the images in batches of max_batch; per batch, out(first, B) reads x.
  template <typename F>
  void for_batches(const std::vector<ImageInput>& images, F&& out) {
    const int64_t N = int64_t(images.size()), n = image_floats();
    VIT_CHECK(N > 0, "no images given");
    run_openmp(call_threads(), [&] {  // also in a process forked from one that ran it (core/threads.h)
      for (int64_t first = 0; first < N; first += max_batch) {
        const int64_t B = std::min(max_batch, N - first);
        x.resize(size_t(B * n));
        for_items_on_threads(B, [&](int64_t b) { preprocess(images[size_t(first + b)], x.data() + b * n); });
        out(first, B);
      }
    });
  }

  void preprocess(const ImageInput& image, float* out) const {
    const auto* bytes = static_cast<const uint8_t*>(image.data);
    switch (image.kind) {
      case ImageInput::Kind::file: load_image_input(image.path, in, out); return;
      case ImageInput::Kind::encoded: preprocess_encoded(bytes, image.size, in, out); return;
      case ImageInput::Kind::pixels:
        preprocess_pixels(bytes, image.height, image.width, image.channels, in, out);
        return;
    }
    throw Error("unknown image kind");
  }
};

Classifier::Classifier(const std::string& checkpoint, const ClassifierOptions& options)
    : impl_(std::make_unique<Impl>()) {
  VIT_CHECK(
      options.dtype.empty() || options.dtype == "fp32" || options.dtype == "bf16" || options.dtype == "int8",
      "dtype must be fp32, bf16 or int8, got '", options.dtype, "'");
  VIT_CHECK(options.max_batch > 0, "max_batch must be positive, got ", options.max_batch);
  check_threads(options.threads);
  impl().threads = options.threads;
  impl().max_batch = options.max_batch;
  run_openmp(impl().call_threads(), [&] {  // the loading's parallel loops too
    LoadOptions lo;
    lo.labels_file = options.labels_file;
    // As `vit predict --dtype D -b max_batch` (InputFlags::load_for_inference): the precision
    // (by default the file's), block by block as the weights are read, then the packed fp32
    // weights where they are faster for such batches.
    lo.infer_dtype = options.dtype.empty() ? "stored" : options.dtype;
    auto loaded = std::make_shared<Pretrained>(load_pretrained(checkpoint, lo));
    ViT& m = *loaded->model;
    m.pack_weights_if_faster(options.max_batch);
    impl().in = input_spec(m.config());
    impl().in.validate();
    impl().loaded = std::move(loaded);
  });
}

Classifier::Classifier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Classifier Classifier::replica(int threads) const {
  check_threads(threads);
  const Impl& from = impl();
  auto r = std::make_unique<Impl>();
  r->loaded = from.loaded;
  r->replica = from.loaded->model->replica();
  r->in = from.in;
  r->max_batch = from.max_batch;
  r->threads = threads;
  return Classifier(std::move(r));
}

Classifier::~Classifier() = default;
Classifier::Classifier(Classifier&&) noexcept = default;
Classifier& Classifier::operator=(Classifier&&) noexcept = default;

int64_t Classifier::num_classes() const {
  return impl().cfg().num_classes;
}
int64_t Classifier::embed_dim() const {
  return impl().cfg().embed_dim;
}
int64_t Classifier::num_tokens() const {
  return impl().cfg().num_tokens();
}
int64_t Classifier::num_patches() const {
  return impl().cfg().num_patches();
}
int64_t Classifier::channels() const {
  return impl().cfg().in_chans;
}
int64_t Classifier::height() const {
  return impl().cfg().img_h;
}
int64_t Classifier::width() const {
  return impl().cfg().img_w;
}
const std::vector<std::string>& Classifier::class_names() const {
  return impl().loaded->class_names;
}
const std::string& Classifier::format() const {
  return impl().loaded->format;
}
const std::string& Classifier::dtype() const {
  return impl().loaded->model->infer_dtype();
}
const std::vector<std::string>& Classifier::notes() const {
  return impl().loaded->notes;
}

void Classifier::set_threads(int n) {
  set_process_threads(n);
}

Classifier::Impl& Classifier::impl() const {
  VIT_CHECK(impl_, "vit::Classifier: used after it was moved from");
  return *impl_;
}

void Classifier::preprocess(const ImageInput& image, float* out) const {
  impl().preprocess(image, out);
}

std::vector<float> Classifier::logits(const std::vector<ImageInput>& images) {
  const int64_t K = num_classes();
  VIT_CHECK(K > 0, "the model has no classifier head (num_classes 0): it gives embeddings (embed) only");
  std::vector<float> out(images.size() * size_t(K));
  impl().for_batches(images, [&](int64_t first, int64_t B) {
    impl().model().infer(impl().x.data(), B, nullptr, out.data() + first * K);
  });
  return out;
}

namespace {
// A patch mask of n images: n * N bytes of 0 or 1.
void check_mask(const uint8_t* mask, size_t size, int64_t n, int64_t N) {
  if (!mask) return;
  VIT_VALUE_CHECK(size == size_t(n * N), "mask: ", n, " images of ", N, " patches need ", n * N,
                  " bytes, got ", size);
  for (size_t i = 0; i < size; ++i)
    VIT_VALUE_CHECK(mask[i] <= 1, "mask: byte ", i, " is ", int(mask[i]), ": 0 (hidden) or 1 (seen)");
}
}  // namespace

void Classifier::logits(const float* x, int64_t n, float* out) {
  logits(x, n, nullptr, 0, out);
}

void Classifier::logits(const float* x, int64_t n, const uint8_t* mask, size_t mask_size, float* out) {
  const int64_t K = num_classes(), per = impl().image_floats(), N = num_patches();
  VIT_CHECK(K > 0, "the model has no classifier head (num_classes 0): it gives embeddings (embed) only");
  VIT_CHECK(n > 0, "no images given");
  VIT_CHECK(x && out, "logits: ", x ? "out" : "x", " is null");
  check_mask(mask, mask_size, n, N);
  run_openmp(impl().call_threads(), [&] {
    for (int64_t first = 0; first < n; first += impl().max_batch) {
      const int64_t B = std::min(impl().max_batch, n - first);
      impl().model().infer(x + first * per, B, mask ? mask + first * N : nullptr, out + first * K);
    }
  });
}

std::vector<float> Classifier::logits(const ImageInput& image) {
  return logits(std::vector<ImageInput>{image});
}

void Classifier::features(const std::vector<ImageInput>& images, float* pooled, float* tokens) {
  const int64_t D = embed_dim(), T = num_tokens();
  impl().for_batches(images, [&](int64_t first, int64_t B) {
    impl().model().infer_features(impl().x.data(), B, nullptr, pooled ? pooled + first * D : nullptr,
                                  tokens ? tokens + first * T * D : nullptr);
  });
}

void Classifier::features(const float* x, int64_t n, float* pooled, float* tokens) {
  features(x, n, nullptr, 0, pooled, tokens);
}

void Classifier::features(const float* x, int64_t n, const uint8_t* mask, size_t mask_size, float* pooled,
                          float* tokens) {
  const int64_t D = embed_dim(), T = num_tokens(), per = impl().image_floats(), N = num_patches();
  VIT_CHECK(n > 0, "no images given");
  VIT_CHECK(x && (pooled || tokens), "features: ", x ? "pooled and tokens are both null" : "x is null");
  check_mask(mask, mask_size, n, N);
  run_openmp(impl().call_threads(), [&] {
    for (int64_t first = 0; first < n; first += impl().max_batch) {
      const int64_t B = std::min(impl().max_batch, n - first);
      impl().model().infer_features(x + first * per, B, mask ? mask + first * N : nullptr,
                                    pooled ? pooled + first * D : nullptr,
                                    tokens ? tokens + first * T * D : nullptr);
    }
  });
}

std::vector<float> Classifier::embed(const std::vector<ImageInput>& images) {
  std::vector<float> out(images.size() * size_t(embed_dim()));
  features(images, out.data(), nullptr);
  return out;
}

std::vector<float> Classifier::embed(const ImageInput& image) {
  return embed(std::vector<ImageInput>{image});
}

std::vector<float> Classifier::token_features(const std::vector<ImageInput>& images) {
  std::vector<float> out(images.size() * size_t(num_tokens() * embed_dim()));
  features(images, nullptr, out.data());
  return out;
}

std::vector<float> Classifier::token_features(const ImageInput& image) {
  return token_features(std::vector<ImageInput>{image});
}

std::vector<std::vector<Prediction>> Classifier::classify(const std::vector<ImageInput>& images, int64_t k) {
  VIT_CHECK(k > 0, "k must be positive, got ", k);
  const std::vector<float> z = logits(images);
  const int64_t K = num_classes();
  std::vector<std::vector<Prediction>> out;
  for (size_t i = 0; i < images.size(); ++i) out.push_back(top_k(z.data() + i * K, K, k, class_names()));
  return out;
}

std::vector<Prediction> Classifier::classify(const ImageInput& image, int64_t k) {
  return classify(std::vector<ImageInput>{image}, k).front();
}

}  // namespace vit
