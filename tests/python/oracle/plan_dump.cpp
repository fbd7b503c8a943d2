// SPDX-License-Identifier: MIT
// plan_dump: the C++ oracle of tests/python/test_oracle.py. It makes one sampler from `key=value`
// arguments, plays `epochs` epochs from `epoch` and prints every request as one JSON line:
//   {"epoch": E, "chunks": [[start, stop], ...], "splits": [[position, ...], ...], "state": "..."}
// where "state" is the sampler's state text after that request's batches. The Python package must
// print the same, request for request, for the same configuration and seed; the two share the
// headers, not the code that calls them, so a binding that passes an option wrongly is caught.
//
//   plan_dump sampler=random n_obs=1000 chunk_size=10 preload_nchunks=2 batch_size=5 seed=7
//             world_size=3 rank=1 mode=global remainder=pad epochs=2   (one command line)
//
// Keys: sampler (random, sequential, class, weighted, mixture), n_obs, chunk_size, preload_nchunks,
// batch_size, drop_last (0/1), mask (ranges START:STOP or START:, by commas), seed, replacement (0/1), num_samples,
// codes and class_weights (comma lists, class and weighted), composition (independent, stratified;
// weighted), sizes, weights (comma lists) and temperature (mixture); world_size makes it a DistributedSampler with
// rank, mode (contiguous, global), remainder (drop, pad, rotate), enforce_equal_batches (0/1); epoch, epochs, worker,
// num_workers. sampler=split instead runs cs::split_mask over the columns named by `columns` (by commas), each with
// codes.NAME, dtype.NAME (int8, int16, int32 or int64, the default) and categories.NAME (names by commas; none by
// default), chunk_size and max_short_share; select holds the keys, by
// ';', each its values by ',' (#CODE a code, else a name); one_column=1 calls the one-column
// form (the first column; each key one value). It prints one JSON line:
//   {"ranges": [[start, stop], ...], "report": [runs, rows, short_runs, short_rows, short_share]}
// Exit status: 0, or 2 with one line on stderr for a bad argument or a refused configuration.

#include <chunksampler/class_sampler.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/load_request.hpp>
#include <chunksampler/mixture_sampler.hpp>
#include <chunksampler/random_sampler.hpp>
#include <chunksampler/sequential_sampler.hpp>
#include <chunksampler/slice.hpp>
#include <chunksampler/split.hpp>
#include <chunksampler/weighted_class_sampler.hpp>
#include <chunksampler/worker_info.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace cs = chunksampler;

