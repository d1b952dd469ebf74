// Training curves, confusion matrices and position-embedding similarity.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/check.h"
#include "core/file.h"
#include "viz/canvas.h"
#include "viz/figures.h"
#include "viz/plot.h"

namespace vit::viz {

namespace {
const Rgb kInk{0.1, 0.1, 0.1};

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

double parse_number(const std::string& s, const std::string& path, int line, const std::string& col) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  VIT_CHECK(!s.empty() && end == s.c_str() + s.size(), path, ":", line, ": column ", col, ": '", s,
            "' is not a number");
  return v;
}

// Viridis for the background of a cell and the text color that stays readable on it.
Rgb text_on(double t) {
  return t > 0.6 ? Rgb{0, 0, 0} : Rgb{1, 1, 1};
}
}  // namespace

RunHistory read_summary_csv(const std::string& path) {
  check_not_directory(path);
  std::ifstream in(path);
  VIT_CHECK(in, path, ": cannot open (a run directory holds summary.csv after its first epoch)");
  std::string line;
  VIT_CHECK(std::getline(in, line), path, ": empty file");
  const std::vector<std::string> header = split_csv(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  RunHistory h;
  const std::pair<const char*, std::vector<double>*> want[] = {
      {"epoch", &h.epoch},         {"train_loss", &h.train_loss}, {"train_top1", &h.train_top1},
      {"eval_loss", &h.eval_loss}, {"eval_top1", &h.eval_top1},   {"lr", &h.lr}};
  for (auto& [name, v] : want) VIT_CHECK(col.count(name), path, ": no column '", name, "' in the header");
  // The model EMA's evaluation, where the run kept one (--model-ema): columns of their own.
  std::vector<std::pair<const char*, std::vector<double>*>> ema;
  for (auto [name, v] : {std::pair{"ema_eval_loss", &h.ema_eval_loss}, {"ema_eval_top1", &h.ema_eval_top1}})
    if (col.count(name)) ema.push_back({name, v});
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_csv(line);
    VIT_CHECK(cells.size() == header.size(), path, ":", n, ": ", cells.size(), " values, the header has ",
              header.size());
    for (auto& [name, v] : want) {
      const std::string& cell = cells[col[name]];
      // A run without evaluation data leaves the eval columns empty: no eval curves.
      if (cell.empty() && std::string_view(name).substr(0, 5) == "eval_") continue;
      v->push_back(parse_number(cell, path, n, name));
    }
    for (auto& [name, v] : ema)
      if (!cells[col[name]].empty()) v->push_back(parse_number(cells[col[name]], path, n, name));
  }
  VIT_CHECK(!h.epoch.empty(), path, ": no epochs yet");
  for (const auto* v : {&h.eval_loss, &h.eval_top1, &h.ema_eval_loss, &h.ema_eval_top1})
    VIT_CHECK(v->empty() || v->size() == h.epoch.size(), path, ": some epochs have eval figures, others not");
  return h;
}

void curves_figure(const RunHistory& h, const std::string& title, const std::string& path) {
  const double w = 400, ch = 330, top = 34;
  Canvas cv(int(3 * w), int(top + ch));
  cv.fit_text(title, 3 * w / 2, 24, 3 * w - 20, 16, Align::Center, true, kInk);
  // The eval curves where the run evaluated, and its model EMA's where it kept one (the mnist
  // recipes' best model is often the EMA's: they were left out).
  auto with_eval = [&](const std::vector<double>& train, const std::vector<double>& eval,
                       const std::vector<double>& ema) {
    std::vector<Series> s = {{"train", h.epoch, train, series_color(0)}};
    if (!eval.empty()) s.push_back({"eval", h.epoch, eval, series_color(1)});
    if (!ema.empty()) s.push_back({"eval (EMA)", h.epoch, ema, series_color(3)});
    return s;
  };
  line_chart(cv, 0, top, w, ch, {"loss", "epoch", "cross-entropy"},
             with_eval(h.train_loss, h.eval_loss, h.ema_eval_loss));
  line_chart(cv, w, top, w, ch, {"top-1 accuracy", "epoch", "%"},  // percent, as summary.csv has them
             with_eval(h.train_top1, h.eval_top1, h.ema_eval_top1));
  line_chart(cv, 2 * w, top, w, ch, {"learning rate", "epoch", "lr at the epoch's last step"},
             {{"lr", h.epoch, h.lr, series_color(2)}});
  cv.save_png(path);
}

