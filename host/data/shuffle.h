// shuffle.h — the order in which an epoch visits a data set: a permutation that depends only on
// (seed, epoch, size), identical on every rank and every build. Thread-safe (pure function).
#pragma once

#include <cstdint>
#include <vector>

namespace dlhost::data {

// A permutation of 0..size-1 (Fisher-Yates driven by std::mt19937_64 seeded from seed and epoch;
// the index draw is written out, not a std:: distribution, whose output differs between standard
// libraries). shuffle = false gives 0..size-1.
std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch, bool shuffle = true);

}  // namespace dlhost::data
