/* classify_c CHECKPOINT IMAGE [K]: examples/classify through the C API (<vitcpp.h>): the K
 * most probable classes of an image, best first, one line each: "index probability [label]". */
#include <stdio.h>
#include <stdlib.h>
#include <vitcpp.h>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: classify_c CHECKPOINT IMAGE [K]\n");
    return 2;
  }
  const long k = argc == 4 ? strtol(argv[3], NULL, 10) : 5;
  if (k <= 0) {
    fprintf(stderr, "classify_c: K must be positive, got %s\n", argv[3]);
    return 2;
  }
  vitcpp_model* model = NULL;
  if (vitcpp_open(argv[1], NULL, &model) != VITCPP_OK) {
    fprintf(stderr, "classify_c: %s\n", vitcpp_last_error());
    return 1;
  }
  vitcpp_image image = {0};
  image.kind = VITCPP_IMAGE_FILE;
  image.path = argv[2];
  vitcpp_prediction* top = malloc(sizeof *top * (size_t)k);
  int rc = 0;
  if (!top) {
    fprintf(stderr, "classify_c: out of memory\n");
    rc = 1;
  } else if (vitcpp_classify(model, &image, 1, k, top) != VITCPP_OK) {
    fprintf(stderr, "classify_c: %s\n", vitcpp_last_error());
    rc = 1;
  } else {
    for (long i = 0; i < k && top[i].index >= 0; ++i)
      printf("%lld %.4f%s%s\n", (long long)top[i].index, top[i].probability, top[i].label ? " " : "",
             top[i].label ? top[i].label : "");
  }
  free(top);
  vitcpp_close(model);
  return rc;
}
