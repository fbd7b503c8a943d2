"""Every bad input raises TypeError or ValueError (ConfigError, StateFormatError, StateMismatchError)
with a message that names the parameter; nothing crashes, and a refused assignment changes nothing."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import epoch_batches
from support import as_lists

import chunksampler as cs

CODES = np.repeat([0, 1], [50, 50])


def random(**kwargs):
    return cs.RandomSampler(**{"chunk_size": 10, "preload_nchunks": 2, "batch_size": 5, "rng": np.random.default_rng(0), **kwargs})


def classes(**kwargs):
    args = {"chunk_size": 10, "preload_nchunks": 2, "batch_size": 5, "num_samples": 50, "classes": CODES}
    return cs.ClassSampler(**{**args, **kwargs})


def mixture(**kwargs):
    return cs.MixtureSampler(**{"chunk_size": 10, "preload_nchunks": 2, "batch_size": 5, "sizes": [50, 50], **kwargs})


def distributed(dist_info=lambda: (0, 2), **kwargs):
    return cs.DistributedSampler(random(), dist_info=dist_info, **kwargs)


def played(sampler):
    list(sampler.sample(100))
    return sampler


CASES = [
    # (what, exception, the parameter the message must name)
    (lambda: random(mask=3), TypeError, "mask"),
    (lambda: random(mask=slice(0, 2**64)), cs.ConfigError, "mask.stop"),
    (lambda: random(rng="x"), TypeError, "rng"),
    (lambda: random(chunk_size=2**70), cs.ConfigError, "chunk_size"),
    (lambda: random(num_samples=1.5), TypeError, "num_samples"),
    (lambda: random(replacement=1), TypeError, "replacement"),
    (lambda: distributed(lambda: 1), TypeError, "dist_info"),
    (lambda: distributed(lambda: (0, 2**70)), cs.ConfigError, "world_size"),
    (lambda: distributed(lambda: (0, 0)), cs.ConfigError, "world_size"),
    (lambda: distributed(mode=[]), cs.ConfigError, "mode"),
    (lambda: distributed(remainder={}), cs.ConfigError, "remainder"),
    (lambda: distributed(enforce_equal_batches="yes"), TypeError, "enforce_equal_batches"),
    (lambda: classes(classes="abc"), TypeError, "classes"),
    (lambda: classes(classes=np.zeros((10, 10), dtype=np.int64)), TypeError, "classes"),
    (lambda: classes(classes=np.full(100, 2**63, dtype=np.uint64)), cs.ConfigError, "code 9223372036854775808"),
    (lambda: classes(class_weights="x"), TypeError, "class_weights"),
    (lambda: classes(class_weights=[1j, 1]), TypeError, "class_weights"),
    (lambda: classes(class_weights=[float("nan"), 1.0]), cs.ConfigError, "class_weights"),
    (lambda: mixture(sizes=[1.5]), TypeError, "sizes"),
    (lambda: mixture(sizes=[2**70]), cs.ConfigError, "sizes"),
    (lambda: mixture(temperature="hot"), TypeError, "temperature"),
    (lambda: mixture(temperature=float("inf")), cs.ConfigError, "temperature"),
    (lambda: mixture(weights=["a", "b"]), TypeError, "weights"),
    (lambda: mixture().update_weights("x"), TypeError, "weights"),
    (lambda: random().sample(2**63), cs.ConfigError, "n_obs"),
    (lambda: random().sample(-1), cs.ConfigError, "n_obs"),
    (lambda: random().sample(100, worker=(2, 2)), cs.ConfigError, "id"),
    (lambda: random().sample_arrays(100, worker=(0, 0)), cs.ConfigError, "num_workers"),
    (lambda: random().n_batches(100, worker=(0, 2**70)), cs.ConfigError, "num_workers"),
    (lambda: random().sample(100, worker=[0, 1]), TypeError, "worker"),
    (lambda: random().set_epoch(2**64), cs.ConfigError, "epoch"),
    (lambda: random().state_dict("x"), TypeError, "batches_done"),
    (lambda: random().state_dict(2**70), cs.ConfigError, "batches_done"),
    (lambda: random().state_dict(-1), cs.ConfigError, "batches_done"),
    (lambda: random().load_state_dict(3), TypeError, "state_dict"),
    (lambda: random().load_state_dict({"state": b"x"}), TypeError, "state_dict"),
    (lambda: random().load_state_dict({"state": "garbage"}), cs.StateFormatError, "text"),
    (lambda: random().load_state_dict({"state": ""}), cs.StateFormatError, "text"),
    (lambda: random().load_state_dict({"state": played(random(rng=np.random.default_rng(1))).state_dict()["state"]}),
     cs.StateMismatchError, "seed"),
    (lambda: random().load_state_dict(played(classes()).state_dict()), cs.StateMismatchError, "fingerprint"),
    (lambda: distributed(lambda: (0, 3)).load_state_dict(played(distributed()).state_dict()),
     cs.StateMismatchError, "world_size"),
]


@pytest.mark.parametrize(("what", "error", "names"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_bad_input_raises_a_type_or_value_error_naming_the_parameter(what, error, names):
    assert issubclass(error, (TypeError, ValueError))
    with pytest.raises(error, match=re.escape(names)):
        what()


def test_a_state_text_of_other_fields_is_a_format_error():
    text = played(random()).state_dict()["state"]
    with pytest.raises(cs.StateFormatError, match="batches_done"):
        random().load_state_dict({"state": text.replace("batches_done=20", "batches_done=x")})
    with pytest.raises(cs.StateFormatError):
        random().load_state_dict({"state": text.replace("chunksampler-state/6", "chunksampler-state/99")})


@pytest.mark.parametrize(
    ("attribute", "value", "error"),
    [("mask", 3, TypeError), ("mask", slice(5, 2), cs.ConfigError), ("mask", slice(0, 10, 2), cs.ConfigError),
     ("rng", "x", TypeError), ("rng", 1.5, TypeError)],
)
def test_a_refused_assignment_changes_nothing(attribute, value, error):
    reference = random(mask=slice(0, 80))
    reference.set_epoch(2)
    sampler = random(mask=slice(0, 80))
    sampler.set_epoch(2)
    with pytest.raises(error, match=attribute):
        setattr(sampler, attribute, value)
    assert sampler.mask == slice(0, 80) and sampler.seed == reference.seed and sampler.epoch == 2
    assert as_lists(epoch_batches(sampler, 100)) == as_lists(epoch_batches(reference, 100))


def test_assignments_that_cannot_be_made_are_attribute_errors():
    with pytest.raises(AttributeError, match="rng"):
        cs.SequentialSampler(10, 1, 5).rng = np.random.default_rng(0)
    with pytest.raises(AttributeError):
        distributed().rng = np.random.default_rng(0)
    with pytest.raises(AttributeError):
        distributed().mask = slice(0, 10)