class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg(argv[i]);
      const std::size_t eq = arg.find('=');
      if (eq == std::string_view::npos) throw std::invalid_argument(fmt::format("argument {:?} is not key=value", arg));
      values_[std::string(arg.substr(0, eq))] = std::string(arg.substr(eq + 1));
    }
  }

  [[nodiscard]] std::optional<std::string> get(const std::string& key) {
    const auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    std::string value = it->second;
    values_.erase(it);
    return value;
  }
  [[nodiscard]] std::string text(const std::string& key, const std::string& fallback) {
    return get(key).value_or(fallback);
  }
  [[nodiscard]] std::optional<std::int64_t> optional_int(const std::string& key) {
    const std::optional<std::string> value = get(key);
    if (!value) return std::nullopt;
    return integer(key, *value);
  }
  [[nodiscard]] std::int64_t integer(const std::string& key, std::int64_t fallback) {
    return optional_int(key).value_or(fallback);
  }
  [[nodiscard]] bool flag(const std::string& key) { return integer(key, 0) != 0; }
  [[nodiscard]] std::uint64_t seed() {
    const std::optional<std::string> value = get("seed");
    return value ? std::stoull(*value) : cs::default_seed;
  }
  [[nodiscard]] std::vector<std::int64_t> integers(const std::string& key) {
    std::vector<std::int64_t> out;
    for (const std::string& item : items(key)) out.push_back(integer(key, item));
    return out;
  }
  [[nodiscard]] std::vector<double> reals(const std::string& key) {
    std::vector<double> out;
    for (const std::string& item : items(key)) out.push_back(std::stod(item));
    return out;
  }
  // The ranges as given, unchecked: cs::Ranges checks them, as the binding's do.
  [[nodiscard]] std::optional<std::vector<cs::Slice>> ranges() {
    if (!values_.contains("mask")) return std::nullopt;
    std::vector<cs::Slice> out;
    for (const std::string& range : items("mask")) {
      const std::size_t colon = range.find(':');
      if (colon == std::string::npos)
        throw std::invalid_argument("mask must be START:STOP or START: ranges, by commas");
      const std::int64_t start = integer("mask", range.substr(0, colon));
      if (colon + 1 == range.size()) out.push_back(cs::Slice::from(start));
      else out.push_back(cs::Slice{start, integer("mask", range.substr(colon + 1))});
    }
    return out;
  }
  [[nodiscard]] std::optional<cs::Ranges> mask() {
    const std::optional<std::vector<cs::Slice>> given = ranges();
    if (!given) return std::nullopt;
    return cs::Ranges(*given);
  }
  [[nodiscard]] std::vector<std::string> list(const std::string& key, char separator = ',') {
    return items(key, separator);
  }
  // Every key was read: a misspelt one is an error, not a default.
  void check_all_used() const {
    if (!values_.empty()) throw std::invalid_argument(fmt::format("unknown key {:?}", values_.begin()->first));
  }

 private:
  [[nodiscard]] static std::int64_t integer(const std::string& key, const std::string& text) {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used != text.size()) throw std::invalid_argument(fmt::format("{}: {:?} is not an integer", key, text));
    return value;
  }
  [[nodiscard]] std::vector<std::string> items(const std::string& key, char separator = ',') {
    std::vector<std::string> out;
    const std::string list = text(key, "");
    std::size_t from = 0;
    while (from < list.size()) {
      const std::size_t comma = std::min(list.find(separator, from), list.size());
      out.push_back(list.substr(from, comma - from));
      from = comma + 1;
    }
    return out;
  }

  std::map<std::string, std::string> values_;
};

void print_request(std::uint64_t epoch, const cs::LoadRequest& request, const std::string& state) {
  std::string line = fmt::format("{{\"epoch\":{},\"chunks\":[", epoch);
  for (std::size_t c = 0; c < request.chunks.size(); ++c)
    fmt::format_to(std::back_inserter(line), "{}[{},{}]", c == 0 ? "" : ",", request.chunks[c].start,
                   request.chunks[c].stop);
  line += "],\"splits\":[";
  for (std::size_t b = 0; b < request.splits.size(); ++b)
    fmt::format_to(std::back_inserter(line), "{}[{}]", b == 0 ? "" : ",",
                   fmt::join(request.splits[static_cast<std::ptrdiff_t>(b)], ","));
  fmt::format_to(std::back_inserter(line), "],\"state\":\"{}\"}}\n", state);
  std::fputs(line.c_str(), stdout);
}

// Plays the epochs of `sampler` (set to `first` first) and prints them.
template <class S>
void dump(S& sampler, std::int64_t n_obs, std::uint64_t first, std::int64_t epochs, cs::WorkerInfo worker) {
  sampler.set_epoch(first);
  for (std::int64_t e = 0; e < epochs; ++e) {
    const std::uint64_t epoch = sampler.epoch();
    std::int64_t done = 0;
    for (const cs::LoadRequest& request : sampler.sample(n_obs, worker)) {
      done += static_cast<std::int64_t>(request.splits.size());
      print_request(epoch, request, sampler.state(done).to_string());
    }
  }
}

struct Job {
  std::int64_t n_obs = 0;
  std::uint64_t epoch = 0;
  std::int64_t epochs = 1;
  cs::WorkerInfo worker;
  std::optional<cs::DistInfo> dist;
  cs::DistributedOptions dist_options;
};

