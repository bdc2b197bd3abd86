// split_blocks.cpp — probe (issue 29): FCN-5/8's first-layer weight-gradient dnnl_sgemm (beta 1,
// as the fused SGD runs it) whole against split into column or row blocks (README.md beside it).
#include <dnnl.h>
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
using clk = std::chrono::steady_clock;
static double ms(clk::time_point a) {
  return std::chrono::duration<double, std::milli>(clk::now() - a).count();
}
int main(int argc, char** argv) {
  long M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
  int rounds = argc > 4 ? atoi(argv[4]) : 5;
  float beta = argc > 5 ? atof(argv[5]) : 1.0f;
  std::vector<float> a(K * M, 0.01f), b(K * N, 0.02f), c(M * N, 0.5f);
  std::vector<long> blocks = {0, 256, 512, 1024, 2048, -256, -512, -1024};
  std::vector<std::vector<double>> t(blocks.size());
  for (int r = 0; r < rounds + 1; ++r)
    for (size_t i = 0; i < blocks.size(); ++i) {
      long bn = blocks[i];
      auto s = clk::now();
      if (bn == 0)
        dnnl_sgemm('T', 'N', M, N, K, -0.01f, a.data(), M, b.data(), N, beta, c.data(), N);
      else if (bn > 0)
        for (long n0 = 0; n0 < N; n0 += bn)
          dnnl_sgemm('T', 'N', M, std::min(bn, N - n0), K, -0.01f, a.data(), M, b.data() + n0, N,
                     beta, c.data() + n0, N);
      else
        for (long m0 = 0; m0 < M; m0 += -bn)
          dnnl_sgemm('T', 'N', std::min(-bn, M - m0), N, K, -0.01f, a.data() + m0, M, b.data(), N,
                     beta, c.data() + m0 * N, N);
      double e = ms(s);
      if (r > 0) t[i].push_back(e);
    }
  printf("M=%ld N=%ld K=%ld beta=%g threads=%d\n", M, N, K, beta, omp_get_max_threads());
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto v = t[i];
    std::sort(v.begin(), v.end());
    printf("  %s %5ld: median %.1f ms (min %.1f)\n",
           blocks[i] > 0   ? "cols"
           : blocks[i] < 0 ? "rows"
                           : "whole",
           labs(blocks[i]), v[v.size() / 2], v[0]);
  }
}
