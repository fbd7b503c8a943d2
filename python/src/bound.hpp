// SPDX-License-Identifier: MIT
// The bound sampler every sampler type's class is made of (Bound<S>), the members they all share
// (def_sampler), and what every DistributedSampler binds (Kind<DistributedSampler<S>>). Each family
// (plain.cpp, class.cpp, mixture.cpp) specializes Kind for its types and instantiates these.

#pragma once

#include "binding.hpp"
#include "iterators.hpp"

#include <chunksampler/dist_info.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/load_request.hpp>
#include <chunksampler/sampler_state.hpp>

#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace chunksampler::python {

// The Source of one epoch: the range a sampler's sample() returns, iterated in place.
template <class Range>
class EpochSource final : public Source {
 public:
  explicit EpochSource(Range range) : range_(std::move(range)) {}

  const cs::LoadRequest* advance() override {
    if (!it_) it_ = range_.begin();
    else ++*it_;
    return *it_ == std::default_sentinel ? nullptr : &**it_;
  }
  [[nodiscard]] std::int64_t n_batches() const noexcept override { return range_.n_batches(); }
  [[nodiscard]] std::int64_t batches_before() const noexcept override { return range_.batches_before(); }
  [[nodiscard]] cs::SamplerState state(std::int64_t yielded) const override { return range_.state(yielded); }
  void publish() noexcept override { yielded_ = range_.yielded(); }

 private:
  Range range_;  // never moved once iterated: the source lives on the heap
  std::optional<typename Range::iterator> it_;
};

// Where another sampler's epoch stood when the sampler was copied: its counts, and no epoch.
class Played final : public Source {
 public:
  explicit Played(const Source& from)
      : n_batches_(from.n_batches()), before_(from.batches_before()), untaken_(from.untaken()) {
    yielded_ = from.yielded();
  }

  const cs::LoadRequest* advance() override { return nullptr; }
  [[nodiscard]] std::int64_t n_batches() const noexcept override { return n_batches_; }
  [[nodiscard]] std::int64_t batches_before() const noexcept override { return before_; }
  [[nodiscard]] cs::SamplerState state(std::int64_t /*yielded*/) const override {
    throw nb::value_error("chunksampler: a copied sampler holds no epoch to take a state in");
  }
  void publish() noexcept override {}
  [[nodiscard]] std::int64_t untaken() const override { return untaken_; }

 private:
  std::int64_t n_batches_;
  std::int64_t before_;
  std::int64_t untaken_;
};

// One bound sampler: the C++ sampler (whose driver says the phase of its epoch) and the epoch
// its last sample() returned (which counts what it has yielded, and what its consumer has taken),
// the one record of where it stands. Each C++ sampler type is its own Python class (def_sampler
// below binds what they share, Kind<S> what only S has). A copy copies the sampler and where its
// epoch stood; no two share anything that changes.
template <class S>
class Bound {
 public:
  explicit Bound(S sampler) : sampler_(std::move(sampler)) {}
  Bound(const Bound& other) : sampler_(other.sampler_), live_(other.live_ ? frozen(*other.live_) : nullptr) {}
  Bound(Bound&&) noexcept = default;
  Bound& operator=(const Bound&) = delete;
  Bound& operator=(Bound&&) = delete;
  ~Bound() = default;

  [[nodiscard]] const S& get() const noexcept { return sampler_; }
  [[nodiscard]] S& get() noexcept { return sampler_; }

