/* vitcpp's C API: the C++ API of <vit/classifier.h> behind an opaque handle, for C and for
 * other languages' foreign-function interfaces (Python ctypes, Rust, Go). Every function
 * returns a status; no exception crosses it. After a failure, vitcpp_last_error() gives a
 * one-line message naming the file or argument; it is kept per thread, until that thread's
 * next failing call. docs/embedding.md has a complete example (examples/classify_c).
 *
 *   vitcpp_model* m;
 *   if (vitcpp_open("vit_tiny/", NULL, &m) != VITCPP_OK) { puts(vitcpp_last_error()); ... }
 *   vitcpp_image img = {VITCPP_IMAGE_FILE, "cat.jpg", NULL, 0, 0, 0, 0};
 *   vitcpp_prediction top[5];
 *   vitcpp_classify(m, &img, 1, 5, top);
 *   vitcpp_close(m);
 *
 * A model runs one call at a time: share it between threads behind a lock, or give each
 * thread a replica (vitcpp_replica: the weights in memory once). The getters
 * (vitcpp_num_classes ... vitcpp_class_name) and vitcpp_replica only read what never
 * changes: they may run while another thread's call runs on the model. A closed model is
 * gone, as freed memory: using or closing it again is undefined. */
#ifndef VITCPP_H
#define VITCPP_H

#include <stddef.h>
#include <stdint.h>

#include "vit/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vitcpp_status {
  VITCPP_OK = 0,
  VITCPP_INVALID_ARGUMENT = 1, /* a null pointer, a bad count, k, dtype or image kind */
  VITCPP_ERROR = 2,            /* what vit::Error reports: a bad file, image or checkpoint */
  VITCPP_OUT_OF_MEMORY = 3,
  VITCPP_INTERNAL_ERROR = 4 /* anything else (a bug: please report the message) */
} vitcpp_status;

typedef struct vitcpp_model vitcpp_model; /* opaque */

typedef enum vitcpp_image_kind {
  VITCPP_IMAGE_FILE = 0,        /* path: a PNG or JPEG file */
  VITCPP_IMAGE_ENCODED = 1,     /* data, size: PNG or JPEG bytes in memory */
  VITCPP_IMAGE_PIXELS = 2,      /* data, width, height, channels: 8-bit pixels interleaved
                                   [height][width][channels], channels 1 (gray), 3 (RGB) or 4 (RGBA);
                                   size is not read */
  VITCPP_IMAGE_PIXELS_SIZED = 3 /* API 4: as VITCPP_IMAGE_PIXELS, and size is the buffer's length
                                   in bytes: one smaller than the pixels is refused */
} vitcpp_image_kind;

/* An image for the model. Nothing is copied: the memory must stay valid during the call. */
typedef struct vitcpp_image {
  int kind; /* vitcpp_image_kind */
  const char* path;
  const void* data;
  size_t size;
  int64_t width, height, channels;
} vitcpp_image;

/* One class of a top-k list: its index, softmax probability and name (NULL when the
 * checkpoint has none; owned by the model, valid until vitcpp_close). */
typedef struct vitcpp_prediction {
  int64_t index;
  double probability;
  const char* label;
} vitcpp_prediction;

/* How the API grows without breaking callers compiled against an older vitcpp.h: a struct
 * the caller fills (vitcpp_options) starts with its size as the caller compiled it, and new
 * fields are only ever added at its end; the library reads the fields that size covers and
 * takes the defaults for the rest. Functions are only added, never changed.
 * VITCPP_API_VERSION counts the additions; vitcpp_api_version() says the library's. */
#define VITCPP_API_VERSION 5

/* How vitcpp_open_with_options opens a model. Fill it with vitcpp_options_init, which sets
 * struct_size and the defaults, then change what you need. */
typedef struct vitcpp_options {
  uint32_t struct_size; /* sizeof(vitcpp_options) where the caller was compiled */
  const char*
      dtype; /* "fp32", "bf16" (AVX-512 bf16 CPUs) or "int8"; NULL: fp32, or int8 for a vit quantize file */
  const char* labels_file; /* NULL, or class names one per line */
  int32_t threads;         /* > 0: this model's calls run on this many threads (the calling
                              thread's OpenMP setting, restored after each call; at most
                              VITCPP_MAX_THREADS); 0: the process's (vitcpp_set_threads) */
  int64_t max_batch;       /* images per forward pass; 0: 32. Larger batches are cut to it */
} vitcpp_options;

VIT_API void vitcpp_options_init(vitcpp_options* options);
VIT_API uint32_t vitcpp_api_version(void);

VIT_API const char* vitcpp_version(void);
/* The message of this thread's last failed call ("" when none failed). The pointer is valid
 * until this thread's next failing call, which replaces the text: take it after the call
 * returns, and copy it to keep it (printf("%d %s", vitcpp_classify(...), vitcpp_last_error())
 * may read it before the call replaced it). */
VIT_API const char* vitcpp_last_error(void);

/* Opens a checkpoint: a vitcpp, timm, Hugging Face or vit-pytorch .safetensors file, a directory with
 * model.safetensors (+ config.json), or a vit train run directory. dtype: "fp32", "bf16"
 * (AVX-512 bf16 CPUs) or "int8"; NULL: fp32, or int8 for a vit quantize file. labels_file: NULL, or class
 * names one per line. */
