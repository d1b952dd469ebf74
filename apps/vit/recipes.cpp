// Training recipes: named sets of `vit train` flags, expanded before parsing so that any
// flag given explicitly after them wins (options take their last value).
#include <algorithm>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "commands.h"
#include "core/check.h"
#include "validators.h"

namespace vit::app {

namespace {
// mnist-small's schedule (AdamW, 2 warmup epochs, cosine to 1e-5, crops padded with the mean as
// when its results were measured, label smoothing, model EMA) with the given flags after it.
std::vector<std::string> small_vit(std::initializer_list<const char*> more) {
  // clang-format off
  std::vector<std::string> f = {"--model", "mnist-small", "--opt", "adamw", "--lr", "0.002", "--weight-decay", "0.05",
                                "--warmup-epochs", "2", "--min-lr", "1e-5", "-b", "128", "--crop-pad", "2",
                                "--crop-fill", "mean", "--smoothing", "0.1", "--model-ema", "--model-ema-warmup"};
  // clang-format on
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

const std::map<std::string, std::vector<std::string>>& recipes() {
  // clang-format off
  static const std::map<std::string, std::vector<std::string>> r = {
      // Seed 001: the tutorial's tiny model and recipe (about 80% on MNIST in the tutorial).
      {"mnist-seed", {"--model", "mnist-seed", "--opt", "adam", "--lr", "0.005", "-b", "128", "--epochs", "5",
                      "--sched", "none", "--weight-decay", "0"}},
      // Seed 002: CIFAR-10, patch 4, 192 dims, 12 layers, 12 heads; Adam 1e-3 with weight decay
      // 5e-5 (L2, as torch.optim.Adam), batch 256, 50 epochs, random crop with 4-pixel padding
      // and horizontal flip, early stopping.
      {"cifar-seed", {"--model", "cifar-seed", "--opt", "adam", "--lr", "0.001", "--weight-decay", "5e-5",
                      "-b", "256", "--epochs", "50", "--sched", "none", "--crop-pad", "4", "--hflip", "0.5",
                      "--patience", "10"}},
      // vitcpp's small ViT for MNIST (docs/results.md): patch 4, 64 dims, 6 blocks, 4 heads; mild
      // RandAugment (magnitude 3: rotations to 9 degrees, shifts to 4 pixels; vitcpp's mild ops,
      // which never invert a digit as timm's invert and solarize do) and a model EMA.
      {"mnist", small_vit({"--epochs", "100", "--aa", "rand-m3-n2", "--aa-ops", "mild"})},
      // The same model for Fashion-MNIST: 160 epochs (2 h 27 min on 2 Zen 3 cores), horizontal
      // flips and random erasing (which Zhong et al. found helps on Fashion-MNIST).
      {"fashion-mnist", small_vit({"--epochs", "160", "--hflip", "0.5", "--reprob", "0.25"})},
      // The paper's fine-tuning (ViT, Appendix B.1.1): SGD momentum 0.9, no weight decay,
      // cosine decay after a linear warmup, gradient clipping at global norm 1. Use with
      // --pretrained PATH --num-classes K [--img-size S].
      {"finetune", {"--opt", "momentum", "--momentum", "0.9", "--lr", "0.03", "--weight-decay", "0", "--sched",
                    "cosine", "--warmup-epochs", "1", "--clip-grad", "1.0", "-b", "128", "--epochs", "10"}},
  };
  // clang-format on
  return r;
}
}  // namespace

namespace {
std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

std::vector<std::string> recipe_names() {
  std::vector<std::string> names;
  for (auto& [name, flags] : recipes()) names.push_back(name);
  return names;
}

std::vector<std::string> expand_recipe(std::vector<std::string> args) {
  if (args.empty() || args[0] != "train") return args;
  std::string name;
  size_t at = 0, words = 0;  // where the one --recipe is, and its words (1 for --recipe=NAME)
  for (size_t i = 1; i < args.size(); ++i) {
    std::string given;
    size_t n = 0;
    if (args[i] == "--recipe") {
      VIT_USAGE_CHECK(i + 1 < args.size(), "--recipe needs a name (known: ", join(recipe_names()), ")");
      given = args[i + 1];
      n = 2;
    } else if (args[i].rfind("--recipe=", 0) == 0) {
      given = args[i].substr(9);
      n = 1;
    } else {
      continue;
    }
    // Two recipes would each set the schedule: which one wins is no one's guess to make.
    VIT_USAGE_CHECK(name.empty(), "--recipe given twice ('", name, "' and '", given,
                    "'): give one, then the flags to change");
    VIT_USAGE_CHECK(recipes().count(given), "unknown recipe '", given, "' (known: ", join(recipe_names()),
                    ")");
    name = given;
    at = i;
    words = n;
    i += n - 1;
  }
  if (name.empty()) return args;
  args.erase(args.begin() + long(at), args.begin() + long(at + words));
  std::vector<std::string> flags = recipes().at(name);
  // Fine-tuning, the model is the pretrained one: the recipe's --model is left out, so that a
  // --model left is the user's (the name the file is read as).
  const bool pretrained = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--pretrained" || a.rfind("--pretrained=", 0) == 0;
  });
  for (size_t i = 0; pretrained && i + 1 < flags.size(); ++i)
    if (flags[i] == "--model") flags.erase(flags.begin() + long(i), flags.begin() + long(i) + 2);
  // --lr-base sets the lr where no --lr is given (timm's): the recipe's --lr gives way to it.
  const bool lr_base = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--lr-base" || a.rfind("--lr-base=", 0) == 0;
  });
  for (size_t i = 0; lr_base && i + 1 < flags.size(); ++i)
    if (flags[i] == "--lr") flags.erase(flags.begin() + long(i), flags.begin() + long(i) + 2);
  args.insert(args.begin() + 1, flags.begin(), flags.end());
  return args;
}

}  // namespace vit::app
