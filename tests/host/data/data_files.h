// data_files.h — writes small data sets in the real formats for the data-layer tests and the
// pipeline benchmark: MNIST idx (plain or gzip), CIFAR-10 binary batches, PTB-style text, each
// with the right headers and magic numbers. Pixel values and labels are a function of (seed,
// sample), so a test can say what sample i must hold. Not thread-safe per directory.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlhost::data::testing {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("dlhost_" + tag + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                        bool gzip = false) {
  fs::create_directories(fs::path(path).parent_path());
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f ||
        gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) !=
            static_cast<int>(bytes.size()) ||
        gzclose(f) != Z_OK)
      throw std::runtime_error("cannot write " + path);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(v >> shift));
}

// The pixel byte k of sample i, and its label, of a generated set.
inline uint8_t pixel(uint64_t seed, int64_t i, int64_t k) {
  return static_cast<uint8_t>(
      (seed * 131 + static_cast<uint64_t>(i) * 7919 + static_cast<uint64_t>(k) * 31) % 251);
}
inline uint8_t label(uint64_t seed, int64_t i, int classes = 10) {
  return static_cast<uint8_t>((seed + static_cast<uint64_t>(i) * 3) %
                              static_cast<uint64_t>(classes));
}

inline std::vector<uint8_t> mnist_images(int64_t n, uint32_t rows = 28, uint32_t cols = 28,
                                         uint64_t seed = 1) {
  std::vector<uint8_t> b;
  b.reserve(16 + static_cast<size_t>(n) * rows * cols);
  put_u32(b, 0x00000803);
  put_u32(b, static_cast<uint32_t>(n));
  put_u32(b, rows);
  put_u32(b, cols);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < int64_t{rows} * cols; ++k) b.push_back(pixel(seed, i, k));
  return b;
}

inline std::vector<uint8_t> mnist_labels(int64_t n, uint64_t seed = 1) {
  std::vector<uint8_t> b;
  put_u32(b, 0x00000801);
  put_u32(b, static_cast<uint32_t>(n));
  for (int64_t i = 0; i < n; ++i) b.push_back(label(seed, i));
  return b;
}

// Records of 1 label byte + 3072 pixel bytes, samples first_index.. of the generated set.
inline std::vector<uint8_t> cifar_batch(int64_t n, uint64_t seed = 1, int64_t first_index = 0) {
  std::vector<uint8_t> b;
  b.reserve(static_cast<size_t>(n) * 3073);
  for (int64_t i = first_index; i < first_index + n; ++i) {
    b.push_back(label(seed, i));
    for (int64_t k = 0; k < 3072; ++k) b.push_back(pixel(seed, i, k));
  }
  return b;
}

// The four MNIST files (train n_train, test n_test samples) under dir.
inline void write_mnist_set(const fs::path& dir, int64_t n_train, int64_t n_test, bool gzip) {
  const std::string gz = gzip ? ".gz" : "";
  write_bytes((dir / ("train-images-idx3-ubyte" + gz)).string(), mnist_images(n_train), gzip);
  write_bytes((dir / ("train-labels-idx1-ubyte" + gz)).string(), mnist_labels(n_train), gzip);
  write_bytes((dir / ("t10k-images-idx3-ubyte" + gz)).string(), mnist_images(n_test, 28, 28, 2),
              gzip);
  write_bytes((dir / ("t10k-labels-idx1-ubyte" + gz)).string(), mnist_labels(n_test, 2), gzip);
}

// data_batch_1..5.bin (n_per_batch records each, consecutive samples) and test_batch.bin.
inline void write_cifar_set(const fs::path& dir, int64_t n_per_batch, int64_t n_test) {
  for (int b = 1; b <= 5; ++b)
    write_bytes((dir / ("data_batch_" + std::to_string(b) + ".bin")).string(),
                cifar_batch(n_per_batch, 1, (b - 1) * n_per_batch));
  write_bytes((dir / "test_batch.bin").string(), cifar_batch(n_test, 2));
}

// A learnable image of class `label` (0..9): noise in 0..79 everywhere, plus a bright block
// (176..255) whose place and channel the class decides. A network that learns gets its loss well
// below log(10); random labels or pixels would not allow that. Fills c x h x w bytes at `out`.
inline void learnable_image(uint8_t* out, int label, int64_t c, int64_t h, int64_t w,
                            std::mt19937_64& rng) {
  for (int64_t k = 0; k < c * h * w; ++k) out[k] = static_cast<uint8_t>(rng() % 80);
  const int64_t bh = h / 2, bw = w / 5;  // 2 x 5 places on the image
  const int64_t top = (label / 5) * bh, left = (label % 5) * bw, channel = label % c;
  for (int64_t y = top; y < top + bh; ++y)
    for (int64_t x = left; x < left + bw; ++x)
      out[(channel * h + y) * w + x] = static_cast<uint8_t>(176 + rng() % 80);
}

