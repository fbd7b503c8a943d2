"""save_state/load_state/write_atomically: checkpoint files in the C++ library's format. A saved
state resumes exactly, for every sampler kind; a file cut at any byte or with a byte changed is a
StateError, never another state; a missing file is a StateFileError (a StateError), a file that
cannot be written a StateWriteError (an OSError), each with the operating system's errno."""

from __future__ import annotations

import errno
import io
import pickle

import numpy as np
import pytest
from conftest import epoch_batches
from support import EVERY_KIND, EVERY_KIND_N_OBS, as_lists

import chunksampler as cs


@pytest.mark.parametrize("kind", sorted(EVERY_KIND))
def test_a_saved_state_resumes_exactly(kind, tmp_path):
    config = EVERY_KIND[kind]
    sampler = config.make()
    whole = as_lists(epoch_batches(sampler, EVERY_KIND_N_OBS))
    k = len(whole) // 2
    cs.save_state(tmp_path / "job.state", sampler.state_dict(k))
    loaded = cs.load_state(tmp_path / "job.state")
    assert loaded == sampler.state_dict(k)
    fresh = config.make()
    fresh.load_state_dict(loaded)
    assert as_lists(epoch_batches(fresh, EVERY_KIND_N_OBS)) == whole[k:]


def test_the_file_is_the_cpp_format(tmp_path):
    state = cs.RandomSampler(chunk_size=8, preload_nchunks=2, batch_size=4, rng=np.random.default_rng(3)).state_dict(0)
    cs.save_state(str(tmp_path / "a"), state["state"])  # the text alone, a str path
    header, text, end = (tmp_path / "a").read_bytes().split(b"\n")
    assert end == b""
    magic, size, crc = header.split(b" ")
    assert magic == b"chunksampler-checkpoint/1"
    assert size == b"bytes=%d" % (len(text) + 1) and crc.startswith(b"crc32c=")
    assert text.decode() == state["state"]
    assert not [p.name for p in tmp_path.iterdir() if p.name != "a"]  # no temporary file left


def test_a_damaged_file_is_an_error_never_another_state(tmp_path):
    path = tmp_path / "job.state"
    sampler = cs.DistributedSampler(cs.RandomSampler(16, 2, 8, rng=np.random.default_rng(5)), dist_info=lambda: (1, 3),
                                    mode="global")
    list(sampler.sample(1_000))
    cs.save_state(path, sampler.state_dict(2))
    whole = path.read_bytes()
    damaged = [whole[:cut] for cut in range(len(whole))]
    damaged += [whole[:at] + bytes([whole[at] ^ (1 << bit)]) + whole[at + 1:] for at in range(len(whole)) for bit in (0, 5)]
    for data in damaged:
        path.write_bytes(data)
        with pytest.raises(cs.StateError):
            cs.load_state(path)


def test_a_missing_file_is_a_state_file_error_with_its_errno(tmp_path):
    with pytest.raises(cs.StateFileError, match="nothing.state") as caught:
        cs.load_state(tmp_path / "nothing.state")
    assert isinstance(caught.value, cs.StateError) and caught.value.errno == errno.ENOENT
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (type(copy), str(copy), copy.errno) == (cs.StateFileError, str(caught.value), errno.ENOENT)


def test_a_file_that_cannot_be_written_is_a_state_write_error(tmp_path):
    state = cs.SequentialSampler(8, 2, 4).state_dict(0)
    for write in (lambda path: cs.save_state(path, state), lambda path: cs.write_atomically(path, b"weights")):
        with pytest.raises(cs.StateWriteError, match="no-such-directory") as caught:
            write(tmp_path / "no-such-directory" / "job.state")
        assert isinstance(caught.value, OSError) and not isinstance(caught.value, cs.StateError)
        assert caught.value.errno == errno.ENOENT


def test_a_new_file_replaces_the_old_whole(tmp_path):
    path = tmp_path / "job.state"
    sampler = cs.RandomSampler(8, 2, 4, rng=np.random.default_rng(1))
    cs.save_state(path, sampler.state_dict(0))
    list(sampler.sample(100))
    cs.save_state(path, sampler.state_dict(3))
    assert cs.load_state(path)["batches_done"] == 3


@pytest.mark.parametrize("make", [bytes, bytearray, lambda b: io.BytesIO(b).getbuffer(),
                                  lambda b: np.frombuffer(b, dtype=np.uint8), lambda b: np.frombuffer(b, dtype=np.int32)],
                         ids=["bytes", "bytearray", "BytesIO", "uint8", "int32"])
def test_write_atomically_takes_any_contiguous_buffer(make, tmp_path):
    data = bytes(range(256)) * 40
    cs.write_atomically(tmp_path / "model.pt", make(data))
    assert (tmp_path / "model.pt").read_bytes() == data
    cs.write_atomically(tmp_path / "model.pt", make(b""))
    assert (tmp_path / "model.pt").read_bytes() == b""


def test_bad_arguments_raise_type_error(tmp_path):
    state = cs.SequentialSampler(8, 2, 4).state_dict(0)
    with pytest.raises(TypeError, match="path must be"):
        cs.save_state(3, state)
    with pytest.raises(TypeError, match="state must be"):
        cs.save_state(tmp_path / "a", {"epoch": 0})
    with pytest.raises(TypeError, match="state must be"):
        cs.save_state(tmp_path / "a", 7)
    with pytest.raises(cs.StateFormatError):
        cs.save_state(tmp_path / "a", "not a state")
    assert not (tmp_path / "a").exists()
    with pytest.raises(TypeError, match="data must be"):
        cs.write_atomically(tmp_path / "b", "text")
    with pytest.raises(TypeError, match="contiguous"):
        cs.write_atomically(tmp_path / "b", np.zeros((4, 4), dtype=np.uint8)[:, ::2])
    with pytest.raises(TypeError, match="path must be"):
        cs.load_state(None)
