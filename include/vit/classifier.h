// The application API (docs/embedding.md): open a model from a vitcpp, timm, Hugging Face or
// vit-pytorch checkpoint with its preprocessing and class names, then classify images given as
// files, as PNG/JPEG bytes in memory or as raw pixels: top-k classes, logits or embeddings. Images
// are preprocessed exactly as `vit predict` does (vit/data/preprocess.h), so the same image
// and checkpoint give the same probabilities; embed() gives the embeddings (pre-logits) as
// `vit predict --features` does. Errors are vit::Error exceptions with a
// one-line message that names the file or argument. The C API over it is <vitcpp.h>.
//
//   vit::Classifier model("vit_tiny/");          // a checkpoint file or directory
//   for (const vit::Prediction& p : model.classify(vit::ImageInput::file("cat.jpg"), 5))
//     std::printf("%lld %.4f %s\n", (long long)p.index, p.probability, p.label.c_str());
//
// A Classifier runs one call at a time (it owns the model's activation buffers): share one
// between threads behind a lock, or give each thread a replica() (the same weights in memory
// once, buffers of its own). Each call runs on the model's own thread count
// (ClassifierOptions::threads), else the process's (set_threads), else the calling thread's
// OpenMP setting.
//
// Needs C++17 or later (the C API, <vitcpp.h>, C99). Errors are vit::Error, except that
// running out of memory is std::bad_alloc. A moved-from Classifier may only be assigned to or
// destroyed; any other call throws vit::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vit/core/error.h"
#include "vit/core/version.h"
#include "vit/export.h"

namespace vit {

// One class of a top-k list: its index in the model's head, its softmax probability and its
// name (empty when the checkpoint has no class names).
struct Prediction {
  int64_t index = 0;
  double probability = 0;
  std::string label;
};

// The k most probable classes of logits[K], best first (softmax in double precision; the
// lower index first among equal logits is not promised). k is clamped to K.
VIT_API std::vector<Prediction> top_k(const float* logits, int64_t K, int64_t k,
                                      const std::vector<std::string>& class_names = {});

// An image for the model: a PNG/JPEG file, PNG/JPEG bytes in memory, or 8-bit pixels
// interleaved [height, width, channels] with channels 1 (gray), 3 (RGB) or 4 (RGBA, alpha
// dropped). Bytes and pixels are not copied: they must stay valid during the call.
struct ImageInput {
  enum class Kind { file, encoded, pixels };
  Kind kind = Kind::file;
  std::string path;                             // file
  const void* data = nullptr;                   // encoded: the bytes; pixels: the first pixel
  size_t size = 0;                              // encoded: how many bytes
  int64_t width = 0, height = 0, channels = 0;  // pixels

  static ImageInput file(std::string path) {
    ImageInput in;
    in.path = std::move(path);
    return in;
  }
  static ImageInput encoded(const void* bytes, size_t size) {
    ImageInput in;
    in.kind = Kind::encoded;
    in.data = bytes;
    in.size = size;
    return in;
  }
  static ImageInput pixels(const uint8_t* data, int64_t width, int64_t height, int64_t channels) {
    ImageInput in;
    in.kind = Kind::pixels;
    in.data = data;
    in.width = width;
    in.height = height;
    in.channels = channels;
    return in;
  }
};

struct ClassifierOptions {
  // Precision of the blocks' matrix products: "fp32", "bf16" (CPUs with AVX-512 bf16) or
  // "int8" (weights per output channel, inputs per row at run time); for bf16 and int8 the
  // fp32 copies of those weights are then released, as `vit predict --dtype bf16|int8`.
  // "" (the default): fp32, or int8 for a `vit quantize` checkpoint.
  std::string dtype;
  std::string labels_file;  // class names, one per line (default: the checkpoint's own)
  // > 0: this model's calls run on this many threads (the calling thread's OpenMP setting,
  // restored after each call; at most 4096); 0: on the process's (set_threads).
  int threads = 0;
  int64_t max_batch = 32;  // images per forward pass (`vit predict -b`); batches are cut to it
};

class VIT_API Classifier {
 public:
  // A checkpoint as `vit predict --checkpoint` takes it: a vitcpp, timm, Hugging Face or
  // vit-pytorch .safetensors file, a directory with model.safetensors (+ config.json), or a vit train run
  // directory (its best.safetensors).
  explicit Classifier(const std::string& checkpoint, const ClassifierOptions& options = {});
  ~Classifier();
  Classifier(Classifier&&) noexcept;
  Classifier& operator=(Classifier&&) noexcept;