template <class S>
void run(const S& sampler, const Job& job) {
  if (job.dist) {
    cs::DistributedSampler<S> distributed(sampler, *job.dist, job.dist_options);
    dump(distributed, job.n_obs, job.epoch, job.epochs, job.worker);
  } else {
    S plain = sampler;
    dump(plain, job.n_obs, job.epoch, job.epochs, job.worker);
  }
}

// One column's codes, in the integer type the Python side passes them in.
struct Codes {
  std::vector<std::int8_t> i8;
  std::vector<std::int16_t> i16;
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;

  template <class T>
  cs::CategoryColumn column(std::vector<T>& into, const std::string& name, const std::vector<std::int64_t>& codes,
                            std::vector<std::string> categories) {
    for (const std::int64_t code : codes) into.push_back(static_cast<T>(code));
    return {name, into, std::move(categories)};
  }
};

// sampler=split: cs::split_mask, printed as {"ranges": [[start, stop], ...], "report": [runs,
// rows, short_runs, short_rows, short_share]}.
void run_split(Args& args) {
  const std::vector<std::string> names = args.list("columns");
  std::vector<Codes> storage(names.size());  // sized once: the columns view it
  std::vector<cs::CategoryColumn> columns;
  for (std::size_t c = 0; c < names.size(); ++c) {
    const std::string& name = names[c];
    const std::vector<std::int64_t> codes = args.integers("codes." + name);
    std::vector<std::string> categories = args.list("categories." + name);
    const std::string type = args.text("dtype." + name, "int64");
    Codes& into = storage[c];
    if (type == "int8") columns.push_back(into.column(into.i8, name, codes, std::move(categories)));
    else if (type == "int16") columns.push_back(into.column(into.i16, name, codes, std::move(categories)));
    else if (type == "int32") columns.push_back(into.column(into.i32, name, codes, std::move(categories)));
    else if (type == "int64") columns.push_back(into.column(into.i64, name, codes, std::move(categories)));
    else throw std::invalid_argument(fmt::format("dtype.{} must be int8, int16, int32 or int64", name));
  }
  std::vector<cs::CategoryKey> keys;
  for (const std::string& key : args.list("select", ';')) {
    cs::CategoryKey values;
    std::size_t from = 0;
    while (from <= key.size()) {
      const std::size_t comma = std::min(key.find(',', from), key.size());
      const std::string value = key.substr(from, comma - from);
      if (value.starts_with('#')) values.emplace_back(std::stoll(value.substr(1)));
      else values.emplace_back(value);
      from = comma + 1;
    }
    keys.push_back(std::move(values));
  }
  const bool one_column = args.flag("one_column");
  const std::optional<std::string> share = args.get("max_short_share");
  const cs::SplitOptions options{.chunk_size = args.integer("chunk_size", 0),
                                 .max_short_share = share ? std::optional<double>(std::stod(*share)) : std::nullopt};
  args.check_all_used();
  std::vector<cs::CategoryValue> values;
  if (one_column)
    for (const cs::CategoryKey& key : keys) values.push_back(key.at(0));
  const cs::Split split =
      one_column ? cs::split_mask(columns.at(0), values, options) : cs::split_mask(columns, keys, options);
  std::string line = "{\"ranges\":[";
  for (std::size_t i = 0; i < split.mask.size(); ++i)
    fmt::format_to(std::back_inserter(line), "{}[{},{}]", i == 0 ? "" : ",", split.mask[i].start, split.mask[i].stop);
  const cs::SplitReport& r = split.report;
  fmt::format_to(std::back_inserter(line), "],\"report\":[{},{},{},{},{}]}}\n", r.runs, r.rows, r.short_runs,
                 r.short_rows, r.short_share);
  std::fputs(line.c_str(), stdout);
}

