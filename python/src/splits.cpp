// SPDX-License-Identifier: MIT
// The Splits list subclass of splits.hpp, written against the C API (nanobind binds classes, not
// subclasses of list), and the count of the splits a consumer takes.

#include "splits.hpp"

#include <algorithm>
#include <utility>

namespace chunksampler::python {

void Taken::begin(const PyObject* splits, Py_ssize_t size) {
  current_ = splits;
  size_ = size;
  iterator_ = nb::object();
  before_.reset();
  indexed_.reset();
  indexed_at_.reset();
  indexed_iterator_ = nullptr;
}

std::optional<Py_ssize_t> Taken::position() const {
  if (!iterator_.is_valid()) return std::nullopt;
  // A list iterator's hint is what it has left (0 once exhausted); it cannot fail.
  return size_ - PyObject_LengthHint(iterator_.ptr(), 0);
}

std::optional<Py_ssize_t> Taken::taken() const {
  const std::optional<Py_ssize_t> at = position();
  if (indexed_ && indexed_iterator_ == iterator_.ptr() && indexed_at_ == at) return indexed_;
  return at.value_or(0) != 0 ? at : before_;
}

void Taken::iterating(const PyObject* splits, nb::object iterator) {
  if (splits != current_) return;
  before_ = taken();
  iterator_ = std::move(iterator);
}

void Taken::indexed(const PyObject* splits, Py_ssize_t taken_now) {
  if (splits != current_) return;
  indexed_ = std::max(taken().value_or(0), taken_now);
  indexed_at_ = position();
  indexed_iterator_ = iterator_.ptr();
}

std::int64_t Taken::untaken() const {
  const std::optional<Py_ssize_t> at = taken();
  return at ? static_cast<std::int64_t>(size_ - *at) : 0;
}

namespace {

struct SplitsObject {
  PyListObject list;
  std::weak_ptr<Taken>* taken;  // null in a Splits made from Python: tp_alloc zeroes it
};

PyTypeObject* splits_type = nullptr;

std::shared_ptr<Taken> taken_of(PyObject* self) {
  const std::weak_ptr<Taken>* taken = reinterpret_cast<SplitsObject*>(self)->taken;
  return taken == nullptr ? nullptr : taken->lock();
}

PyObject* splits_iter(PyObject* self) {
  PyObject* iterator = PyList_Type.tp_iter(self);
  if (iterator == nullptr) return nullptr;
  if (const std::shared_ptr<Taken> taken = taken_of(self)) taken->iterating(self, nb::borrow(iterator));
  return iterator;
}

PyObject* splits_subscript(PyObject* self, PyObject* key) {
  PyObject* item = PyList_Type.tp_as_mapping->mp_subscript(self, key);
  if (item == nullptr || !PyLong_Check(key)) return item;
  if (const std::shared_ptr<Taken> taken = taken_of(self)) {
    // In range: the list's own subscript took it.
    Py_ssize_t index = PyLong_AsSsize_t(key);
    if (index < 0) index += PyList_GET_SIZE(self);
    taken->indexed(self, index + 1);
  }
  return item;
}

// A plain list of the same items: what a pickle or a copy holds.
PyObject* splits_reduce(PyObject* self, PyObject* /*unused*/) {
  PyObject* items = PyList_GetSlice(self, 0, PyList_GET_SIZE(self));
  if (items == nullptr) return nullptr;
  return Py_BuildValue("(O(N))", reinterpret_cast<PyObject*>(&PyList_Type), items);
}

// list's own dealloc skips its trashcan for a subclass (its tp_dealloc is this one), so it frees
// the object at once; an instance of a heap type holds a reference to it.
void splits_dealloc(PyObject* self) {
  delete std::exchange(reinterpret_cast<SplitsObject*>(self)->taken, nullptr);
  PyTypeObject* type = Py_TYPE(self);
  PyList_Type.tp_dealloc(self);
  Py_DECREF(type);
}

PyMethodDef splits_methods[] = {
    {"__reduce__", splits_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot splits_slots[] = {
    {Py_tp_doc, const_cast<char*>("A request's splits (a list of int64 arrays, views of one positions array), whose "
                                  "iteration and indexing the sampler counts: its state() names the batches taken.")},
    {Py_tp_iter, reinterpret_cast<void*>(splits_iter)},
    {Py_mp_subscript, reinterpret_cast<void*>(splits_subscript)},
    {Py_tp_methods, splits_methods},
    {Py_tp_dealloc, reinterpret_cast<void*>(splits_dealloc)},
    {0, nullptr},
};

PyType_Spec splits_spec = {
    "chunksampler._chunksampler.Splits", static_cast<int>(sizeof(SplitsObject)), 0, Py_TPFLAGS_DEFAULT, splits_slots,
};

}  // namespace

nb::object make_splits(nb::handle all, std::int64_t count, std::int64_t batch, const std::shared_ptr<Taken>& taken) {
  nb::object splits = nb::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(splits_type)));
  if (!splits.is_valid()) throw nb::python_error();
  const std::int64_t full = count / batch;
  if (full > 0) {
    nb::object whole = count == full * batch ? nb::borrow(all) : all[nb::slice(std::int64_t{0}, full * batch)];
    splits.attr("extend")(whole.attr("reshape")(full, batch));
  }
  if (count > full * batch) splits.attr("append")(all[nb::slice(full * batch, count)]);
  reinterpret_cast<SplitsObject*>(splits.ptr())->taken = new std::weak_ptr<Taken>(taken);
  taken->begin(splits.ptr(), PyList_GET_SIZE(splits.ptr()));
  return splits;
}

void def_splits(nb::module_& m) {
  PyObject* bases = PyTuple_Pack(1, reinterpret_cast<PyObject*>(&PyList_Type));
  if (bases == nullptr) throw nb::python_error();
  PyObject* type = PyType_FromSpecWithBases(&splits_spec, bases);
  Py_DECREF(bases);
  if (type == nullptr) throw nb::python_error();
  splits_type = reinterpret_cast<PyTypeObject*>(type);
  m.attr("Splits") = nb::steal(type);  // the module holds the type for the process's life
}

}  // namespace chunksampler::python
