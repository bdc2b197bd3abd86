// ptb.cpp — see ptb.h.
#include "data/ptb.h"

#include <algorithm>
#include <sstream>

#include "data/error.h"
#include "data/file_bytes.h"

namespace dlhost::data {

namespace {

// Calls on_word(word, line_number) for every token of the text, <eos> after every line
// (including a last line without a trailing newline, as Python's readlines-based readers do).
template <typename OnWord>
void for_each_token(const std::vector<uint8_t>& bytes, OnWord on_word) {
  std::string text(bytes.begin(), bytes.end());
  std::istringstream lines(text);
  std::string line, word;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::istringstream words(line);
    while (words >> word) on_word(word, number);
    on_word(kEndOfSentence, number);
  }
}

std::vector<int32_t> to_ids(const std::string& path, const std::vector<uint8_t>& bytes,
                            const Vocabulary& vocabulary) {
  const int32_t unknown = vocabulary.id(kUnknownWord);
  std::vector<int32_t> ids;
  for_each_token(bytes, [&](const std::string& word, int64_t line) {
    int32_t id = vocabulary.id(word);
    if (id < 0 && unknown < 0)
      throw DataError(path, "line " + std::to_string(line) + ": word '" + word +
                                "' is not in the training vocabulary, which has no <unk>");
    ids.push_back(id < 0 ? unknown : id);
  });
  if (ids.empty()) throw DataError(path, "empty (no words)");
  return ids;
}

}  // namespace

Vocabulary Vocabulary::from_counts(const std::unordered_map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  Vocabulary v;
  for (auto& [word, count] : sorted) {
    v.ids_.emplace(word, static_cast<int32_t>(v.words_.size()));
    v.words_.push_back(word);
  }
  return v;
}

int32_t Vocabulary::id(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? -1 : it->second;
}

PtbCorpus read_ptb(const std::string& train_path, const std::string& valid_path,
                   const std::string& test_path, int32_t max_vocabulary) {
  PtbCorpus corpus;
  std::vector<uint8_t> train = read_file_bytes(train_path);
  std::unordered_map<std::string, int64_t> counts;
  int64_t tokens = 0;
  for_each_token(train, [&](const std::string& word, int64_t) {
    ++counts[word];
    ++tokens;
  });
  if (tokens == 0 || tokens == counts[kEndOfSentence])
    throw DataError(train_path, "empty (no words)");
  corpus.vocabulary = Vocabulary::from_counts(counts);
  if (max_vocabulary > 0 && corpus.vocabulary.size() > max_vocabulary)
    throw DataError(train_path, "vocabulary of " + std::to_string(corpus.vocabulary.size()) +
                                    " words is larger than the network's " +
                                    std::to_string(max_vocabulary) + " (PTB has 10000)");
  corpus.train = to_ids(train_path, train, corpus.vocabulary);
  corpus.valid = to_ids(valid_path, read_file_bytes(valid_path), corpus.vocabulary);
  corpus.test = to_ids(test_path, read_file_bytes(test_path), corpus.vocabulary);
  corpus.files = {train_path, valid_path, test_path};
  return corpus;
}

}  // namespace dlhost::data
