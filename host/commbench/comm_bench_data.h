// comm_bench_data.h — the data `dlhost comm-bench` sends and the results it expects back, chosen
// so every expected value is exact: rank r's element i is a small integer v(r, i) in [-8, 8], so
// sums over any realistic world are exact in every dtype (floats hold integers up to 2^24
// exactly) and AVG is one correctly rounded division of an exact sum. Also the bandwidth
// formulas (nccl-tests' algbw and busbw) and size parsing. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlhost::comm_bench {

enum class Collective { kAllReduce, kBroadcast, kAllGather };

const char* collective_name(Collective c);  // "all_reduce", ...
bool parse_collective(const std::string& name, Collective* out);

size_t dtype_size(int32_t dtype);              // 0 for an unknown dtype
const char* dtype_name(int32_t dtype);         // "f32", ...
int32_t parse_dtype(const std::string& name);  // 0 when unknown
const char* redop_name(int32_t op);            // "sum", ...
int32_t parse_redop(const std::string& name);  // 0 when unknown

// "8", "64K", "1M", "2G" (binary multiples, optional trailing B); throws std::invalid_argument.
uint64_t parse_size(const std::string& text);
// min, min*f, min*f^2, ... up to max.
std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor);

// The value rank `rank` contributes at element `i`.
int input_value(int rank, uint64_t i);

// Fills `count` elements of rank `rank`'s input.
void fill_input(void* buffer, uint64_t count, int32_t dtype, int rank);
// Fills what a correct collective leaves in the receive buffer: `count` elements for all_reduce
// (reduced with `redop` over `world` ranks) and broadcast (root's input), world * count for
// all_gather (rank r's input at block r).
void fill_expected(Collective c, void* buffer, uint64_t count, int32_t dtype, int32_t redop,
                   int world, int root);
// Elements of `got` that differ from `expected` (n elements of dtype).
uint64_t count_wrong(const void* got, const void* expected, uint64_t n, int32_t dtype);

// nccl-tests' bus bandwidth factor: all-reduce 2(n-1)/n, all-gather (n-1)/n, broadcast 1; it
// makes busbw comparable with the link's bandwidth whatever the number of ranks.
double busbw_factor(Collective c, int world);

}  // namespace dlhost::comm_bench
