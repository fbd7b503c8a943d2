// SPDX-License-Identifier: MIT

#include "options.hpp"

#include "common/cli.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <string_view>
#include <system_error>
#include <vector>

namespace shard_plan {

namespace {

constexpr std::string_view description =
    "Plans how cs::DistributedSampler shares n_obs observations among world_size ranks, prints what\n"
    "each rank reads, and checks the plan by walking every rank's epochs.";

constexpr std::string_view footer =
    "Options also take the form --name=value; sizes may be written 1e6. The defaults are annbatch's\n"
    "multi-GPU tutorial: 2 ranks of RandomSampler(chunk 64, preload 32, batch 256) over 20000\n"
    "observations, 39 batches each.\n"
    "\n"
    "--codes FILE is a CSV file: a header row of column names, then a row per observation, in\n"
    "the order on disk, of category names; an empty field is missing (NA) and no key selects it.\n"
    "From AnnData: adata.obs[[\"split\", \"cell_line\"]].to_csv(FILE, index=False). --n-obs\n"
    "defaults to its rows. The mask is cs::split_mask's, with chunk_size as --chunk-size.\n"
    "\n"
    "exit status: 0 every invariant holds, 1 an invariant failed, 2 bad arguments.";

constexpr examples::Choice<bool> samplers[] = {{"random", false}, {"sequential", true}};

std::optional<std::string> parse_path(std::string_view what, std::string_view text) {
  if (text.empty()) examples::bad_argument("{} needs a file name", what);
  return std::string(text);
}

// A number such as 0.05; the library checks that it is a share, in [0, 1].
std::optional<double> parse_share(std::string_view what, std::string_view text) {
  double value = 0;
  const char* const last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, value);
  if (error != std::errc{} || end != last || text.empty())
    examples::bad_argument("{}: {:?} is not a number", what, text);
  return value;
}

// Names separated by commas: split,cell_line.
std::vector<std::string> parse_names(std::string_view what, std::string_view text) {
  std::vector<std::string> names;
  for (std::size_t at = 0;;) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    if (comma == at) examples::bad_argument("{}: {:?} names an empty column", what, text);
    names.emplace_back(text.substr(at, comma - at));
    if (comma == text.size()) return names;
    at = comma + 1;
  }
}

}  // namespace

std::optional<Options> parse_options(int argc, const char* const* argv) {
  Options o;
  examples::CommandLine cli("shard_plan", std::string(description), std::string(footer));
  cli.size("--n-obs", o.n_obs, "observations in the dataset");
  cli.integer("--world-size", o.world_size, "ranks in the job, at most 1048576");
  cli.request_shape(o.chunk_size, o.preload, o.batch_size);
  cli.size("--row-bytes", o.row_bytes,
           "bytes of one row in memory, for the size of a request's\nbuffer (4096: 1,024 float32 values)", 1,
           std::int64_t{1} << 36);
  CLI::Option* mask = cli.mask(o.mask, "sample only observations [START, STOP) (default: all of [0, N)),\n"
                                       "or the union of a list of ranges, sorted and disjoint:\n"
                                       "0:1000,5000:8000,20000: (the last START: is [START, N),\n"
                                       "annbatch's slice(START, None))");
  CLI::Option* codes = cli.parsed("--codes", o.codes, parse_path,
                                  "a CSV file of categorical columns, a row per observation\n"
                                  "(see below); --select picks the mask from it",
                                  "FILE", "");
  CLI::Option* select = cli.app()
                            .add_option("--select", o.select,
                                        "a key to select, one value per column: train, or\n"
                                        "train,K562 for two columns; repeat it for more keys")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                            ->type_name("KEY");
  CLI::Option* groupby =
      cli.parsed("--groupby", o.groupby, parse_names,
                 "the file's columns the keys name, in their order\n(default: all)", "COL[,...]", "");
  CLI::Option* short_share =
      cli.parsed("--max-short-share", o.max_short_share, parse_share,
                 "refuse a split with more of its rows in runs shorter\nthan a chunk (cs::FragmentedSplitError)",
                 "SHARE", "");
  codes->needs(select);
  select->needs(codes);
  groupby->needs(codes);
  short_share->needs(codes);
  codes->excludes(mask);
  cli.mode(o.mode, "contiguous: each rank shuffles its own slice (annbatch);\n"
                   "global: one shuffled plan per epoch, dealt to the ranks in\n"
                   "blocks of batches");
  cli.remainder(o.remainder, "what becomes of what does not divide evenly:\n"
                             "drop: left out, the same every epoch; pad: repeat rows so\n"
                             "nothing is left out; rotate: left out from the tail in even\n"
                             "epochs and the head in odd ones");
  cli.app().add_flag_callback(
      "--no-enforce", [&o] { o.enforce = false; }, "do not make every rank yield the same number of full batches");
  cli.app().add_flag("--drop-last", o.drop_last, "drop each rank's last, short batch");
  cli.integer("--epochs", o.epochs, "epochs to walk and check", std::int64_t{1}, max_epochs);
  cli.seed(o.seed, "seed of the shuffles, not of the plan");
  cli.choice("--sampler", o.sequential, samplers, "the base sampler: RandomSampler or SequentialSampler");
  cli.parsed("--svg", o.svg, parse_path, "draw the first epochs (up to 4) as an SVG picture", "FILE", "");
  if (!cli.parse(argc, argv)) return std::nullopt;
  o.n_obs_given = cli.app().count("--n-obs") > 0;
  // Past n_obs is the library's message too (an n_obs outside [0, 2^62] is the sampler's to refuse).
  if (o.mask && o.n_obs >= 0 && o.n_obs <= std::int64_t{1} << 62) {
    try {
      (void)o.mask->resolve(o.n_obs);
    } catch (const cs::ConfigError& error) {
      examples::bad_argument("--mask: {}", error.what());
    }
  }
  return o;
}

}  // namespace shard_plan
