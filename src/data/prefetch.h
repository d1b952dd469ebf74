// Batches prepared by a worker thread while the model computes: while step s runs on
// batch s, the worker fills the other buffer with batch s+1. Contents depend only on the
// order and the dataset, so prefetching changes no result. With workers > 1 (vit train -j,
// timm's --workers) the worker loads each batch in that many contiguous parts at once, for
// datasets whose decoding and augmentation outrun one thread: the same batches, the same
// error (the first failing sample's).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/dataset.h"

namespace vit {

class Prefetcher {
 public:
  // Serves batches of `batch` samples in `order` (the last one may be smaller), from batch
  // first_step on (a run resumed within an epoch).
  Prefetcher(const Dataset& data, std::vector<int64_t> order, int64_t batch, int64_t first_step = 0,
             int workers = 1);
  // Serves batch s = order[ends[s-1] .. ends[s]) (ends[-1] = 0): batches of any size, empty
  // ones included (a data-parallel process's shards of each global batch).
  Prefetcher(const Dataset& data, std::vector<int64_t> order, std::vector<int64_t> ends,
             int64_t first_step = 0, int workers = 1);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  // Blocks until batch s is ready; the buffers are the caller's (to read or modify, e.g.
  // for mixup) until next(s + 1) is called. Batches must be taken in order 0, 1, 2, ...
  // from `first_step` on (steps before it are not loaded). Returns the batch's size.
  int64_t next(int64_t s, float** images, const int64_t** labels);
  int64_t steps() const { return steps_; }

 private:
  void work();
  void load(int64_t begin, int64_t n, float* images, int64_t* labels) const;  // samples order[begin..+n)
  const Dataset& data_;
  std::vector<int64_t> order_;
  int64_t first(int64_t s) const { return s == 0 ? 0 : ends_[s - 1]; }
  std::vector<int64_t> ends_;
  int64_t steps_, sample_, first_step_;
  int workers_;
  std::vector<float> images_[2];
  std::vector<int64_t> labels_[2];
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t ready_;     // the highest batch index loaded (first_step - 1: none yet)
  int64_t consumed_;  // the batch the caller holds
  std::exception_ptr error_;
  int64_t error_step_ = INT64_MAX;  // the batch whose loading failed
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace vit
