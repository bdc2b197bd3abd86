// catalog.cpp — see catalog.h.
#include "data/catalog.h"

#include <cstdlib>
#include <filesystem>

#include "data/error.h"
#include "data/images.h"
#include "data/ptb.h"

namespace dlhost::data {

namespace fs = std::filesystem;

namespace {

struct Layout {
  const char* subdir;
  std::vector<const char*> train, test;
};

Layout layout_of(Family family) {
  switch (family) {
    case Family::mnist:
      return {"mnist",
              {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
              {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
    case Family::cifar10:
      return {"cifar-10-batches-bin",
              {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
               "data_batch_5.bin"},
              {"test_batch.bin"}};
    case Family::ptb:
      return {"ptb", {"ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"}, {}};
  }
  return {};
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// `name` (or, for MNIST, `name`.gz) in DIR/subdir, else in DIR.
std::string find_one(Family family, const fs::path& dir, const char* subdir, const char* name) {
  const bool gz_too = family == Family::mnist;
  for (const fs::path& where : {dir / subdir, dir}) {
    if (is_file(where / name)) return (where / name).string();
    if (gz_too && is_file(where / (std::string(name) + ".gz")))
      return (where / (std::string(name) + ".gz")).string();
  }
  std::string expected = (dir / subdir / name).string() + (gz_too ? "[.gz]" : "");
  throw DataError(expected, std::string("missing: ") + family_name(family) +
                                " needs this file (looked in " + (dir / subdir).string() + " and " +
                                dir.string() + "; nothing is downloaded)");
}

}  // namespace

const char* family_name(Family family) {
  switch (family) {
    case Family::mnist:
      return "MNIST";
    case Family::cifar10:
      return "CIFAR-10";
    case Family::ptb:
      return "PTB";
  }
  return "?";
}

std::optional<Family> family_for_network(std::string_view network) {
  if (network == "fcnr" || network == "lenet" || network == "autoencoder") return Family::mnist;
  if (network == "alexnet_r" || network == "resnet56") return Family::cifar10;
  if (network == "lstm_ptb") return Family::ptb;
  return std::nullopt;
}

std::string resolve_data_dir(const std::string& setting) {
  std::string dir = setting;
  if (dir.empty()) {
    const char* env = std::getenv("DLHOST_DATA");
    if (!env || !*env)
      throw DataError("$DLHOST_DATA",
                      "unset: give the data directory as `data: DIR` or set "
                      "DLHOST_DATA (see docs/data.md)");
    dir = env;
  }
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) throw DataError(dir, "does not exist (the data directory)");
  if (!fs::is_directory(st)) throw DataError(dir, "not a directory (the data directory)");
  return dir;
}

DataFiles find_files(Family family, const std::string& dir) {
  const Layout layout = layout_of(family);
  DataFiles files{family, dir, {}, {}};
  for (const char* name : layout.train)
    files.train.push_back(find_one(family, dir, layout.subdir, name));
  for (const char* name : layout.test)
    files.test.push_back(find_one(family, dir, layout.subdir, name));
  return files;
}

Dataset open_dataset(const DataFiles& files, const OpenOptions& options) {
  Dataset d{files.family, nullptr, nullptr, 0, {}};
  if (files.family == Family::ptb) {
    auto corpus =
        read_ptb(files.train.at(0), files.train.at(1), files.train.at(2), options.max_vocabulary);
    d.classes = corpus.vocabulary.size();
    d.train = std::make_shared<SequenceSource>(
        std::make_shared<const std::vector<int32_t>>(std::move(corpus.train)), options.steps,
        "PTB train");
    d.test = std::make_shared<SequenceSource>(
        std::make_shared<const std::vector<int32_t>>(std::move(corpus.test)), options.steps,
        "PTB test");
    d.files = corpus.files;
    return d;
  }
  const bool mnist = files.family == Family::mnist;
  auto read = [&](const std::vector<std::string>& paths) {
    return std::make_shared<const ImageSet>(mnist ? read_mnist(paths.at(0), paths.at(1))
                                                  : read_cifar10(paths));
  };
  auto train = read(files.train), test = read(files.test);
  if (test->sample_bytes() != train->sample_bytes() || test->height != train->height)
    throw DataError(test->files.at(0),
                    "images are " + std::to_string(test->height) + "x" +
                        std::to_string(test->width) + " but the training images are " +
                        std::to_string(train->height) + "x" + std::to_string(train->width));
  const Normalization norm = options.normalization.value_or(mnist ? Normalization::unit_range(1)
                                                                  : Normalization::cifar10());
  d.classes = train->classes;
  d.files = train->files;
  d.files.insert(d.files.end(), test->files.begin(), test->files.end());
  d.train =
      std::make_shared<ImageSource>(train, norm, std::string(family_name(files.family)) + " train");
  d.test =
      std::make_shared<ImageSource>(test, norm, std::string(family_name(files.family)) + " test");
  return d;
}

}  // namespace dlhost::data
