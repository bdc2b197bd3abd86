// test_data_readers.cpp — the MNIST, CIFAR-10 and PTB readers and the data-directory lookup, on
// files generated in a temp dir: round trips, gzip = plain, and one error naming the file for
// each kind of damage (bad magic, truncation, label out of range, count mismatch, missing file).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <cstdlib>

#include "data/catalog.h"
#include "data/error.h"
#include "data/images.h"
#include "data/ptb.h"
#include "data_files.h"

namespace dlhost::data {
namespace {

using testing::TempDir;

// Runs f, which must throw a DataError about `path` whose reason contains `words`.
template <typename F>
void expect_data_error(F f, const std::string& path, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "no DataError (expected one about " << path << ": " << words << ")";
  } catch (const DataError& e) {
    EXPECT_EQ(e.path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(e.reason().find(words), std::string::npos) << e.what();
  }
}

TEST(MnistReader, RoundTrip) {
  TempDir dir("mnist");
  testing::write_bytes(dir / "i", testing::mnist_images(5, 4, 3));
  testing::write_bytes(dir / "l", testing::mnist_labels(5));
  ImageSet set = read_mnist(dir / "i", dir / "l");
  ASSERT_EQ(set.count, 5);
  EXPECT_EQ(set.channels, 1);
  EXPECT_EQ(set.height, 4);
  EXPECT_EQ(set.width, 3);
  EXPECT_EQ(set.classes, 10);
  ASSERT_EQ(set.pixels.size(), 5u * 12);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(set.labels[i], testing::label(1, i));
    for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(set.pixels[i * 12 + k], testing::pixel(1, i, k));
  }
}

TEST(MnistReader, GzipAndPlainGiveTheSameData) {
  TempDir dir("mnist_gz");
  testing::write_mnist_set(dir.path() / "plain", 300, 10, false);
  testing::write_mnist_set(dir.path() / "gz", 300, 10, true);
  ImageSet plain =
      read_mnist(dir / "plain/train-images-idx3-ubyte", dir / "plain/train-labels-idx1-ubyte");
  ImageSet gz =
      read_mnist(dir / "gz/train-images-idx3-ubyte.gz", dir / "gz/train-labels-idx1-ubyte.gz");
  EXPECT_LT(std::filesystem::file_size(dir / "gz/train-images-idx3-ubyte.gz"),
            std::filesystem::file_size(dir / "plain/train-images-idx3-ubyte"));  // really gzip
  EXPECT_EQ(gz.count, 300);
  EXPECT_EQ(gz.pixels, plain.pixels);
  EXPECT_EQ(gz.labels, plain.labels);
}

TEST(MnistReader, ErrorsNameTheFile) {
  TempDir dir("mnist_bad");
  const std::string images = dir / "images", labels = dir / "labels";
  testing::write_bytes(labels, testing::mnist_labels(4));

  auto bytes = testing::mnist_images(4);
  bytes[3] = 0x01;  // the labels' magic in an image file
  testing::write_bytes(images, bytes);
  expect_data_error([&] { read_mnist(images, labels); }, images, "bad magic number 0x00000801");

  bytes = testing::mnist_images(4);
  bytes.resize(bytes.size() - 100);
  testing::write_bytes(images, bytes);
  expect_data_error([&] { read_mnist(images, labels); }, images, "truncated");

  testing::write_bytes(images, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 10));
  expect_data_error([&] { read_mnist(images, labels); }, images, "truncated");

  bytes = testing::mnist_images(4);
  bytes.push_back(0);
  testing::write_bytes(images, bytes);
  expect_data_error([&] { read_mnist(images, labels); }, images, "unexpected bytes");

  testing::write_bytes(images, testing::mnist_images(5));
  expect_data_error([&] { read_mnist(images, labels); }, labels, "4 labels but");

  testing::write_bytes(images, testing::mnist_images(4));
  auto label_bytes = testing::mnist_labels(4);
  label_bytes[8 + 2] = 10;
  testing::write_bytes(labels, label_bytes);
  expect_data_error([&] { read_mnist(images, labels); }, labels, "label 10 of image 2");

  expect_data_error([&] { read_mnist(dir / "nothing", labels); }, dir / "nothing", "missing");
}

TEST(MnistReader, TruncatedGzipIsAnError) {
  TempDir dir("mnist_gzcut");
  const std::string images = dir / "images.gz", labels = dir / "labels";
  testing::write_bytes(images, testing::mnist_images(50), true);
  testing::write_bytes(labels, testing::mnist_labels(50));
  auto size = std::filesystem::file_size(images);
  std::filesystem::resize_file(images, size / 2);
  expect_data_error([&] { read_mnist(images, labels); }, images, "truncated gzip stream");
}

