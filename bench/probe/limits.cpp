// limits.cpp — bench_limits, the machine-limit probe of bench/: sgemm GFLOP/s through oneDNN's
// dnnl_sgemm and OpenBLAS's cblas_sgemm (large squares), a STREAM-like triad's bandwidth, the
// ISA oneDNN dispatches, and the bare-GEMM time of a list of GEMM shapes (the GEMMs of one
// training step of a fully connected network, which bench.py derives from the layer sizes), or
// each shape's own time (--each: bench/kernels.py, the step's kernels beside MKL's).
// One JSON object per line on stdout. Threads: OpenMP's count for oneDNN and the triad,
// openblas_set_num_threads for OpenBLAS, both set from --threads.
//
//   bench_limits --threads T [--sizes 2048,4096] [--reps R] [--triad-mb 256]
//                [--shapes M:N:K[:TT],...] [--each 1]
//   (row-major C[M,N] = op(A) op(B), op(A) [M,K], op(B) [K,N]; TT: 'N' or 'T' for A then B,
//   as dnnl_sgemm's transa/transb; NN when absent)
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "oneapi/dnnl/dnnl.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Gemm {
  long m, n, k;
  char ta = 'N', tb = 'N';
  long lda() const { return ta == 'N' ? k : m; }  // row-major leading dimensions
  long ldb() const { return tb == 'N' ? n : k; }
};

// Buffers are allocated and touched once per shape, then reused: fresh pages are slow here.
struct Buffers {
  std::vector<float> a, b, c;
  explicit Buffers(const Gemm& g)
      : a(static_cast<size_t>(g.m * g.k), 0.5f),
        b(static_cast<size_t>(g.k * g.n), 0.25f),
        c(static_cast<size_t>(g.m * g.n), 0.0f) {}
};

void run_dnnl(const Gemm& g, Buffers& x) {
  if (dnnl_sgemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, x.a.data(), g.lda(), x.b.data(), g.ldb(), 0.0f,
                 x.c.data(), g.n) != dnnl_success) {
    std::fprintf(stderr, "bench_limits: dnnl_sgemm failed for %ldx%ldx%ld\n", g.m, g.n, g.k);
    std::exit(1);
  }
}

void run_openblas(const Gemm& g, Buffers& x) {
  cblas_sgemm(CblasRowMajor, g.ta == 'N' ? CblasNoTrans : CblasTrans,
              g.tb == 'N' ? CblasNoTrans : CblasTrans, static_cast<int>(g.m), static_cast<int>(g.n),
              static_cast<int>(g.k), 1.0f, x.a.data(), static_cast<int>(g.lda()), x.b.data(),
              static_cast<int>(g.ldb()), 0.0f, x.c.data(), static_cast<int>(g.n));
}

// Median seconds of `reps` calls after one warm-up call.
template <class Fn>
double median_seconds(int reps, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// a[i] = b[i] + s * c[i] over three arrays of `mb` MiB each; bytes moved = 3 x array size
// (STREAM's count, write-allocate traffic not included).
double triad_gbs(size_t mb, int reps) {
  const size_t n = mb * 1024 * 1024 / sizeof(float);
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  const float s = 3.0f;
  double sec = median_seconds(reps, [&] {
    float* pa = a.data();
    const float* pb = b.data();
    const float* pc = c.data();
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
  });
  return 3.0 * static_cast<double>(n) * sizeof(float) / sec / 1e9;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_limits: %s\nusage: bench_limits --threads T [--sizes 2048,4096] [--reps R] "
               "[--triad-mb MB] [--shapes M:N:K[:TT],...] [--each 1]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 5;
  bool each = false;
  size_t triad_mb = 256;
  std::vector<long> sizes;
  std::vector<Gemm> shapes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
    std::string value = argv[++i];
    if (arg == "--threads") {
      threads = std::atoi(value.c_str());
    } else if (arg == "--reps") {
      reps = std::max(1, std::atoi(value.c_str()));
    } else if (arg == "--triad-mb") {
      triad_mb = static_cast<size_t>(std::max(0, std::atoi(value.c_str())));
    } else if (arg == "--sizes") {
      for (const auto& s : split(value, ',')) sizes.push_back(std::atol(s.c_str()));
    } else if (arg == "--shapes") {
      for (const auto& s : split(value, ',')) {
        auto p = split(s, ':');
        const bool trans_ok = p.size() == 4 && p[3].size() == 2 &&
                              (p[3][0] == 'N' || p[3][0] == 'T') &&
                              (p[3][1] == 'N' || p[3][1] == 'T');
        if (p.size() != 3 && !trans_ok) usage(("bad shape '" + s + "', want M:N:K[:TT]").c_str());
        Gemm g{std::atol(p[0].c_str()), std::atol(p[1].c_str()), std::atol(p[2].c_str())};
        if (g.m < 1 || g.n < 1 || g.k < 1) usage(("bad shape '" + s + "'").c_str());
        if (p.size() == 4) g.ta = p[3][0], g.tb = p[3][1];
        shapes.push_back(g);
      }
    } else if (arg == "--each") {
      each = std::atoi(value.c_str()) != 0;
    } else {
      usage(("unknown option " + arg).c_str());
    }
  }
  if (threads < 1) usage("--threads must be >= 1");
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  std::printf("{\"kind\": \"isa\", \"onednn_isa\": \"%s\", \"threads\": %d}\n",
              isa_name(dnnl_get_effective_cpu_isa()), threads);
  for (long n : sizes) {
    Gemm g{n, n, n};
    Buffers x(g);
    const double flops = 2.0 * n * n * n;
    double t_dnnl = median_seconds(reps, [&] { run_dnnl(g, x); });
    double t_blas = median_seconds(reps, [&] { run_openblas(g, x); });
    std::printf(
        "{\"kind\": \"sgemm\", \"n\": %ld, \"threads\": %d, \"onednn_gflops\": %.1f, "
        "\"openblas_gflops\": %.1f}\n",
        n, threads, flops / t_dnnl / 1e9, flops / t_blas / 1e9);
    std::fflush(stdout);
  }
  if (!shapes.empty()) {
    // The bare-GEMM time of a step: the sum of each shape's median, both libraries.
    double sum_dnnl = 0, sum_blas = 0, flops = 0;
    for (const Gemm& g : shapes) {
      Buffers x(g);
      const double t_dnnl = median_seconds(reps, [&] { run_dnnl(g, x); });
      const double t_blas = median_seconds(reps, [&] { run_openblas(g, x); });
      sum_dnnl += t_dnnl;
      sum_blas += t_blas;
      flops += 2.0 * g.m * g.n * g.k;
      if (each)
        std::printf(
            "{\"kind\": \"gemm\", \"threads\": %d, \"m\": %ld, \"n\": %ld, \"k\": %ld, "
            "\"trans\": \"%c%c\", \"onednn_ms\": %.3f, \"openblas_ms\": %.3f}\n",
            threads, g.m, g.n, g.k, g.ta, g.tb, t_dnnl * 1e3, t_blas * 1e3);
    }
    std::printf(
        "{\"kind\": \"step_gemms\", \"threads\": %d, \"gemms\": %zu, \"gflop\": %.3f, "
        "\"onednn_ms\": %.2f, \"openblas_ms\": %.2f}\n",
        threads, shapes.size(), flops / 1e9, sum_dnnl * 1e3, sum_blas * 1e3);
  }
  if (triad_mb > 0)
    std::printf("{\"kind\": \"triad\", \"threads\": %d, \"mb_per_array\": %zu, \"gbs\": %.1f}\n",
                threads, triad_mb, triad_gbs(triad_mb, reps));
  return 0;
}
