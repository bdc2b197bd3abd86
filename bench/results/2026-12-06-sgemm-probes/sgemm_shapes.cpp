// sgemm_shapes.cpp — probe (issue 29): dnnl_sgemm's median time for the GEMMs of cpu_onednn's
// FCN-5, FCN-R and LSTM decoder steps, row-major as the plugin calls them; built once against
// Debian's oneDNN 2.6 and once against PyPI's oneDNN 3.13 (README.md beside it).
#include <dnnl.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
using clk = std::chrono::steady_clock;
struct S {
  const char* name;
  char ta, tb;
  long m, n, k;
  float beta;
};
int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 5;
  S shapes[] = {
      {"fcn5 L1 dW beta1 (TN 2048:26752:64)", 'T', 'N', 2048, 26752, 64, 1.0f},
      {"fcn5 L1 dW beta0 (TN 2048:26752:64)", 'T', 'N', 2048, 26752, 64, 0.0f},
      {"fcn5 L1 fwd (NT 64:2048:26752)", 'N', 'T', 64, 2048, 26752, 0.0f},
      {"fcn5 L1 dX (NN 64:26752:2048)", 'N', 'N', 64, 26752, 2048, 0.0f},
      {"fcnr L dW (TN 2048:2048:1024)", 'T', 'N', 2048, 2048, 1024, 1.0f},
      {"lstm dec dW (TN 10000:256:4096)", 'T', 'N', 10000, 256, 4096, 0.0f},
      {"lstm dec fwd (NT 4096:10000:256)", 'N', 'T', 4096, 10000, 256, 0.0f},
  };
  for (const S& s : shapes) {
    long lda = s.ta == 'N' ? s.k : s.m, ldb = s.tb == 'N' ? s.n : s.k, ldc = s.n;
    std::vector<float> a(s.m * s.k, 0.01f), b(s.k * s.n, 0.02f), c(s.m * s.n, 0.5f);
    std::vector<double> t;
    for (int r = 0; r <= reps; ++r) {
      auto t0 = clk::now();
      dnnl_sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, s.beta, c.data(),
                 ldc);
      double e = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
      if (r > 0) t.push_back(e);
    }
    std::sort(t.begin(), t.end());
    printf("%-40s %8.1f ms\n", s.name, t[t.size() / 2]);
  }
  const dnnl_version_t* v = dnnl_version();
  printf("oneDNN %d.%d.%d cpu_runtime %u\n", v->major, v->minor, v->patch, v->cpu_runtime);
}