// A 4 MB file announcing 60000x28x28 was inflated whole (4 GiB, RSS 4.2 GB) before failing
// (issue 32): reading stops at the bytes the header announces, and the error names the file.
TEST(MnistReader, AGzipBombStopsAtTheBytesTheHeaderAnnounces) {
  TempDir dir("mnist_bomb");
  const std::string images = dir / "bomb-images.gz", labels = dir / "labels";
  testing::write_bytes(labels, testing::mnist_labels(100));
  {
    gzFile f = gzopen(images.c_str(), "wb1");
    ASSERT_NE(f, nullptr);
    std::vector<uint8_t> bytes = testing::mnist_images(100, 28, 28);  // 78 KB announced
    std::vector<uint8_t> zeros(1 << 20, 0);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), int(bytes.size()));
    for (int mib = 0; mib < 256; ++mib)  // then 256 MiB that the header does not announce
      ASSERT_EQ(gzwrite(f, zeros.data(), static_cast<unsigned>(zeros.size())), int(zeros.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }
  ASSERT_LT(std::filesystem::file_size(images), 2u << 20);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  expect_data_error([&] { read_mnist(images, labels); }, images,
                    "unexpected bytes after the 100 images (78400 bytes) the header announces; "
                    "reading stopped there");
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64L << 10) << "KiB: the bomb was inflated";
}

// Three 32-bit sizes overflowed the product; a header announcing more than a data file may hold
// is refused before anything after it is read.
TEST(MnistReader, AHeaderAnnouncingTooMuchIsRefused) {
  TempDir dir("mnist_huge");
  const std::string images = dir / "images", labels = dir / "labels";
  std::vector<uint8_t> bytes = testing::mnist_images(1, 1, 1);
  for (size_t i = 4; i < 16; ++i) bytes[i] = 0xFF;  // 2^32-1 images of (2^32-1)^2 pixels
  testing::write_bytes(images, bytes);
  testing::write_bytes(labels, testing::mnist_labels(1));
  expect_data_error([&] { read_mnist(images, labels); }, images,
                    "the header announces images of shape 4294967295..., more than the 1024 MiB "
                    "limit");
}

TEST(CifarReader, RoundTripOverSeveralBatches) {
  TempDir dir("cifar");
  testing::write_bytes(dir / "a.bin", testing::cifar_batch(3, 1, 0));
  testing::write_bytes(dir / "b.bin", testing::cifar_batch(2, 1, 3));
  ImageSet set = read_cifar10({dir / "a.bin", dir / "b.bin"});
  ASSERT_EQ(set.count, 5);
  EXPECT_EQ(set.channels, 3);
  EXPECT_EQ(set.height, 32);
  EXPECT_EQ(set.width, 32);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(set.labels[i], testing::label(1, i));
    for (int64_t k : {0, 1023, 1024, 3071})
      EXPECT_EQ(set.pixels[i * 3072 + k], testing::pixel(1, i, k));
  }
}

TEST(CifarReader, ErrorsNameTheFile) {
  TempDir dir("cifar_bad");
  const std::string good = dir / "good.bin", bad = dir / "bad.bin";
  testing::write_bytes(good, testing::cifar_batch(2));

  auto bytes = testing::cifar_batch(3);
  bytes.resize(bytes.size() - 1);
  testing::write_bytes(bad, bytes);
  expect_data_error([&] { read_cifar10({good, bad}); }, bad, "3072 bytes");

  bytes = testing::cifar_batch(3);
  bytes[3073] = 17;  // label of record 1
  testing::write_bytes(bad, bytes);
  expect_data_error([&] { read_cifar10({good, bad}); }, bad, "label 17 of record 1");

  testing::write_bytes(bad, {});
  expect_data_error([&] { read_cifar10({good, bad}); }, bad, "empty");

  expect_data_error([&] { read_cifar10({good, dir / "gone.bin"}); }, dir / "gone.bin", "missing");
}

