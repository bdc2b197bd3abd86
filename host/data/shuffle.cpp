// shuffle.cpp — see shuffle.h.
#include "data/shuffle.h"

#include <numeric>
#include <random>
#include <utility>

namespace dlhost::data {

namespace {

// splitmix64's finalizer: nearby (seed, epoch) pairs give unrelated generator seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  std::mt19937_64 rng(mix(seed ^ mix(static_cast<uint64_t>(epoch))));
  for (int64_t i = size - 1; i > 0; --i) {
    // Modulo bias is below size / 2^64: immaterial for any data set.
    auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace dlhost::data