/* On failure *out is set to NULL (a handle it held is not closed: do not pass a live one). */
VIT_API vitcpp_status vitcpp_open(const char* checkpoint, const char* dtype, vitcpp_model** out);
VIT_API vitcpp_status vitcpp_open_with_labels(const char* checkpoint, const char* dtype,
                                              const char* labels_file, vitcpp_model** out);
/* The same with options (NULL: the defaults). An options struct larger than this library
 * knows (a caller built against a newer vitcpp.h) is refused with VITCPP_INVALID_ARGUMENT. */
VIT_API vitcpp_status vitcpp_open_with_options(const char* checkpoint, const vitcpp_options* options,
                                               vitcpp_model** out);
VIT_API void vitcpp_close(vitcpp_model* model); /* NULL is allowed */
/* A replica of model (API version 3): the same weights, shared and not copied, with buffers of
 * its own, for calls at the same time as model's on another thread. Its calls run on threads
 * threads (0: the process's); dtype, max_batch and class names are model's. Close each
 * replica with vitcpp_close; the weights stay in memory until model and its replicas are all
 * closed, in any order. */
VIT_API vitcpp_status vitcpp_replica(const vitcpp_model* model, int32_t threads, vitcpp_model** out);

/* The most threads a model's calls may run on (vit::kMaxThreads). */
#define VITCPP_MAX_THREADS 4096

/* Threads of every later call of every model without a count of its own (options->threads 0),
 * from any thread of the process; above VITCPP_MAX_THREADS, that many. n <= 0: none, and calls
 * run on the calling thread's OpenMP setting again (by default all cores, or
 * OMP_NUM_THREADS). The calling thread's OpenMP setting is left alone. */
VIT_API void vitcpp_set_threads(int n);

VIT_API int64_t vitcpp_num_classes(const vitcpp_model* model);
VIT_API int64_t vitcpp_embed_dim(const vitcpp_model* model);
VIT_API int64_t vitcpp_num_tokens(const vitcpp_model* model);
/* The preprocessed input: channels, height, width (any pointer may be NULL). */
VIT_API void vitcpp_input_size(const vitcpp_model* model, int64_t* channels, int64_t* height, int64_t* width);
/* Class index's name, or NULL when the checkpoint has none (or the index is out of range). */
VIT_API const char* vitcpp_class_name(const vitcpp_model* model, int64_t index);

/* The top k classes of each of count images, best first: out[count * k], image i's at
 * out + i * k. With k > num_classes, the entries past num_classes get index -1. */
VIT_API vitcpp_status vitcpp_classify(vitcpp_model* model, const vitcpp_image* images, size_t count,
                                      int64_t k, vitcpp_prediction* out);
/* Logits: out[count * num_classes]. */
VIT_API vitcpp_status vitcpp_logits(vitcpp_model* model, const vitcpp_image* images, size_t count,
                                    float* out);
/* Embeddings of count images (vit::Classifier::features): pooled[count * embed_dim] (the
 * pre-logits vector) and tokens[count * num_tokens * embed_dim] (every token after the final
 * norm); either may be NULL, not both. A model without a head (num_classes 0) has only these. */
VIT_API vitcpp_status vitcpp_embed(vitcpp_model* model, const vitcpp_image* images, size_t count,
                                   float* pooled, float* tokens);
/* The model's input for one image: out[channels * height * width] (vitcpp_input_size). */
VIT_API vitcpp_status vitcpp_preprocess(const vitcpp_model* model, const vitcpp_image* image, float* out);
/* Logits and embeddings of count inputs already preprocessed (API version 4): x[count *
 * channels * height * width], as vitcpp_preprocess writes them (or your own preprocessing;
 * `vit predict --tensor`). out, pooled and tokens as vitcpp_logits and vitcpp_embed. */
VIT_API vitcpp_status vitcpp_logits_tensor(vitcpp_model* model, const float* x, size_t count, float* out);
VIT_API vitcpp_status vitcpp_embed_tensor(vitcpp_model* model, const float* x, size_t count, float* pooled,
                                          float* tokens);
/* API version 5: patch masks. The patches per image (the grid), what a mask covers. */
VIT_API int64_t vitcpp_num_patches(const vitcpp_model* model);
/* vitcpp_logits_tensor and vitcpp_embed_tensor with a patch mask: mask[count * num_patches] of
 * 1 (the attention sees the patch) and 0 (hidden from every token; the class and register
 * tokens are always seen); mask_size is its length in bytes, and another length, or a byte
 * other than 0 and 1, is VITCPP_INVALID_ARGUMENT. Avg and attention pooling read the seen
 * patches alone (timm pools every patch after a masked forward_features: pool the tokens
 * yourself to match it; class-token pooling agrees). mask NULL: as without one. */
VIT_API vitcpp_status vitcpp_logits_tensor_masked(vitcpp_model* model, const float* x, size_t count,
                                                  const uint8_t* mask, size_t mask_size, float* out);
VIT_API vitcpp_status vitcpp_embed_tensor_masked(vitcpp_model* model, const float* x, size_t count,
                                                 const uint8_t* mask, size_t mask_size, float* pooled,
                                                 float* tokens);

#ifdef __cplusplus
}
#endif

#endif /* VITCPP_H */