TEST(PtbReader, VocabularyFromTrainAndEosAtLineEnds) {
  TempDir dir("ptb");
  testing::write_text(dir / "train", " the cat <unk> \n the dog\n");
  testing::write_text(dir / "valid", "the bird\n");
  testing::write_text(dir / "test", "dog the");  // no final newline: still one line
  PtbCorpus c = read_ptb(dir / "train", dir / "valid", dir / "test");
  // Counts: the 2, <eos> 2, then ties by bytes: <unk>, cat, dog.
  ASSERT_EQ(c.vocabulary.size(), 5);
  EXPECT_EQ(c.vocabulary.word(0), "<eos>");
  EXPECT_EQ(c.vocabulary.word(1), "the");
  EXPECT_EQ(c.vocabulary.word(2), "<unk>");
  EXPECT_EQ(c.vocabulary.word(3), "cat");
  EXPECT_EQ(c.vocabulary.word(4), "dog");
  EXPECT_EQ(c.train, (std::vector<int32_t>{1, 3, 2, 0, 1, 4, 0}));
  EXPECT_EQ(c.valid, (std::vector<int32_t>{1, 2, 0}));  // bird -> <unk>
  EXPECT_EQ(c.test, (std::vector<int32_t>{4, 1, 0}));
}

TEST(PtbReader, ErrorsNameTheFile) {
  TempDir dir("ptb_bad");
  testing::write_text(dir / "train", "a b\nb c\n");
  testing::write_text(dir / "valid", "a\n");
  testing::write_text(dir / "test", "a b\nb zebra\n");
  expect_data_error([&] { read_ptb(dir / "train", dir / "valid", dir / "test"); }, dir / "test",
                    "line 2: word 'zebra'");
  testing::write_text(dir / "test", "a\n");
  expect_data_error([&] { read_ptb(dir / "train", dir / "valid", dir / "test", 3); }, dir / "train",
                    "vocabulary of 4 words");
  testing::write_text(dir / "train", "\n\n");
  expect_data_error([&] { read_ptb(dir / "train", dir / "valid", dir / "test"); }, dir / "train",
                    "empty");
  expect_data_error([&] { read_ptb(dir / "none", dir / "valid", dir / "test"); }, dir / "none",
                    "missing");
}

TEST(Catalog, NetworkFamilies) {
  for (const char* n : {"fcnr", "lenet", "autoencoder"})
    EXPECT_EQ(family_for_network(n), Family::mnist) << n;
  for (const char* n : {"alexnet_r", "resnet56"}) EXPECT_EQ(family_for_network(n), Family::cifar10);
  EXPECT_EQ(family_for_network("lstm_ptb"), Family::ptb);
  for (const char* n : {"fcn5", "alexnet", "resnet50", "lstm32"})
    EXPECT_FALSE(family_for_network(n).has_value()) << n;
}

TEST(Catalog, FindsFilesInTheSubdirectoryOrDirAndNamesTheMissingOne) {
  TempDir dir("catalog");
  testing::write_mnist_set(dir.path() / "mnist", 20, 10, true);
  DataFiles mnist = find_files(Family::mnist, dir.path().string());
  EXPECT_EQ(mnist.train.at(0), dir / "mnist/train-images-idx3-ubyte.gz");
  EXPECT_EQ(mnist.test.at(1), dir / "mnist/t10k-labels-idx1-ubyte.gz");

  testing::write_cifar_set(dir.path(), 2, 2);  // directly in DIR
  std::filesystem::remove(dir / "data_batch_4.bin");
  expect_data_error([&] { find_files(Family::cifar10, dir.path().string()); },
                    dir / "cifar-10-batches-bin/data_batch_4.bin", "CIFAR-10 needs this file");

  std::filesystem::remove(dir / "mnist/t10k-images-idx3-ubyte.gz");
  expect_data_error([&] { find_files(Family::mnist, dir.path().string()); },
                    dir / "mnist/t10k-images-idx3-ubyte[.gz]", "MNIST needs this file");
  expect_data_error([&] { find_files(Family::ptb, dir.path().string()); },
                    dir / "ptb/ptb.train.txt", "PTB needs this file");
}

TEST(Catalog, DataDirectoryFromSettingOrEnvironment) {
  TempDir dir("datadir");
  EXPECT_EQ(resolve_data_dir(dir.path().string()), dir.path().string());
  // "/nonexistent" said "not a directory" (issue 32).
  expect_data_error([&] { resolve_data_dir(dir / "absent"); }, dir / "absent",
                    "does not exist (the data directory)");
  testing::write_bytes(dir / "file", {1});
  expect_data_error([&] { resolve_data_dir(dir / "file"); }, dir / "file",
                    "not a directory (the data directory)");
  ::setenv("DLHOST_DATA", dir.path().c_str(), 1);
  EXPECT_EQ(resolve_data_dir(""), dir.path().string());
  ::unsetenv("DLHOST_DATA");
  expect_data_error([&] { resolve_data_dir(""); }, "$DLHOST_DATA", "unset");
}

