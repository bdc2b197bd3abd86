// skipped_cases.cpp — see skipped_cases.h.
#include "console/skipped_cases.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "suite/case_names.h"

namespace dlhost {

namespace {

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.';
}

// How many values a line lists before it says how many there are in all.
constexpr size_t kValuesListed = 6;

std::string values_text(const std::vector<std::string>& values) {
  std::string out;
  const size_t shown = values.size() <= kValuesListed ? values.size() : kValuesListed - 1;
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + values[i];
  if (shown < values.size()) out += ", ... " + std::to_string(values.size()) + " in all";
  return out;
}

// The shape's text with each "#" given back its numbers: the one value, or "min..max".
std::string folded_reason(const std::string& shape, const std::vector<ReasonShape>& shapes) {
  std::string out;
  size_t slot = 0;
  for (char c : shape) {
    if (c != '#') {
      out += c;
      continue;
    }
    long long lo = shapes.front().numbers[slot], hi = lo;
    for (const ReasonShape& s : shapes) {
      lo = std::min(lo, s.numbers[slot]);
      hi = std::max(hi, s.numbers[slot]);
    }
    out += lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
    ++slot;
  }
  return out;
}

}  // namespace

ReasonShape reason_shape(const std::string& reason) {
  ReasonShape s;
  for (size_t i = 0; i < reason.size();) {
    const bool starts = std::isdigit(static_cast<unsigned char>(reason[i])) != 0 &&
                        (i == 0 || !word_char(reason[i - 1]));
    size_t end = i;
    while (starts && end < reason.size() && std::isdigit(static_cast<unsigned char>(reason[end])))
      ++end;
    // A whole number: not followed by a letter, a digit or a decimal part ("2 cores", "cores.").
    const bool whole =
        starts && end - i <= 15 &&
        (end == reason.size() || !word_char(reason[end]) ||
         (reason[end] == '.' && (end + 1 == reason.size() ||
                                 !std::isdigit(static_cast<unsigned char>(reason[end + 1])))));
    if (whole) {
      s.numbers.push_back(std::stoll(reason.substr(i, end - i)));
      s.text += '#';
      i = end;
    } else {
      s.text += reason[i++];
    }
  }
  return s;
}

std::vector<std::string> folded_skip_lines(const std::vector<KnownSkip>& skips) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> by_shape;
  std::vector<ReasonShape> shapes;
  for (size_t i = 0; i < skips.size(); ++i) {
    shapes.push_back(reason_shape(skips[i].reason));
    auto [it, fresh] = by_shape.try_emplace(shapes.back().text);
    if (fresh) order.push_back(shapes.back().text);
    it->second.push_back(i);
  }
  std::vector<std::string> lines;
  for (const std::string& shape : order) {
    const std::vector<size_t>& members = by_shape[shape];
    std::vector<ReasonShape> member_shapes;
    std::vector<nlohmann::ordered_json> params;
    for (size_t i : members) {
      member_shapes.push_back(shapes[i]);
      params.push_back(skips[i].params);
    }
    std::string line = "SKIPPED " + std::to_string(members.size()) +
                       (members.size() == 1 ? " case: " : " cases: ") +
                       folded_reason(shape, member_shapes) + " (";
    if (members.size() == 1) {
      line += skips[members.front()].name;
    } else {
      std::string keys;
      for (const VaryingKey& k : varying_keys(params))
        keys += (keys.empty() ? "" : "; ") + k.key + ": " + values_text(k.values);
      line += keys;
    }
    lines.push_back(line + ")");
  }
  return lines;
}

}  // namespace dlhost
