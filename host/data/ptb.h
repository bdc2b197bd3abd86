// ptb.h — the Penn Treebank language-model text (ptb.train.txt, ptb.valid.txt, ptb.test.txt as
// in Mikolov's simple-examples/data): words split on whitespace, "<eos>" appended at the end of
// every line (the standard PTB LM setup of Zaremba et al. and TensorFlow's ptb reader), the
// vocabulary built from the training split only. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlhost::data {

inline constexpr const char* kEndOfSentence = "<eos>";
inline constexpr const char* kUnknownWord = "<unk>";

// Word ids by decreasing count in the training text, ties by the word's bytes (TensorFlow's
// ptb_reader order), so id 0 is the most frequent word and the numbering is reproducible.
class Vocabulary {
 public:
  static Vocabulary from_counts(const std::unordered_map<std::string, int64_t>& counts);

  int32_t size() const { return static_cast<int32_t>(words_.size()); }
  const std::string& word(int32_t id) const { return words_.at(static_cast<size_t>(id)); }
  // -1 when the word is not in the vocabulary.
  int32_t id(const std::string& word) const;

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;
};

struct PtbCorpus {
  Vocabulary vocabulary;
  std::vector<int32_t> train, valid, test;  // one id per token, <eos> included
  std::vector<std::string> files;           // train, valid, test
};

// Reads the three splits. A valid/test word missing from the training vocabulary becomes <unk>
// when the vocabulary has it (it does in PTB, whose text already carries <unk>) and is an error
// naming the file, line and word otherwise. `max_vocabulary` (0: no limit) is the size of the
// network's embedding; a larger vocabulary is an error naming the training file.
PtbCorpus read_ptb(const std::string& train_path, const std::string& valid_path,
                   const std::string& test_path, int32_t max_vocabulary = 0);

}  // namespace dlhost::data
