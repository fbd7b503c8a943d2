// SPDX-License-Identifier: MIT

#include "codes.hpp"

#include "common/parse.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace shard_plan {

namespace {

std::string read_file(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) examples::bad_argument("--codes: cannot open {:?}: {}", path, std::generic_category().message(errno));
  std::string text;
  char buffer[1 << 16];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0;) text.append(buffer, n);
  if (std::ferror(file.get()) != 0)
    examples::bad_argument("--codes: cannot read {:?}: {}", path, std::generic_category().message(errno));
  return text;
}

// The records of a CSV text, one at a time: fields separated by commas, records by newlines (a
// carriage return before one is dropped), a field in double quotes may hold both, and "" for a quote.
class CsvReader {
 public:
  CsvReader(const std::string& path, std::string_view text) : path_(path), text_(text) {
    if (text_.starts_with("\xEF\xBB\xBF")) text_.remove_prefix(3);  // a UTF-8 byte order mark
  }

  // The next record's fields, or false at the end of the text. The fields view the text, or the
  // reader's storage for quoted ones; they last until the next call.
  bool next(std::vector<std::string_view>& fields) {
    if (at_ >= text_.size()) return false;
    ++line_;
    fields.clear();
    unquoted_.clear();
    for (;;) {
      fields.push_back(field());
      if (at_ >= text_.size()) return true;
      const char c = text_[at_++];
      if (c == '\n') return true;
      if (c == '\r' && (at_ == text_.size() || text_[at_] == '\n')) {
        if (at_ < text_.size()) ++at_;
        return true;
      }
      if (c != ',')
        examples::bad_argument("--codes: {} line {}: a quoted field must end at a comma or the line's end", path_,
                               line_);
    }
  }
  [[nodiscard]] std::int64_t line() const noexcept { return line_; }

 private:
  std::string_view field() {
    if (at_ >= text_.size() || text_[at_] != '"') {
      const std::size_t end = std::min(text_.find_first_of(",\n", at_), text_.size());
      std::string_view value = text_.substr(at_, end - at_);
      at_ = end;
      if (value.ends_with('\r') && (at_ == text_.size() || text_[at_] == '\n')) value.remove_suffix(1);
      return value;
    }
    const std::int64_t start_line = line_;
    std::string& value = unquoted_.emplace_back();
    for (++at_;; ++at_) {
      if (at_ >= text_.size())
        examples::bad_argument("--codes: {} line {}: a quoted field is not closed", path_, start_line);
      const char c = text_[at_];
      if (c == '"') {
        if (at_ + 1 < text_.size() && text_[at_ + 1] == '"') {
          value += '"';
          ++at_;
          continue;
        }
        ++at_;
        return value;
      }
      if (c == '\n') ++line_;
      value += c;
    }
  }

  const std::string& path_;
  std::string_view text_;
  std::size_t at_ = 0;
  std::int64_t line_ = 0;
  std::deque<std::string> unquoted_;  // quoted fields, unescaped: a deque, so that growing keeps the views valid
};

// One column's codes: a category's code is its rank of first appearance.
class ColumnCoder {
 public:
  std::int32_t code(std::string_view value) {
    if (value.empty()) return -1;
    if (value == last_) return last_code_;  // data grouped on disk repeats a value row after row
    auto at = index_.find(value);
    if (at == index_.end()) {
      if (categories_.size() == static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
        examples::bad_argument("--codes: a column has more than 2^31 - 1 categories");
      categories_.emplace_back(value);
      at = index_.emplace(categories_.back(), static_cast<std::int32_t>(categories_.size() - 1)).first;
    }
    last_ = at->first;
    last_code_ = at->second;
    return last_code_;
  }
  [[nodiscard]] std::vector<std::string> categories() const { return {categories_.begin(), categories_.end()}; }

 private:
  std::deque<std::string> categories_;  // stable: the index views them
  std::unordered_map<std::string_view, std::int32_t> index_;
  std::string_view last_;
  std::int32_t last_code_ = -1;
};

}  // namespace

CodesFile read_codes(const std::string& path, const std::vector<std::string>& groupby) {
  const std::string text = read_file(path);
  CsvReader csv(path, text);
  std::vector<std::string_view> fields;
  if (!csv.next(fields)) examples::bad_argument("--codes: {:?} is empty; it needs a header row of column names", path);
  const std::vector<std::string> header(fields.begin(), fields.end());
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i].empty()) examples::bad_argument("--codes: {} column {} has no name", path, i + 1);
    for (std::size_t j = 0; j < i; ++j)
      if (header[j] == header[i]) examples::bad_argument("--codes: {} names two columns {:?}", path, header[i]);
  }
  // The columns read: --groupby's, in its order, or all.
  std::vector<std::size_t> picked;
  for (const std::string& name : groupby) {
    const auto at = std::find(header.begin(), header.end(), name);
    if (at == header.end())
      examples::bad_argument("--groupby: {} has no column {:?} (its columns: {})", path, name, fmt::join(header, ", "));
    const auto index = static_cast<std::size_t>(at - header.begin());
    if (std::find(picked.begin(), picked.end(), index) != picked.end())
      examples::bad_argument("--groupby: column {:?} is named twice", name);
    picked.push_back(index);
  }
  if (groupby.empty())
    for (std::size_t i = 0; i < header.size(); ++i) picked.push_back(i);

  std::vector<ColumnCoder> coders(picked.size());
  CodesFile file;
  file.codes.resize(picked.size());
  while (csv.next(fields)) {
    if (fields.size() != header.size())
      examples::bad_argument("--codes: {} line {} has {} field{}, the header has {}", path, csv.line(), fields.size(),
                             fields.size() == 1 ? "" : "s", header.size());
    for (std::size_t c = 0; c < picked.size(); ++c) file.codes[c].push_back(coders[c].code(fields[picked[c]]));
    ++file.rows;
  }
  if (file.rows == 0) examples::bad_argument("--codes: {} has a header but no rows", path);
  for (std::size_t c = 0; c < picked.size(); ++c) {
    file.names.push_back(header[picked[c]]);
    file.categories.push_back(coders[c].categories());
  }
  return file;
}

Options with_split(Options o) {
  const CodesFile file = read_codes(*o.codes, o.groupby);
  if (o.n_obs_given && o.n_obs != file.rows)
    examples::bad_argument("--codes: {} has {} rows, --n-obs is {}; a row per observation (or leave --n-obs out)",
                           *o.codes, file.rows, o.n_obs);
  o.n_obs = file.rows;
  std::vector<cs::CategoryColumn> columns;
  for (std::size_t c = 0; c < file.names.size(); ++c)
    columns.emplace_back(file.names[c], file.codes[c], file.categories[c]);
  // A key is one --select, its values comma-separated, one per column.
  std::vector<cs::CategoryKey> keys;
  for (const std::string& text : o.select) {
    cs::CategoryKey& key = keys.emplace_back();
    for (std::size_t at = 0;;) {
      const std::size_t comma = std::min(text.find(',', at), text.size());
      key.emplace_back(text.substr(at, comma - at));
      if (comma == text.size()) break;
      at = comma + 1;
    }
  }
  const cs::Split split =
      cs::split_mask(columns, keys, {.chunk_size = o.chunk_size, .max_short_share = o.max_short_share});
  o.mask = split.mask;
  o.split = split.report;
  o.split_columns = file.names;
  return o;
}

}  // namespace shard_plan
