// The pictures vitcpp draws, each written as one PNG (crash-safe: temporary name, rename):
//   attention_figure       original | heatmap | overlay of one image, with a caption;
//   attention_grid_figure  overlays for rows x columns (layers x heads), labelled;
//   curves_figure          a run's loss, top-1 and learning rate per epoch (summary.csv);
//   confusion_figure       a confusion matrix as a labelled heatmap;
//   pos_embed_figure       cosine similarity of each patch's position embedding with every
//                          other, as a grid of small maps (ViT paper, Figure 7).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace vit::viz {

// The image as the model sees it (8-bit, gray or RGB, at the input size) and an attention
// map over the patch grid [gh * gw]; the map is upsampled bilinearly and min-max normalized.
// covered_h, covered_w: the view's top-left pixels the grid covers (0: all of them; fewer
// for an input size past a multiple of the patch, whose last pixels the model does not read).
void attention_figure(const Image& view, const std::vector<float>& map, int64_t gh, int64_t gw,
                      const std::string& caption, const std::string& path, int64_t covered_h = 0,
                      int64_t covered_w = 0);
// maps[r * cols + c], each [gh * gw]; row and column labels name them. The caption may
// have several lines ('\n'); the first is bold.
void attention_grid_figure(const Image& view, const std::vector<std::vector<float>>& maps, int64_t gh,
                           int64_t gw, const std::vector<std::string>& row_labels,
                           const std::vector<std::string>& col_labels, const std::string& caption,
                           const std::string& path, int64_t covered_h = 0, int64_t covered_w = 0);

// One row of a run's summary.csv per epoch (columns as the trainer writes them; accuracies in
// percent, as timm's).
struct RunHistory {
  std::vector<double> epoch, train_loss, train_top1, eval_loss, eval_top1, lr;
  std::vector<double> ema_eval_loss, ema_eval_top1;  // a run with --model-ema (empty otherwise)
};
// Throws vit::Error naming the file and line when a column is missing or a value is not a number.
RunHistory read_summary_csv(const std::string& path);
void curves_figure(const RunHistory& h, const std::string& title, const std::string& path);

// confusion [K, K]: row = true class, column = predicted. names: K labels or empty.
void confusion_figure(const std::vector<int64_t>& confusion, int64_t K, const std::vector<std::string>& names,
                      const std::string& title, const std::string& path);

// pos [gh * gw, D]: the patches' position embeddings in row-major grid order.
void pos_embed_figure(const float* pos, int64_t gh, int64_t gw, int64_t D, const std::string& title,
                      const std::string& path);
// The cosine similarities the figure draws: [N, N], N = gh * gw.
std::vector<float> pos_embed_similarity(const float* pos, int64_t N, int64_t D);

}  // namespace vit::viz
