// catalog.h — which real data set each network trains on, which files it needs under a data
// directory, and opening them as train/test SampleSources. Nothing is downloaded: the files
// must already be there (docs/data.md says where). Thread-safe (no shared state).
//
// Layout under DIR (the names of the official downloads, gzip or not for MNIST):
//   DIR/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
//   DIR/cifar-10-batches-bin/data_batch_{1..5}.bin, test_batch.bin
//   DIR/ptb/ptb.{train,valid,test}.txt
// Each family's files may also sit directly in DIR.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/source.h"

namespace dlhost::data {

enum class Family { mnist, cifar10, ptb };

const char* family_name(Family family);  // "MNIST", "CIFAR-10", "PTB"

// MNIST for fcnr, lenet, autoencoder; CIFAR-10 for alexnet_r, resnet56; PTB for lstm_ptb;
// nullopt for the synthetic-only networks.
std::optional<Family> family_for_network(std::string_view network);

// The data directory of `data: DIR` (setting as written; "" means $DLHOST_DATA). Throws
// DataError when it is unset or not a directory.
std::string resolve_data_dir(const std::string& setting);

// The files of one family, found under `dir`: train and test paths in reading order (for MNIST
// images then labels; for PTB train, valid, test, all in `train`, as the vocabulary needs all).
// Throws DataError naming the first missing file (the path where it was expected) and the family.
struct DataFiles {
  Family family;
  std::string dir;
  std::vector<std::string> train, test;
};
DataFiles find_files(Family family, const std::string& dir);

struct OpenOptions {
  int64_t steps = 32;                          // PTB: words per sequence
  int32_t max_vocabulary = 0;                  // PTB: the network's vocabulary (0: no check)
  std::optional<Normalization> normalization;  // images: the family's default when unset
};

// A data set opened for a run: the training split, the test split (PTB: the test text, with the
// training vocabulary), and the number of classes or words the network must have.
struct Dataset {
  Family family;
  std::shared_ptr<const SampleSource> train, test;
  int32_t classes = 0;  // MNIST/CIFAR-10: 10; PTB: the vocabulary size
  std::vector<std::string> files;
};
Dataset open_dataset(const DataFiles& files, const OpenOptions& options = {});

}  // namespace dlhost::data