  template <class Iterator>
  Iterator sample(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) {
    auto range = sampler_.sample(n_obs, worker_of(worker, num_workers));
    live_ = std::make_shared<EpochSource<decltype(range)>>(std::move(range));
    return Iterator(live_);
  }
  [[nodiscard]] std::int64_t n_batches(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) const {
    return sampler_.n_batches(n_obs, worker_of(worker, num_workers));
  }
  [[nodiscard]] std::int64_t n_batches_left(std::int64_t n_obs, std::int64_t worker, std::int64_t num_workers) const {
    return sampler_.n_batches_left(n_obs, worker_of(worker, num_workers));
  }
  void validate(std::int64_t n_obs) const { sampler_.validate(n_obs); }
  void set_epoch(std::uint64_t epoch) {
    sampler_.set_epoch(epoch);
    live_.reset();
  }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return sampler_.epoch(); }

  // The batches of the current epoch its consumer has taken, from the epoch's start: those of
  // the requests the last sample() has yielded, the last one only as far as its splits were
  // taken; a pending restore's point; 0 at an epoch's start.
  [[nodiscard]] std::int64_t taken() const {
    switch (sampler_.phase()) {
      case cs::EpochPhase::fresh: return 0;
      case cs::EpochPhase::pending: return sampler_.next_state().batches_done();
      case cs::EpochPhase::played: return live_ ? live_->taken() : 0;
    }
    return 0;
  }
  // The state after `batches_done` batches of the current epoch, by default after those taken.
  [[nodiscard]] nb::dict state_dict(std::optional<std::int64_t> batches_done) const {
    return state_dict_of(sampler_.state(batches_done ? *batches_done : taken()));
  }
  void restore(const std::string& text) {
    sampler_.restore(cs::SamplerState::parse(text));
    live_.reset();
  }
  // As restore(), the way a loader resumes (the driver's resume): a state at its epoch's end
  // moves to the next epoch's start.
  void resume(const std::string& text) {
    sampler_.resume(cs::SamplerState::parse(text));
    live_.reset();
  }
  // Where the next sample() begins: a pending restore's point, else the start of the next epoch.
  [[nodiscard]] nb::dict next_state() const { return state_dict_of(sampler_.next_state()); }
  // "start" (no sample() since construction, set_epoch or restore), "restore", "sample" (the last
  // sample()'s iterator has batches left) or "end" (it has yielded them all: the next sample()
  // plays the next epoch from its start, as after "start").
  [[nodiscard]] const char* since() const noexcept {
    switch (sampler_.phase()) {
      case cs::EpochPhase::fresh: return "start";
      case cs::EpochPhase::pending: return "restore";
      case cs::EpochPhase::played: return live_ && live_->yielded() < live_->n_batches() ? "sample" : "end";
    }
    return "start";
  }

  // A copy at this sampler's point: after `batches_done` batches of the current epoch if given,
  // else where its consumer stands (or the restore pending); between epochs, at the start of the
  // next. What a copy or a pickle continues from.
  [[nodiscard]] Bound at(std::optional<std::int64_t> batches_done) const {
    Bound out(sampler_);
    const std::string_view where = since();
    if (batches_done || where == "restore" || where == "sample") {
      out.sampler_.restore(sampler_.state(batches_done ? *batches_done : taken()));
    } else {
      out.set_epoch(sampler_.epoch());
    }
    return out;
  }
  // Where at(None) stands, for pickling: ("epoch", n) between epochs, else ("state", text).
  [[nodiscard]] nb::tuple position() const {
    const std::string_view where = since();
    if (where == "restore" || where == "sample") return nb::make_tuple("state", sampler_.state(taken()).to_string());
    return nb::make_tuple("epoch", sampler_.epoch());
  }
  void move_to(const nb::tuple& position) {
    const auto kind = nb::cast<std::string>(position[0]);
    if (kind == "epoch") set_epoch(nb::cast<std::uint64_t>(position[1]));
    else if (kind == "state") restore(nb::cast<std::string>(position[1]));
    else throw nb::value_error("chunksampler: a pickled position is ('epoch', n) or ('state', text)");
  }

 private:
  static std::shared_ptr<Source> frozen(const Source& live) { return std::make_shared<Played>(live); }
  S sampler_;
  std::shared_ptr<Source> live_;  // the epoch the last sample() returned (nullptr: none since set_epoch/restore)
};

// What each sampler type binds beyond the shared members: its constructor (keyword arguments,
// the names of options()), its options as a dict of those keywords, and its own properties. Each
// family specializes it for its sampler types; a specialization may add def_distributed, what only
// the DistributedSampler of its type binds.
template <class S>
struct Kind;

template <class S>
struct Kind<cs::DistributedSampler<S>> {
  static nb::dict options(const cs::DistributedSampler<S>& d) {
    nb::dict out;
    out["sampler"] = nb::cast(Bound<S>(d.sampler()));
    out["rank"] = d.rank();
    out["world_size"] = d.world_size();
    out["enforce_equal_batches"] = d.options().enforce_equal_batches;
    out["mode"] = d.options().mode;
    out["remainder"] = d.options().remainder;
    return out;
  }
  static void def(nb::class_<Bound<cs::DistributedSampler<S>>>& cls) {
    using B = Bound<cs::DistributedSampler<S>>;
    cls.def(
           "__init__",
           [](B* self, const Bound<S>& sampler, std::int64_t rank, std::int64_t world_size, bool enforce_equal_batches,
              cs::ShardMode mode, cs::Remainder remainder) {
             new (self) B(cs::DistributedSampler<S>(
                 sampler.get(), cs::DistInfo{.rank = rank, .world_size = world_size},
                 {.enforce_equal_batches = enforce_equal_batches, .mode = mode, .remainder = remainder}));
           },
           nb::arg("sampler"), nb::kw_only(), nb::arg("rank"), nb::arg("world_size"),
           nb::arg("enforce_equal_batches") = true, nb::arg("mode") = cs::ShardMode::contiguous,
           nb::arg("remainder") = cs::Remainder::drop, "A C++ DistributedSampler wrapping a copy of `sampler`.")
        .def_prop_ro("rank", [](const B& b) { return b.get().rank(); })
        .def_prop_ro("world_size", [](const B& b) { return b.get().world_size(); })
        .def_prop_ro("enforce_equal_batches", [](const B& b) { return b.get().options().enforce_equal_batches; })
        .def_prop_ro("mode", [](const B& b) { return b.get().options().mode; })
        .def_prop_ro("remainder", [](const B& b) { return b.get().options().remainder; })
        .def_prop_ro(
            "sampler", [](const B& b) { return Bound<S>(b.get().sampler()); },
            "A copy of the wrapped sampler (its weights as updated here).")
        .def(
            "shard", [](const B& b, std::int64_t n_obs) { return py_mask(b.get().shard(n_obs)); }, nb::arg("n_obs"),
            "The observations this rank reads in the next epoch (contiguous mode), or all ranks together (global).");
    // What only the DistributedSampler of S has (MixtureSampler's update_weights, mixture.cpp).
    if constexpr (requires { Kind<S>::def_distributed(cls); }) Kind<S>::def_distributed(cls);
  }
};