void run(Args& args) {
  const std::string kind = args.text("sampler", "random");
  if (kind == "split") {
    run_split(args);
    return;
  }
  const std::int64_t chunk_size = args.integer("chunk_size", 0);
  const std::int64_t preload_nchunks = args.integer("preload_nchunks", 0);
  const std::int64_t batch_size = args.integer("batch_size", 0);
  const bool drop_last = args.flag("drop_last");

  Job job;
  job.n_obs = args.integer("n_obs", 0);
  job.epoch = static_cast<std::uint64_t>(args.integer("epoch", 0));
  job.epochs = args.integer("epochs", 1);
  job.worker = {.id = args.integer("worker", 0), .num_workers = args.integer("num_workers", 1)};
  if (const std::optional<std::int64_t> world = args.optional_int("world_size")) {
    job.dist = cs::DistInfo{.rank = args.integer("rank", 0), .world_size = *world};
    const std::string mode = args.text("mode", "contiguous");
    const std::string remainder = args.text("remainder", "drop");
    if (mode != "contiguous" && mode != "global") throw std::invalid_argument("mode must be contiguous or global");
    if (remainder != "drop" && remainder != "pad" && remainder != "rotate")
      throw std::invalid_argument("remainder must be drop, pad or rotate");
    job.dist_options = {.enforce_equal_batches = args.integer("enforce_equal_batches", 1) != 0,
                        .mode = mode == "global" ? cs::ShardMode::global : cs::ShardMode::contiguous,
                        .remainder = remainder == "drop"  ? cs::Remainder::drop
                                     : remainder == "pad" ? cs::Remainder::pad
                                                          : cs::Remainder::rotate};
  }

  if (kind == "random") {
    const cs::RandomOptions options{.chunk_size = chunk_size,
                                    .preload_nchunks = preload_nchunks,
                                    .batch_size = batch_size,
                                    .drop_last = drop_last,
                                    .mask = args.mask(),
                                    .seed = args.seed(),
                                    .replacement = args.flag("replacement"),
                                    .num_samples = args.optional_int("num_samples")};
    args.check_all_used();
    run(cs::RandomSampler(options), job);
  } else if (kind == "sequential") {
    const cs::SequentialOptions options{.chunk_size = chunk_size,
                                        .preload_nchunks = preload_nchunks,
                                        .batch_size = batch_size,
                                        .drop_last = drop_last,
                                        .mask = args.mask()};
    args.check_all_used();
    run(cs::SequentialSampler(options), job);
  } else if (kind == "class" || kind == "weighted") {
    const std::vector<std::int64_t> codes = args.integers("codes");
    const cs::ClassOptions options{.chunk_size = chunk_size,
                                   .preload_nchunks = preload_nchunks,
                                   .batch_size = batch_size,
                                   .drop_last = drop_last,
                                   .mask = args.mask(),
                                   .seed = args.seed(),
                                   .num_samples = args.optional_int("num_samples"),
                                   .class_weights = args.reals("class_weights")};
    if (kind == "class") {
      args.check_all_used();
      run(cs::ClassSampler(codes, options), job);
    } else {
      const std::string composition = args.text("composition", "independent");
      if (composition != "independent" && composition != "stratified")
        throw std::invalid_argument("composition must be independent or stratified");
      args.check_all_used();
      run(cs::WeightedClassSampler(codes, cs::weighted_options_of(options, composition == "stratified"
                                                                               ? cs::Composition::stratified
                                                                               : cs::Composition::independent)),
          job);
    }
  } else if (kind == "mixture") {
    std::vector<std::int64_t> sizes = args.integers("sizes");
    const std::optional<std::string> temperature = args.get("temperature");
    const cs::MixtureOptions options{.chunk_size = chunk_size,
                                     .preload_nchunks = preload_nchunks,
                                     .batch_size = batch_size,
                                     .drop_last = drop_last,
                                     .seed = args.seed(),
                                     .num_samples = args.optional_int("num_samples"),
                                     .weights = args.reals("weights"),
                                     .temperature = temperature ? std::stod(*temperature) : 1.0};
    args.check_all_used();
    run(cs::MixtureSampler(std::move(sizes), options), job);
  } else {
    throw std::invalid_argument(
        fmt::format("sampler {:?} must be random, sequential, class, weighted or mixture", kind));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args(argc, argv);
    run(args);
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "plan_dump: %s\n", e.what());
    return 2;
  }
}
