// How a data-parallel run splits each global batch between processes: rank r of n takes
// the contiguous rows [bs*r/n, bs*(r+1)/n) of a batch of bs (sizes differ by at most one;
// a rank may get none of a tiny last batch). Every rank derives the same global order from
// the seed and reads only its rows, plus, with mixup or CutMix, the rows they are mixed
// with (row b is mixed with row bs-1-b, see mixup.h).
#pragma once
#include <cstdint>
#include <vector>

namespace vit {

struct Rows {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
};

inline Rows shard_rows(int64_t bs, int rank, int ranks) {
  return {bs * rank / ranks, bs * (rank + 1) / ranks};
}

// The samples one rank loads in an epoch, as a Prefetcher takes them: batch s is
// order[ends[s-1] .. ends[s]), the rank's rows of global batch s followed, when
// `partners`, by their mixing partners (the same count).
struct ShardPlan {
  std::vector<int64_t> order, ends;
};
ShardPlan shard_epoch(const std::vector<int64_t>& order, int64_t batch, int rank, int ranks, bool partners);

}  // namespace vit
