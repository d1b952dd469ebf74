#include "gil.h"

#include <unistd.h>

namespace vit::python {

void wait_for_exit() {
  for (;;) pause();  // a signal handled on this thread wakes it: wait again
}

}  // namespace vit::python
