"""Helpers shared by the Python tests; they run against the installed package (scripts/test_python.sh)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import chunksampler


def observations(request: chunksampler.LoadRequest) -> list[np.ndarray]:
    """Each batch of `request` as the observation indices it names (chunks concatenated, then indexed)."""
    rows = np.concatenate([np.arange(s.start, s.stop, dtype=np.int64) for s in request["requests"]])
    return [rows[split] for split in request["splits"]]


def epoch_batches(sampler, n_obs: int, **kwargs) -> list[np.ndarray]:
    """Every batch of one epoch, as observation indices."""
    return [batch for request in sampler.sample(n_obs, **kwargs) for batch in observations(request)]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_output(name: str) -> str:
    """The text of the README's ``<!-- python-output: NAME -->`` block: what a documented command
    prints, which the test that runs the command compares with what it printed."""
    match = re.search(rf"<!-- python-output: {re.escape(name)} -->\n```text\n(.*?)```", README.read_text(), re.S)
    assert match, f"README.md has no python-output block named {name!r}"
    return match.group(1)
