// SPDX-License-Identifier: MIT
// The iterators' family: how Requests and RequestArrays yield an epoch's requests to Python, and
// their classes (def_iterators).

#include "iterators.hpp"

#include <chunksampler/load_request.hpp>
#include <chunksampler/slice.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace chunksampler::python {

nb::dict Requests::next() {
  std::unique_ptr<std::int64_t[]> positions;
  std::size_t count = 0;
  const cs::LoadRequest* request = step([&](const cs::LoadRequest& r) {
    const std::span<const std::int64_t> from = r.splits.positions();
    count = from.size();
    positions.reset(new std::int64_t[count == 0 ? 1 : count]);
    if (count != 0) std::memcpy(positions.get(), from.data(), count * sizeof(std::int64_t));
  });
  if (!request) throw nb::stop_iteration();

  nb::list requests;
  for (const cs::Slice& chunk : request->chunks) requests.append(nb::slice(chunk.start, chunk.stop));

  std::int64_t* data = positions.release();
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
  nb::object all = nb::cast(nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>>(data, {count}, owner));
  nb::dict result;
  result["requests"] = std::move(requests);
  result["splits"] =
      make_splits(all, static_cast<std::int64_t>(count), request->splits.batch_size(), source().splits_taken);
  return result;
}

nb::tuple RequestArrays::next() {
  const cs::LoadRequest* request = step([&](const cs::LoadRequest& r) {
    std::vector<std::int64_t>& offsets = buffers_->offsets;
    const std::size_t n = r.splits.size();
    offsets.resize(n + 1);
    const auto batch = static_cast<std::int64_t>(r.splits.batch_size());
    for (std::size_t b = 0; b < n; ++b) offsets[b] = static_cast<std::int64_t>(b) * batch;
    offsets[n] = static_cast<std::int64_t>(r.splits.positions().size());
  });
  if (!request) throw nb::stop_iteration();
  const std::span<const cs::Slice> chunks = request->chunks;
  const std::span<const std::int64_t> positions = request->splits.positions();
  const std::vector<std::int64_t>& offsets = buffers_->offsets;
  static_assert(sizeof(cs::Slice) == 2 * sizeof(std::int64_t), "starts and stops are strided views of the chunks");
  const std::int64_t* first = chunks.empty() ? nullptr : &chunks.front().start;
  return nb::borrow<nb::tuple>(
      request_arrays_(starts_.view(owner_, first, chunks.size(), 2),
                      stops_.view(owner_, first == nullptr ? nullptr : first + 1, chunks.size(), 2),
                      positions_.view(owner_, positions.data(), positions.size(), 1),
                      batches_.view(owner_, offsets.data(), offsets.size(), 1)));
}

namespace {

template <class Iterator>
void def_iterator(nb::module_& m, const char* name, const char* doc) {
  nb::class_<Iterator>(m, name, doc)
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &Iterator::next)
      .def("close", &Iterator::close, "Ends the iteration, as a generator's close(): later next() calls stop.")
      .def_prop_ro("n_batches", &Iterator::n_batches, "Batches the iterator yields in all.")
      .def_prop_ro("batches_before", &Iterator::batches_before,
                   "The epoch's batches before the first this iterator yields (a restored point's).")
      .def(
          "state", [](const Iterator& it, std::int64_t yielded) { return it.state(yielded).to_string(); },
          nb::arg("yielded"), "The state text after `yielded` of this iterator's batches (0 <= yielded <= n_batches).")
      .def(
          "state_dict", [](const Iterator& it, std::int64_t yielded) { return state_dict_of(it.state(yielded)); },
          nb::arg("yielded"),
          "The state after `yielded` of this iterator's batches (0 <= yielded <= n_batches), whatever the sampler "
          "has done since: {'state': text, 'epoch': ..., 'batches_done': ...}, batches_done counted from the "
          "epoch's start.");
}

}  // namespace

void def_iterators(nb::module_& m) {
  def_iterator<Requests>(m, "Requests", "One epoch's load requests: an iterator of LoadRequest dicts.");
  def_iterator<RequestArrays>(m, "RequestArrays",
                              "One epoch's load requests as (starts, stops, positions, offsets) int64 arrays "
                              "viewing the epoch's buffers, valid until the next request.");
}

}  // namespace chunksampler::python