// The members every sampler type shares, then its own (Kind<S>::def).
template <class S>
void def_sampler(nb::module_& m, const char* name, const char* doc) {
  using B = Bound<S>;
  nb::class_<B> cls(m, name, doc);
  Kind<S>::def(cls);
  cls.def("sample", &B::template sample<Requests>, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
          "The requests of the next epoch (worker `worker` of `num_workers`'s share); moves to the epoch after.")
      .def("sample_arrays", &B::template sample<RequestArrays>, nb::arg("n_obs"), nb::arg("worker"),
           nb::arg("num_workers"), "As sample(), each request as arrays.")
      .def("n_batches", &B::n_batches, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "Batches one epoch over `n_obs` observations yields, counted from its start.")
      .def("n_batches_left", &B::n_batches_left, nb::arg("n_obs"), nb::arg("worker"), nb::arg("num_workers"),
           "Batches the next sample() yields: n_batches less a pending restore's batches_done.")
      .def("validate", &B::validate, nb::arg("n_obs"), "Raises ConfigError if an epoch cannot be served.")
      .def("set_epoch", &B::set_epoch, nb::arg("epoch"), "Pins the next sample() to `epoch`.")
      .def("state_dict", &B::state_dict, nb::arg("batches_done").none() = nb::none(),
           "{'state': text, 'epoch': ..., 'batches_done': ...} after `batches_done` batches of the current epoch "
           "(default: those its consumer has taken: the requests yielded, the last one as far as its splits were "
           "taken).")
      .def("restore", &B::restore, nb::arg("text"), "Makes the next sample() continue after the state.")
      .def("resume", &B::resume, nb::arg("text"),
           "As restore(); a state at its epoch's end makes the next sample() play the next epoch from its start.")
      .def("next_state", &B::next_state,
           "The state dict where the next sample() begins: a pending restore's, else the next epoch's start.")
      .def("at", &B::at, nb::arg("batches_done").none() = nb::none(),
           "A copy at this sampler's point: after `batches_done` batches if given, else where its consumer stands "
           "(a restore pending); between epochs, at the next one's start.")
      .def(
          "options", [](const B& b) { return Kind<S>::options(b.get()); },
          "The constructor's keyword arguments that make this sampler again (at epoch 0).")
      .def("__copy__", [](const B& b) { return B(b); })
      .def(
          "__deepcopy__", [](const B& b, nb::handle) { return B(b); }, nb::arg("memo"))
      .def(
          "__getstate__", [](const B& b) { return nb::make_tuple(Kind<S>::options(b.get()), b.position()); },
          "(options, position): the options, and ('epoch', n) or ('state', text) where at() stands.")
      .def(
          "__setstate__",
          [](B& self, const nb::tuple& state) {
            const nb::object made = nb::type<B>()(**nb::borrow<nb::dict>(state[0]));
            B& from = nb::cast<B&>(made);
            new (&self) B(from);
            self.move_to(nb::borrow<nb::tuple>(state[1]));
          },
          nb::arg("state"))
      .def_prop_ro("since", &B::since,
                   "'start', 'restore', 'sample' or 'end' (the last sample() yielded all): what last moved the epoch.")
      .def_prop_ro("epoch", &B::epoch, "The epoch the next sample() plays.")
      .def_prop_ro("batch_size", [](const B& b) { return plain_of(b.get()).batch_size(); })
      .def_prop_ro("chunk_size", [](const B& b) { return plain_of(b.get()).chunk_size(); })
      .def_prop_ro("preload_nchunks", [](const B& b) { return plain_of(b.get()).preload_nchunks(); })
      .def_prop_ro("drop_last", [](const B& b) { return plain_of(b.get()).drop_last(); })
      .def_prop_ro("shuffle", [](const B& b) { return plain_of(b.get()).shuffle(); })
      .def_prop_ro(
          "mask", [](const B& b) { return py_mask(plain_of(b.get()).mask()); },
          "[(start, stop or None), ...], or None for all of [0, n_obs).")
      .def_prop_ro(
          "seed", [](const B& b) { return plain_of(b.get()).rng().seed(); },
          "The seed every random choice descends from.")
      .def_prop_ro(
          "fingerprint", [](const B& b) { return b.get().fingerprint(); },
          "A hash of every setting that shapes the epochs (the seed aside), as states carry it.");
}

template <class S>
void def_plain_and_distributed(nb::module_& m, const char* doc) {
  def_sampler<S>(m, Kind<S>::name, doc);
  static const std::string distributed = std::string("Distributed") + Kind<S>::name;
  def_sampler<cs::DistributedSampler<S>>(m, distributed.c_str(),
                                         "A C++ DistributedSampler of the sampler type its name ends with.");
}

}  // namespace chunksampler::python
