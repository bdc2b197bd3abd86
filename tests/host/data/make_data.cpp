// make_data.cpp — writes learnable data sets in the real formats (MNIST idx, CIFAR-10 binary,
// PTB text; data_files.h) under a directory, for the real-data end-to-end test and for
// measurements at the real sizes. Nothing is downloaded; the images' class decides where a bright
// block sits, so a network that learns gets its loss well below log(10).
// Usage: make_data DIR MNIST_TRAIN MNIST_TEST CIFAR_PER_BATCH CIFAR_TEST PTB_WORDS [SEED]
//   e.g. make_data /tmp/d 60000 10000 10000 10000 0   (the real sizes of MNIST and CIFAR-10)
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "data_files.h"

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr,
                 "usage: %s DIR MNIST_TRAIN MNIST_TEST CIFAR_PER_BATCH CIFAR_TEST PTB_WORDS "
                 "[SEED]\n",
                 argv[0]);
    return 2;
  }
  try {
    auto n = [&](int i) { return std::atoll(argv[i]); };
    dlhost::data::testing::write_learnable_sets(argv[1], n(2), n(3), n(4), n(5), n(6),
                                                argc == 8 ? static_cast<uint64_t>(n(7)) : 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_data: %s\n", e.what());
    return 1;
  }
  return 0;
}