  int64_t num_classes() const;
  int64_t embed_dim() const;    // the width of an embedding
  int64_t num_tokens() const;   // tokens per image (class/register tokens and patches)
  int64_t num_patches() const;  // patches per image (the grid), what a patch mask covers
  // The model's input: channels, height and width after preprocessing.
  int64_t channels() const;
  int64_t height() const;
  int64_t width() const;
  const std::vector<std::string>& class_names() const;  // empty when the checkpoint has none
  const std::string& format() const;                    // "vitcpp", "timm", "hf" or "vit-pytorch"
  const std::string& dtype() const;                     // the blocks' products: "fp32", "bf16" or "int8"
  const std::vector<std::string>& notes() const;        // what the loader adapted, for people

  // Another Classifier on this one's weights, shared and not copied, with activation
  // buffers of its own: for calls at the same time on other threads, as `vit serve
  // --instances` makes them. Its calls run on `threads` threads (0: the process's, as
  // ClassifierOptions::threads); dtype, max_batch and class names are this one's. The weights
  // stay in memory while this Classifier or any of its replicas lives.
  Classifier replica(int threads = 0) const;

  // Threads of every later call of every Classifier without a count of its own
  // (ClassifierOptions::threads 0), from any thread of the process. n <= 0: none, and calls
  // run on the calling thread's OpenMP setting again (by default all cores, or
  // OMP_NUM_THREADS). Throws vit::Error above 4096. The calling thread's OpenMP setting is left
  // alone.
  static void set_threads(int n);

  // The model's input for one image, out[channels() * height() * width()].
  void preprocess(const ImageInput& image, float* out) const;
  // The top k classes (k clamped to num_classes()), best first; for a batch, one list each.
  std::vector<Prediction> classify(const ImageInput& image, int64_t k = 5);
  std::vector<std::vector<Prediction>> classify(const std::vector<ImageInput>& images, int64_t k = 5);
  // Logits: [num_classes()] for one image, [images, num_classes()] for a batch. A model
  // without a head (num_classes() 0) has only embeddings.
  std::vector<float> logits(const ImageInput& image);
  std::vector<float> logits(const std::vector<ImageInput>& images);
  // Logits of n images already preprocessed, x[n, channels(), height(), width()] (as
  // preprocess() writes them; `vit predict --tensor`), into out[n, num_classes()].
  void logits(const float* x, int64_t n, float* out);
  // Embeddings (`vit predict --features`): the pooled pre-logits vector the head reads,
  // [embed_dim()] or [images, embed_dim()] (timm's forward_head(pre_logits=True)).
  std::vector<float> embed(const ImageInput& image);
  std::vector<float> embed(const std::vector<ImageInput>& images);
  // Every token's features after the final norm, [num_tokens(), embed_dim()] or [images,
  // num_tokens(), embed_dim()] (timm's forward_features; `vit predict --features tokens`).
  std::vector<float> token_features(const ImageInput& image);
  std::vector<float> token_features(const std::vector<ImageInput>& images);
  // Both at once into the caller's memory: pooled[images, embed_dim()] and tokens[images,
  // num_tokens(), embed_dim()]; either may be null. With tokens asked for, a class-token
  // model runs its last block on every token rather than the class token's row alone, so
  // the pooled vectors then differ from embed()'s by float rounding (at most 2.7e-7 on the
  // test fixture).
  void features(const std::vector<ImageInput>& images, float* pooled, float* tokens);
  // The same for n images already preprocessed, x[n, channels(), height(), width()] (as
  // logits(x, n, out) takes them).
  void features(const float* x, int64_t n, float* pooled, float* tokens);
  // The same two with a patch mask, mask[n, num_patches()] of 1 (the attention sees the
  // patch) and 0 (hidden from every token; the class and register tokens are always seen),
  // mask_size its length (checked). Avg and attention pooling read the seen patches alone
  // (timm's pool reads every patch after a masked forward_features: pool the tokens yourself
  // to match it; the class token's pooling agrees).
  void logits(const float* x, int64_t n, const uint8_t* mask, size_t mask_size, float* out);
  void features(const float* x, int64_t n, const uint8_t* mask, size_t mask_size, float* pooled,
                float* tokens);

 private:
  struct Impl;
  explicit Classifier(std::unique_ptr<Impl> impl);
  Impl& impl() const;  // throws vit::Error on a moved-from Classifier
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit
