// SPDX-License-Identifier: MIT
// A request's splits as sample() hands them out: a list (annbatch's LoadRequest holds a list of
// arrays) of a subclass whose iteration and indexing C++ counts, so that a sampler's state() names
// the batches its consumer has taken (annbatch's Loader takes a request, loads it, then yields its
// splits one by one), at no Python cost per split.

#pragma once

#include "binding.hpp"

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>

namespace chunksampler::python {

// How far the consumer of one sample() iterator has got into the splits of the request it took
// last. Iterating the splits is the list's own iterator, kept here: how far it has got is read
// from it (its length hint) when asked, so taking a split costs nothing. `taken()` is where the
// latest iteration stands once it has yielded a split (until then, what was taken before it
// began), or after an index, the larger of that and the index + 1, until that iteration moves on.
class Taken {
 public:
  // A new request's `size` splits, the list `splits`: none of them taken yet.
  void begin(const PyObject* splits, Py_ssize_t size);
  // The consumer began to iterate `splits` (again) with `iterator`.
  void iterating(const PyObject* splits, nb::object iterator);
  // The consumer took split `taken - 1` of `splits` by index.
  void indexed(const PyObject* splits, Py_ssize_t taken);
  // Batches of the last request the consumer has not taken yet: none until it begins on them (a
  // consumer that never iterates nor indexes the splits counts whole requests).
  [[nodiscard]] std::int64_t untaken() const;

 private:
  [[nodiscard]] std::optional<Py_ssize_t> position() const;
  [[nodiscard]] std::optional<Py_ssize_t> taken() const;

  const PyObject* current_ = nullptr;  // the current request's splits: compared, never dereferenced
  Py_ssize_t size_ = 0;
  nb::object iterator_;  // the latest iterator over them
  std::optional<Py_ssize_t> before_;
  std::optional<Py_ssize_t> indexed_;
  std::optional<Py_ssize_t> indexed_at_;
  const PyObject* indexed_iterator_ = nullptr;  // compared, never dereferenced
};

// The splits of one request, `count` positions of `all` (a 1-D int64 array) cut every `batch`: a
// list of views of `all` of the type Splits, which reports to `taken`. The full batches are the
// rows of one 2-D view (numpy makes each in C), the short last one a slice.
nb::object make_splits(nb::handle all, std::int64_t count, std::int64_t batch, const std::shared_ptr<Taken>& taken);

// Registers the list subclass as `Splits` in `m` (once, before any sample()).
void def_splits(nb::module_& m);

}  // namespace chunksampler::python