TEST(Catalog, OpensMnistNormalizedToUnitRange) {
  TempDir dir("open_mnist");
  testing::write_mnist_set(dir.path() / "mnist", 30, 12, false);
  Dataset d = open_dataset(find_files(Family::mnist, dir.path().string()));
  EXPECT_EQ(d.classes, 10);
  ASSERT_EQ(d.train->size(), 30);
  ASSERT_EQ(d.test->size(), 12);
  EXPECT_EQ(d.train->layout().sample_shape, (std::vector<int64_t>{1, 28, 28}));
  Batch b(d.train->layout(), 2, HostAllocator::aligned());
  d.train->fill(7, b, 1);
  EXPECT_FLOAT_EQ(b.features.data()[784 + 5], testing::pixel(1, 7, 5) / 255.0f);
  EXPECT_EQ(b.targets.data()[1], testing::label(1, 7));
}

TEST(Catalog, RefusesTestImagesOfAnotherShape) {
  TempDir dir("mnist_shapes");
  testing::write_mnist_set(dir.path(), 10, 10, false);
  testing::write_bytes(dir / "t10k-images-idx3-ubyte", testing::mnist_images(10, 14, 14));
  expect_data_error([&] { open_dataset(find_files(Family::mnist, dir.path().string())); },
                    dir / "t10k-images-idx3-ubyte", "14x14 but the training images are 28x28");
}

TEST(Catalog, OpensCifarWithPerChannelStandardization) {
  TempDir dir("open_cifar");
  testing::write_cifar_set(dir.path() / "cifar-10-batches-bin", 4, 3);
  Dataset d = open_dataset(find_files(Family::cifar10, dir.path().string()));
  ASSERT_EQ(d.train->size(), 20);
  ASSERT_EQ(d.test->size(), 3);
  Batch b(d.train->layout(), 1, HostAllocator::aligned());
  d.train->fill(13, b, 0);  // record 1 of data_batch_4
  const Normalization n = Normalization::cifar10();
  for (int64_t c = 0; c < 3; ++c) {
    const int64_t k = c * 1024 + 77;
    EXPECT_FLOAT_EQ(b.features.data()[k],
                    (testing::pixel(1, 13, k) / 255.0f - n.mean[c]) / n.stddev[c]);
  }
  EXPECT_EQ(b.targets.data()[0], testing::label(1, 13));
}

TEST(Normalization, MeasuredPerChannel) {
  ImageSet set;
  set.count = 2;
  set.channels = 2;
  set.height = 1;
  set.width = 2;
  set.pixels = {0, 255, 51, 51, 255, 0, 51, 51};  // channel 0: 0 or 1; channel 1: 0.2 always
  Normalization n = Normalization::measured(set);
  ASSERT_EQ(n.mean.size(), 2u);
  EXPECT_NEAR(n.mean[0], 0.5, 1e-6);
  EXPECT_NEAR(n.stddev[0], 0.5, 1e-6);
  EXPECT_NEAR(n.mean[1], 0.2, 1e-6);
  EXPECT_EQ(n.stddev[1], 1.0f);  // constant channel: no division by zero
}

TEST(Catalog, OpensPtbAsSequences) {
  TempDir dir("open_ptb");
  testing::write_text(dir / "ptb/ptb.train.txt", "a b c d e f g\n");  // 8 tokens
  testing::write_text(dir / "ptb/ptb.valid.txt", "a\n");
  testing::write_text(dir / "ptb/ptb.test.txt", "g f\n");
  OpenOptions o;
  o.steps = 3;
  Dataset d = open_dataset(find_files(Family::ptb, dir.path().string()), o);
  EXPECT_EQ(d.classes, 8);
  EXPECT_EQ(d.train->size(), 2);  // (8 - 1) / 3 windows
  EXPECT_EQ(d.test->size(), 0);   // 3 tokens: no full window of 3 with its targets
  Batch b(d.train->layout(), 2, HostAllocator::aligned());
  d.train->fill(1, b, 0);
  d.train->fill(0, b, 1);
  // Tokens a..g,<eos> have ids by count (<eos> 1 like the rest: ties by bytes, '<' < 'a').
  EXPECT_EQ(std::vector<int32_t>(b.ids.data(), b.ids.data() + 6),
            (std::vector<int32_t>{4, 5, 6, 1, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(b.targets.data(), b.targets.data() + 6),
            (std::vector<int32_t>{5, 6, 7, 2, 3, 4}));
}

}  // namespace
}  // namespace dlhost::data
