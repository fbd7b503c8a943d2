"""torchdata's StatefulDataLoader (what torchtitan and Lightning resume mid-epoch with) over a
chunksampler BatchSampler: it calls the BatchSampler's own ``state_dict``/``load_state_dict``
(directly without workers; with workers, a snapshot of it taken in the main process as each batch
is handed to a worker, kept for the batch the loop receives), so a state saved with torch.save and
loaded into a new loader in a new process continues exactly: the rest of the epoch and the next
epochs equal the uninterrupted run's, batch for batch. The cases are where that could go wrong:
workers that have prefetched batches the loop has not taken, a state in the loop at an epoch's last
batch, between epochs (after the loop ended) and before the first batch, the usual ``set_epoch`` at
the top of a resumed loop, and none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import JOB_TIMEOUT, run_child

import chunksampler as cs

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata.stateful_dataloader")

import stateful_resume as job  # noqa: E402  (the child script, beside this file)
from stateful_resume import EPOCHS, SAMPLERS, loader, sampler_state  # noqa: E402

from chunksampler.torch import BatchSampler  # noqa: E402


def uninterrupted(sampler: str, workers: int, set_epoch: bool) -> list[list[list[int]]]:
    """Every batch of the job's epochs from one StatefulDataLoader that never stops."""
    batches, stateful = loader(sampler, workers)
    epochs = []
    for epoch in range(EPOCHS):
        if set_epoch:
            batches.set_epoch(epoch)
        epochs.append([batch.tolist() for batch in stateful])
    return epochs


# Where a job saves: (kind, epoch, batches its loop has taken). "loop": inside that epoch's loop
# (None: at its last batch, before the loop ends); "after": once that epoch's loop has ended, before
# the next one's set_epoch; "iter": once that epoch's iterator is made (its workers handed batches)
# but before its first batch; "start": a fresh loader, before anything.
POINTS = {
    "start": ("start", 0, 0),
    "first-batch": ("loop", 0, 1),
    "mid-request": ("loop", 1, 7),  # inside a request of every sampler here (2 or 4 batches a request)
    "last-batch": ("loop", 1, None),
    "after-epoch": ("after", 0, 0),
    "iter-made": ("iter", 1, 0),
}


def save(case: dict, path: Path) -> tuple[int, int, dict]:
    """Plays the case's job until its point and saves the loader's state to ``path`` with torch.save;
    returns the epoch the resumed loop starts at, the batches of it the loop had taken, and the
    BatchSampler's state inside the loader's."""
    kind, at_epoch, taken = POINTS[case["point"]]
    batches, stateful = loader(case["sampler"], case["workers"], case["snapshot_every"])
    iterator = None
    for epoch in range(at_epoch + 1):
        if case["set_epoch"]:
            batches.set_epoch(epoch)
        if epoch < at_epoch or kind == "after":
            for _ in stateful:
                pass
        if epoch < at_epoch:
            continue
        if kind == "iter":
            iterator = iter(stateful)
        if kind == "loop":
            taken = taken or len(stateful)
            for k, _ in enumerate(stateful, 1):
                if k == taken:
                    break
            assert k == taken, f"{case}: the epoch has only {k} batches"
        state = stateful.state_dict()
    if kind == "after":
        at_epoch += 1
    torch.save(state, path)
    del iterator
    return at_epoch, taken, sampler_state(state)


def cases(workers: int) -> dict[str, dict]:
    made = {}
    for sampler in SAMPLERS:
        for point in POINTS:
            for set_epoch in (True, False):
                name = f"{sampler}-{point}-{'set_epoch' if set_epoch else 'no_set_epoch'}"
                made[name] = {"sampler": sampler, "workers": workers, "point": point, "set_epoch": set_epoch,
                              "snapshot_every": 1}
    if workers:  # snapshots every 3 batches: the loader replays the batches since the last one
        for point in ("mid-request", "last-batch"):
            made[f"random-{point}-snapshot_every_3"] = {"sampler": "random", "workers": workers, "point": point,
                                                        "set_epoch": True, "snapshot_every": 3}
    return made


