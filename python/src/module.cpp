// SPDX-License-Identifier: MIT
// The private module chunksampler._chunksampler: the C++ samplers with Python types, one class
// per sampler type (RandomSampler, ..., DistributedRandomSampler, ...), each copied and pickled
// by its C++ object. It translates types and nothing else; every rule, check and number comes
// from the C++ library.
// The public names live in the plain Python modules beside it (chunksampler/_samplers.py).
// The binding is one file per family, compiled in parallel: binding.hpp holds what they all need
// and declares each family's def_ function, bound.hpp the class every sampler type is made of;
// iterators.cpp, plain.cpp, class.cpp, mixture.cpp, state.cpp and split.cpp the families. This
// file makes the module: its exceptions, its enums, then each family in the order of the stub.

#include "binding.hpp"

#include <chunksampler/class_options.hpp>
#include <chunksampler/distributed_sampler.hpp>
#include <chunksampler/errors.hpp>

#include <exception>
#include <utility>

namespace {

// The Python exception class `name` of chunksampler._errors (imported when first needed, so the
// classes stay plain Python a reader can open).
nb::object error_class(const char* name) { return nb::module_::import_("chunksampler._errors").attr(name); }

void raise_as(const char* name, const char* message) { PyErr_SetString(error_class(name).ptr(), message); }

// Raises an instance of the class `name`, made from `args` (for the classes that carry more than
// a message).
template <class... Args>
void raise_instance(const char* name, Args&&... args) {
  nb::object cls = error_class(name);
  nb::object error = cls(std::forward<Args>(args)...);
  PyErr_SetObject(cls.ptr(), error.ptr());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const cs::StateFileError& e) {
    raise_instance("StateFileError", e.what(), e.code().value());
  } catch (const cs::StateWriteError& e) {
    raise_instance("StateWriteError", e.code().value(), e.what());
  } catch (const cs::StateMismatchError& e) {
    raise_as("StateMismatchError", e.what());
  } catch (const cs::StateFormatError& e) {
    raise_as("StateFormatError", e.what());
  } catch (const cs::StateError& e) {
    raise_as("StateError", e.what());
  } catch (const cs::FragmentedSplitError& e) {
    const cs::SplitReport& r = e.report();
    nb::object report = nb::module_::import_("chunksampler._types")
                            .attr("SplitReport")(r.runs, r.rows, r.short_runs, r.short_rows, r.short_share);
    raise_instance("FragmentedSplitError", e.what(), report, nb::cast(e.columns()));
  } catch (const cs::ShortRunsError& e) {
    raise_instance("ShortRunsError", e.what(), nb::cast(e.codes()));
  } catch (const cs::ConfigError& e) {
    raise_as("ConfigError", e.what());
  } catch (const cs::EnvironmentError& e) {
    raise_as("DistEnvironmentError", e.what());
  }
}

}  // namespace

NB_MODULE(_chunksampler, m) {
  m.doc() = "The C++ samplers of chunksampler, bound with nanobind. Private: use the names of `chunksampler`.";
  nb::register_exception_translator(translate);

  nb::enum_<cs::ShardMode>(m, "ShardMode", "How DistributedSampler splits the data among ranks.")
      .value("contiguous", cs::ShardMode::contiguous, "each rank reads its own contiguous slice (annbatch)")
      // `global` is a Python keyword, and stubgen hides names with a trailing underscore.
      .value("global_mode", cs::ShardMode::global, "one shared permutation of all chunks, dealt in blocks of batches");
  nb::enum_<cs::Remainder>(m, "Remainder", "What happens to observations that do not divide evenly among ranks.")
      .value("drop", cs::Remainder::drop, "left out: the range's tail (annbatch)")
      .value("pad", cs::Remainder::pad, "nothing left out: a few rows repeat")
      .value("rotate", cs::Remainder::rotate, "left out from the tail in even epochs, the head in odd ones");
  nb::enum_<cs::Composition>(m, "Composition", "How WeightedClassSampler chooses the classes of a request's chunks.")
      .value("independent", cs::Composition::independent, "each chunk draws its class by weight (annbatch)")
      .value("stratified", cs::Composition::stratified,
             "every request's and the epoch's class counts within one chunk of the weights");

  namespace binding = chunksampler::python;
  binding::def_splits(m);
  binding::def_iterators(m);
  binding::def_plain(m);
  binding::def_class(m);
  binding::def_mixture(m);
  binding::def_state(m);
  binding::def_split(m);
}
