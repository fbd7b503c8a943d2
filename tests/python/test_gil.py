"""The GIL is released while C++ fills a request: another Python thread runs in the meantime."""

from __future__ import annotations

import math
import threading
import time

import numpy as np

import chunksampler as cs


def another_thread_ran_during(call) -> bool:
    """Whether a thread woken just before ``call()`` got to run before ``call()`` was half done
    (it needs the GIL to run: it cannot while a call holds it)."""
    started = threading.Event()
    stamps = []

    def run():
        started.wait()
        stamps.append(time.perf_counter())

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.01)  # the thread is waiting
    before = time.perf_counter()
    started.set()
    call()
    after = time.perf_counter()
    thread.join()
    return stamps[0] < before + (after - before) / 2


def test_another_thread_runs_while_a_large_request_is_computed():
    # A request of 4M positions: tens of milliseconds of shuffling in C++. Up to three tries, as a
    # loaded machine may not schedule the thread in time; a sampler that held the GIL never passes.
    sampler = cs.RandomSampler(chunk_size=4096, preload_nchunks=1024, batch_size=4096, rng=np.random.default_rng(0))
    assert any(another_thread_ran_during(lambda: next(iter(sampler.sample_arrays(8_000_000)))) for _ in range(3))
    assert any(another_thread_ran_during(lambda: next(iter(sampler.sample(8_000_000)))) for _ in range(3))


def test_the_check_fails_for_a_call_that_holds_the_gil():
    # math.factorial computes in C without releasing the GIL.
    assert not all(another_thread_ran_during(lambda: math.factorial(60_000)) for _ in range(3))


def test_another_thread_runs_while_class_codes_are_scanned():
    # 30M int8 codes in 100 blocks: the constructor's scan into runs takes tens of milliseconds in
    # C++, on the caller's array (no copy), without the GIL; both class samplers build the same way.
    codes = np.repeat(np.arange(100, dtype=np.int8), 300_000)
    for sampler in (cs.ClassSampler, cs.WeightedClassSampler):
        assert any(
            another_thread_ran_during(
                lambda sampler=sampler: sampler(64, 4, 64, classes=codes, num_samples=1024, rng=np.random.default_rng(0))
            )
            for _ in range(3)
        ), sampler.__name__
