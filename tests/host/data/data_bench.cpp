// data_bench.cpp — a measurement, not a test: writes MNIST- and CIFAR-10-shaped files of the real
// sizes (60000 and 50000 training images, random classes, learnable: data_files.h) under a temp
// dir (or DIR, kept, and reused when it holds them), opens them as a run would, and measures the
// pipeline: batches/s when the consumer takes batches as fast as it can,
// and the data wait per step when the consumer spends a given time per step (a stand-in for the
// training step). Usage: data_bench [DIR] [consumer_ms_mnist consumer_ms_cifar]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "data/catalog.h"
#include "data/pipeline.h"
#include "data_files.h"

namespace {

using namespace dlhost::data;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Learnable images of random classes (data_files.h), valid files of the real sizes, so the same
// files serve the throughput figures here and a short training run whose loss must fall.
void write_sets(const std::filesystem::path& dir) {
  testing::write_learnable_sets(dir, 60000, 10000, 10000, 10000, 0);
}

void measure(const char* name, const Dataset& d, int64_t batch, int64_t epochs,
             double consumer_ms) {
  PipelineOptions o;
  o.batch = batch;
  o.epochs = epochs;
  o.seed = 1;
  auto t0 = Clock::now();
  Pipeline p(d.train, o);
  const double setup_s = seconds_since(t0);
  t0 = Clock::now();
  int64_t n = 0;
  while (auto lease = p.next()) {
    ++n;
    if (consumer_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(consumer_ms));
  }
  const double run_s = seconds_since(t0);
  const PipelineStats s = p.stats();
  std::printf(
      "%-9s batch %5lld consumer %5.1f ms/step: %4lld steps in %6.2f s = %8.1f batches/s "
      "(%9.0f samples/s); data wait mean %7.3f ms max %7.3f ms per step; fill %6.3f ms "
      "per batch; buffers set up in %.3f s\n",
      name, static_cast<long long>(batch), consumer_ms, static_cast<long long>(n), run_s, n / run_s,
      n * batch / run_s, s.wait_ms / n, s.max_wait_ms, s.fill_ms / n, setup_s);
}

}  // namespace

int main(int argc, char** argv) {
  testing::TempDir tmp("data_bench");
  std::filesystem::path dir = argc > 1 ? std::filesystem::path(argv[1]) : tmp.path();
  const double mnist_ms = argc > 3 ? std::atof(argv[2]) : 20.0;
  const double cifar_ms = argc > 3 ? std::atof(argv[3]) : 20.0;
  auto t0 = Clock::now();
  if (!std::filesystem::exists(dir / "mnist")) write_sets(dir);
  std::printf("generated files in %.2f s under %s\n", seconds_since(t0), dir.c_str());

  t0 = Clock::now();
  Dataset mnist = open_dataset(find_files(Family::mnist, dir.string()));
  std::printf("opened %s (train images gzip) in %.3f s\n", mnist.train->describe().c_str(),
              seconds_since(t0));
  t0 = Clock::now();
  Dataset cifar = open_dataset(find_files(Family::cifar10, dir.string()));
  std::printf("opened %s in %.3f s\n", cifar.train->describe().c_str(), seconds_since(t0));

  measure("MNIST", mnist, 1024, 3, 0);
  measure("MNIST", mnist, 1024, 2, mnist_ms);
  measure("CIFAR-10", cifar, 128, 1, 0);
  measure("CIFAR-10", cifar, 1024, 2, 0);
  measure("CIFAR-10", cifar, 128, 1, cifar_ms);
  return 0;
}