void confusion_figure(const std::vector<int64_t>& confusion, int64_t K, const std::vector<std::string>& names,
                      const std::string& title, const std::string& path) {
  VIT_CHECK(K > 0 && int64_t(confusion.size()) == K * K, "confusion figure: want ", K, "x", K, " counts");
  auto label = [&](int64_t k) { return k < int64_t(names.size()) ? names[k] : std::to_string(k); };
  const double cell = std::clamp(480.0 / double(K), 5.0, 48.0);
  const bool counts = cell >= 30, ticks = cell >= 12;
  Canvas probe(1, 1);
  double lw = 0;
  for (int64_t k = 0; k < K && ticks; ++k) lw = std::max(lw, probe.text_width(label(k), 12));
  const double left = 40 + lw + 8, top = 56, bottom = 40 + lw * 0.75 + 12, bar = 70;
  const double side = cell * double(K);
  Canvas cv(int(std::max(left + side + bar + 20, 420.0)), int(top + side + bottom));
  cv.fit_text(title, cv.width() / 2.0, 26, cv.width() - 20, 15, Align::Center, true, kInk);
  cv.text("row-normalized: the share of each true class predicted as each class", cv.width() / 2.0, 44, 11,
          Align::Center, false, {0.35, 0.35, 0.35});
  for (int64_t t = 0; t < K; ++t) {
    int64_t row = 0;
    for (int64_t p = 0; p < K; ++p) row += confusion[t * K + p];
    for (int64_t p = 0; p < K; ++p) {
      const int64_t n = confusion[t * K + p];
      const double frac = row > 0 ? double(n) / double(row) : 0.0;
      const double x = left + p * cell, y = top + t * cell;
      cv.fill_rect(x, y, cell, cell, viridis(frac));
      if (counts && n > 0)
        cv.text(std::to_string(n), x + cell / 2, y + cell / 2 + 4, cell >= 44 ? 11 : 9, Align::Center, false,
                text_on(frac));
    }
  }
  cv.stroke_rect(left, top, side, side, kInk, 1);
  for (int64_t k = 0; k < K && ticks; ++k) {
    cv.text(label(k), left - 6, top + (k + 0.5) * cell + 4, 12, Align::Right, false, kInk);
    cv.text(label(k), left + (k + 0.5) * cell + 4, top + side + 8, 12, Align::Right, false, kInk, 45);
  }
  cv.text("true class", 18, top + side / 2, 13, Align::Center, true, kInk, 90);
  cv.text("predicted class", left + side / 2, cv.height() - 10, 13, Align::Center, true, kInk);
  // Color bar: 0 .. 1 of the row.
  const double bx = left + side + 20, bh = std::min(side, 240.0);
  for (int i = 0; i < int(bh); ++i) cv.fill_rect(bx, top + bh - i - 1, 14, 1, viridis(i / (bh - 1)));
  cv.stroke_rect(bx, top, 14, bh, kInk, 1);
  for (double v : {0.0, 0.5, 1.0})
    cv.text(tick_label(v, 0.1), bx + 18, top + (1 - v) * bh + 4, 11, Align::Left, false, kInk);
  cv.save_png(path);
}

std::vector<float> pos_embed_similarity(const float* pos, int64_t N, int64_t D) {
  std::vector<double> norm(N, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t d = 0; d < D; ++d) norm[i] += double(pos[i * D + d]) * pos[i * D + d];
    norm[i] = std::sqrt(norm[i]);
  }
  std::vector<float> sim(N * N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += double(pos[i * D + d]) * pos[j * D + d];
      const double den = norm[i] * norm[j];
      sim[i * N + j] = den > 0 ? float(dot / den) : 0.f;
    }
  return sim;
}

void pos_embed_figure(const float* pos, int64_t gh, int64_t gw, int64_t D, const std::string& title,
                      const std::string& path) {
  const int64_t N = gh * gw;
  VIT_CHECK(N > 0 && N <= 1024, "position-embedding figure: a ", gh, "x", gw, " grid is too large to draw");
  const std::vector<float> sim = pos_embed_similarity(pos, N, D);
  const int64_t px = std::max<int64_t>(2, 60 / std::max(gh, gw));  // pixels per patch of a small map
  const double mh = double(gh * px), mw = double(gw * px), gap = std::max(2.0, mw / 12);
  const double left = 56, top = 70, bar = 90, bottom = 20;
  Canvas cv(int(left + gw * (mw + gap) + bar), int(top + gh * (mh + gap) + bottom));
  cv.fit_text(title, cv.width() / 2.0, 24, cv.width() - 20, 15, Align::Center, true, kInk);
  cv.text("input patch column", left + gw * (mw + gap) / 2, 50, 13, Align::Center, false, kInk);
  cv.text("input patch row", 20, top + gh * (mh + gap) / 2, 13, Align::Center, false, kInk, 90);
  const int64_t every = gw > 16 ? 4 : gw > 8 ? 2 : 1;  // tick labels that do not collide
  for (int64_t c = 0; c < gw; c += every)
    cv.text(std::to_string(c + 1), left + c * (mw + gap) + mw / 2, top - 6, 11, Align::Center, false, kInk);
  for (int64_t r = 0; r < gh; r += every)
    cv.text(std::to_string(r + 1), left - 6, top + r * (mh + gap) + mh / 2 + 4, 11, Align::Right, false,
            kInk);
  for (int64_t i = 0; i < N; ++i) {
    Image m{gh, gw, 3, std::vector<uint8_t>(N * 3)};
    for (int64_t j = 0; j < N; ++j) {
      const auto c = viridis_u8((sim[i * N + j] + 1.0) / 2.0);  // [-1, 1] -> [0, 1]
      std::copy(c.begin(), c.end(), m.px.begin() + j * 3);
    }
    cv.image(m, left + (i % gw) * (mw + gap), top + (i / gw) * (mh + gap), mw, mh, false);
  }
  const double bx = left + gw * (mw + gap) + 14, bh = gh * (mh + gap) - gap;
  for (int i = 0; i < int(bh); ++i) cv.fill_rect(bx, top + bh - i - 1, 14, 1, viridis(i / (bh - 1)));
  cv.stroke_rect(bx, top, 14, bh, kInk, 1);
  for (double v : {-1.0, 0.0, 1.0})
    cv.text(tick_label(v, 1), bx + 18, top + (1 - (v + 1) / 2) * bh + 4, 11, Align::Left, false, kInk);
  cv.text("cosine similarity", bx + 50, top + bh / 2, 12, Align::Center, false, kInk, 90);
  cv.save_png(path);
}

}  // namespace vit::viz