inline void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// n learnable images (learnable_image) of random classes: pixels [n, c, side, side], `labels`.
inline std::vector<uint8_t> learnable_records(int64_t n, int64_t c, int64_t side,
                                              std::mt19937_64& rng, std::vector<uint8_t>& labels) {
  std::vector<uint8_t> pixels(static_cast<size_t>(n * c * side * side));
  labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(rng() % 10);
    learnable_image(pixels.data() + i * c * side * side, labels[i], c, side, side, rng);
  }
  return pixels;
}

// PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte (.gz when gzip) of n learnable images.
inline void write_learnable_mnist(const fs::path& dir, const std::string& prefix, int64_t n,
                                  bool gzip, std::mt19937_64& rng) {
  std::vector<uint8_t> labels;
  auto pixels = learnable_records(n, 1, 28, rng, labels);
  auto images = mnist_images(0);  // the header, then its count fixed below
  std::vector<uint8_t> label_file = mnist_labels(0);
  for (int shift = 24, k = 4; shift >= 0; shift -= 8, ++k)
    images[k] = label_file[k] = static_cast<uint8_t>(n >> shift);
  images.insert(images.end(), pixels.begin(), pixels.end());
  label_file.insert(label_file.end(), labels.begin(), labels.end());
  const std::string gz = gzip ? ".gz" : "";
  write_bytes((dir / (prefix + "-images-idx3-ubyte" + gz)).string(), images, gzip);
  write_bytes((dir / (prefix + "-labels-idx1-ubyte" + gz)).string(), label_file, gzip);
}

// One CIFAR-10 binary batch of n learnable records.
inline void write_learnable_cifar(const fs::path& path, int64_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> labels;
  auto pixels = learnable_records(n, 3, 32, rng, labels);
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(n) * 3073);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(labels[i]);
    out.insert(out.end(), pixels.begin() + i * 3072, pixels.begin() + (i + 1) * 3072);
  }
  write_bytes(path.string(), out);
}

// PTB-style text of `words` words in lines of 20 over a vocabulary of `vocabulary` words
// ("w0".."wN"), learnable: each word is followed by (7 w + 3) mod N nine times in ten, by a
// random word otherwise, so a language model's perplexity falls far below N.
inline std::string learnable_text(int64_t words, int vocabulary, std::mt19937_64& rng) {
  std::string text;
  int w = static_cast<int>(rng() % static_cast<uint64_t>(vocabulary));
  for (int64_t i = 0; i < words; ++i) {
    text += "w" + std::to_string(w) + ((i + 1) % 20 == 0 ? "\n" : " ");
    w = rng() % 10 < 9 ? (7 * w + 3) % vocabulary
                       : static_cast<int>(rng() % static_cast<uint64_t>(vocabulary));
  }
  return text + "\n";
}

// The three families under dir in the layout of the official downloads (docs/data.md), learnable;
// a count of 0 leaves that family out. MNIST's training files are gzip-compressed, its test files
// not (both forms are read). PTB: train, valid and test texts of ptb_words, ptb_words / 10 each.
inline void write_learnable_sets(const fs::path& dir, int64_t mnist_train, int64_t mnist_test,
                                 int64_t cifar_per_batch, int64_t cifar_test, int64_t ptb_words,
                                 uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  if (mnist_train > 0) {
    write_learnable_mnist(dir / "mnist", "train", mnist_train, true, rng);
    write_learnable_mnist(dir / "mnist", "t10k", mnist_test, false, rng);
  }
  if (cifar_per_batch > 0) {
    for (int b = 1; b <= 5; ++b)
      write_learnable_cifar(dir / ("cifar-10-batches-bin/data_batch_" + std::to_string(b) + ".bin"),
                            cifar_per_batch, rng);
    write_learnable_cifar(dir / "cifar-10-batches-bin/test_batch.bin", cifar_test, rng);
  }
  if (ptb_words > 0) {
    write_text((dir / "ptb/ptb.train.txt").string(), learnable_text(ptb_words, 200, rng));
    write_text((dir / "ptb/ptb.valid.txt").string(), learnable_text(ptb_words / 10, 200, rng));
    write_text((dir / "ptb/ptb.test.txt").string(), learnable_text(ptb_words / 10, 200, rng));
  }
}

}  // namespace dlhost::data::testing
