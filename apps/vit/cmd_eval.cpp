// vit eval and vit predict: flags are in place; they need the dataset and image readers,
// which land with the next release, and say so instead of failing obscurely.
#include <iostream>
#include <memory>

#include "commands.h"

namespace vit::app {

namespace {
struct EvalFlags {
  std::string checkpoint, data_dir, split = "test", labels;
  std::vector<std::string> images;
  int64_t topk = 5;
  bool json = false;
};

int not_yet(const char* what) {
  std::cerr << "vit " << what << ": not yet available in this build (it needs the dataset and image "
            << "readers of the next release)\n";
  return 2;
}
}  // namespace

Run add_eval(CLI::App& cmd) {
  auto f = std::make_shared<EvalFlags>();
  cmd.add_option("--checkpoint", f->checkpoint, "model checkpoint (.safetensors)");
  cmd.add_option("--data-dir", f->data_dir, "dataset directory");
  cmd.add_option("--split", f->split, "test, val or train")->capture_default_str();
  cmd.add_flag("--json", f->json, "print one JSON object");
  return [] { return not_yet("eval"); };
}

Run add_predict(CLI::App& cmd) {
  auto f = std::make_shared<EvalFlags>();
  cmd.add_option("--checkpoint", f->checkpoint, "model checkpoint (.safetensors)");
  cmd.add_option("--topk", f->topk, "how many classes to print")->capture_default_str();
  cmd.add_option("--labels", f->labels, "class names, one per line");
  cmd.add_flag("--json", f->json, "one JSON object per line per image");
  cmd.add_option("images", f->images, "image files");
  return [] { return not_yet("predict"); };
}

}  // namespace vit::app