@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "2-workers"])
def test_state_saved_mid_run_resumes_exactly_in_a_new_process(workers, tmp_path):
    made = cases(workers)
    expected, mismatches = {}, []
    references = {}
    for name, case in made.items():
        key = (case["sampler"], case["set_epoch"])
        if key not in references:
            references[key] = uninterrupted(case["sampler"], workers, case["set_epoch"])
            # The loader serves the BatchSampler's epochs, in order, whatever the workers.
            plain = BatchSampler(SAMPLERS[case["sampler"]](), job.N_OBS)
            assert references[key] == [list(plain) for _ in range(EPOCHS)]
            assert references[key][0] != references[key][1]
        reference = references[key]
        case["state"] = str(tmp_path / f"{name}.pt")
        start, taken, state = save(case, Path(case["state"]))
        case["start_epoch"] = start
        # The state names the batches the loop took, not those handed to workers ahead of it. After
        # an epoch's loop, with workers, the loader keeps the snapshot of the epoch's last batch (its
        # end); a restore plays that empty rest as it primes its workers, then the next epoch.
        # With snapshots every 3 batches, the snapshot is of the last multiple of 3 and the loader
        # replays the batches since (torchdata's "_steps_since_snapshot").
        if POINTS[case["point"]][0] == "after" and workers:
            assert (state["epoch"], state["batches_done"]) == (start - 1, len(reference[start - 1])), name
        else:
            every = case["snapshot_every"]
            assert (state["epoch"], state["batches_done"]) == (start, taken - taken % every), name
            assert torch.load(case["state"]).get("_steps_since_snapshot", 0) == taken % every
        rest = [reference[start][taken:], *reference[start + 1:]]
        expected[name] = rest
        first = next(i for i, got in enumerate(rest) if len(got) >= 2)
        done = (taken if first == 0 else 0) + 2
        expected[name + " again"] = {"epoch": start + first, "batches_done": done - done % case["snapshot_every"]}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(made))
    result = tmp_path / "result.json"
    run = run_child([str(Path(job.__file__)), str(manifest), str(result)], timeout=JOB_TIMEOUT)
    assert run.returncode == 0, run.stderr[-3000:]
    resumed = json.loads(result.read_text())
    for name in made:
        if resumed[name]["epochs"] != expected[name]:
            got = [len(epoch) for epoch in resumed[name]["epochs"]]
            mismatches.append(f"{name}: resumed epochs of {got} batches, expected {[len(e) for e in expected[name]]}")
        if resumed[name]["again"] != expected[name + " again"]:
            mismatches.append(f"{name}: a state of the resumed run is {resumed[name]['again']}, "
                              f"expected {expected[name + ' again']}")
    assert not mismatches, "\n".join(mismatches)


def random_batches() -> BatchSampler:
    return BatchSampler(SAMPLERS["random"](), job.N_OBS)


def test_state_once_the_iterator_has_ended_is_the_next_epochs_start():
    reference = random_batches()
    epoch0, epoch1 = list(reference), list(reference)
    batches = random_batches()
    assert list(batches) == epoch0
    state = batches.state_dict()
    assert (state["epoch"], state["batches_done"]) == (1, 0)
    # The loop's own count still names the ended iteration's batches (a prefetching DataLoader ends
    # the iterator while the loop has batches to finish).
    end = batches.state_dict(batches_done=len(epoch0))
    assert (end["epoch"], end["batches_done"]) == (0, len(epoch0))
    resumed = random_batches()
    resumed.load_state_dict(state)
    assert len(resumed) == len(epoch1) and list(resumed) == epoch1
    resumed = random_batches()
    resumed.load_state_dict(end)
    assert list(resumed) == [] and list(resumed) == epoch1


def test_state_at_the_last_batch_before_the_iterator_ends_is_the_epochs_end():
    epoch0 = list(random_batches())
    batches = random_batches()
    iterator = iter(batches)
    for _ in epoch0:
        next(iterator)
    state = batches.state_dict()  # the loop has the last batch; its next next() ends the epoch
    assert (state["epoch"], state["batches_done"]) == (0, len(epoch0))


def test_state_once_a_newer_iterator_is_made_is_where_that_one_begins():
    reference = random_batches()
    _, epoch1 = list(reference), list(reference)
    batches = random_batches()
    abandoned = iter(batches)
    for _ in range(3):
        next(abandoned)
    newer = iter(batches)  # a new DataLoader iterator: the next epoch, not the abandoned one's rest
    state = batches.state_dict()
    assert (state["epoch"], state["batches_done"]) == (1, 0)
    assert batches.state_dict(batches_done=0) == state
    with pytest.raises(ValueError, match=r"batches_done \(2\) must be 0 before an iteration has begun"):
        batches.state_dict(batches_done=2)
    resumed = random_batches()
    resumed.load_state_dict(state)
    assert list(resumed) == epoch1 == list(newer)


def test_state_between_epochs_keeps_settings_changed_after_construction():
    # The next epoch's start is read from a copy of the sampler: it must have the sampler's current
    # weights and mask, or the state would be refused (another fingerprint) or resume other batches.
    def mixture():
        return cs.MixtureSampler(4, 2, 4, sizes=[60, 43], weights=[1, 2], rng=np.random.default_rng(2))

    def masked():
        return cs.ClassSampler(4, 2, 4, classes=job.CLASSES, num_samples=40, rng=np.random.default_rng(1))

    for make, change in ((mixture, lambda s: s.update_weights([3, 1], temperature=2.0)),
                         (masked, lambda s: setattr(s, "mask", [slice(0, 40), slice(60, 103)]))):
        batches = BatchSampler(make(), job.N_OBS)
        list(batches)
        change(batches.sampler)
        state = batches.state_dict()
        assert (state["epoch"], state["batches_done"]) == (1, 0)
        resumed_sampler = make()
        change(resumed_sampler)
        resumed = BatchSampler(resumed_sampler, job.N_OBS)
        resumed.load_state_dict(state)
        assert list(resumed) == list(batches)
