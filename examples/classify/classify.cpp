// classify CHECKPOINT IMAGE [K]: the K most probable classes of an image, best first, one
// line each: "index probability [label]" (the probabilities `vit predict` prints).
#include <vit/classifier.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: classify CHECKPOINT IMAGE [K]\n");
    return 2;
  }
  const long k = argc == 4 ? std::strtol(argv[3], nullptr, 10) : 5;
  try {
    vit::Classifier model(argv[1]);  // vitcpp, timm, Hugging Face or vit-pytorch checkpoint
    for (const vit::Prediction& p : model.classify(vit::ImageInput::file(argv[2]), k))
      std::printf("%lld %.4f%s%s\n", static_cast<long long>(p.index), p.probability,
                  p.label.empty() ? "" : " ", p.label.c_str());
  } catch (const vit::Error& e) {  // a bad checkpoint, image or k: one line that names it
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
  return 0;
}
