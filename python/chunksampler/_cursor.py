"""The one cursor of chunksampler's loaders: where a loader over a chunk sampler stands, and the state
it saves. Every loader keeps its position here and nowhere else (``chunksampler.torch``'s
``BatchSampler`` and ``ChunkDataLoader``, and through them Lightning, Accelerate, the Hugging Face
Trainer and Ray; scvi-tools' data module; Grain's iterator):

- ``Pass``: one pass over a ``sample_arrays()`` iterator. The iterator knows where its epoch stands
  (``batches_before``, ``n_batches``, its state after ``k`` of its batches), so a pass counts only
  the batches it has yielded, and is read, never laid out again.
- ``Cursor``: a loader's pass, the batches it has handed out of it, and a pending restore, with
  the rules every loader follows: ``set_epoch`` of a restored epoch's own number keeps the
  restore (the usual ``set_epoch(epoch)`` at the top of a resumed loop); a state taken at its
  epoch's end continues with the next epoch (the C++ driver's ``resume``); a state is checked on
  a copy of the sampler, so the live one may go on serving an epoch; the state at any point.
- The envelope every integration saves its state in, ``{"format": "chunksampler.loaders/1",
  "train": state, "world_size": n}``, written and read here; ``read_state`` reads every shape
  chunksampler wrote before (0.3's ``chunksampler.scvi/1`` and unversioned ``{"train": ...}``,
  Grain's ``chunksampler.grain/1``, the Hugging Face Trainer's bare sampler state).
- ``WRAPS``: how each kind of split wraps a plain sampler for a job of several processes.

Nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

from . import _chunksampler
from ._convert import index
from ._errors import ConfigError, StateError, StateFormatError
from ._samplers import DistributedSampler, _worker
from ._types import RequestArrays, SamplerStateDict

# --- a pass ---------------------------------------------------------------------------------------


class Pass:
    """One pass over a ``sample_arrays()`` iterator: the epoch's ``first`` batches were behind it when
    it began (a restored point), it yields ``total`` batches and has yielded ``yielded`` of them to
    its consumer (a DataLoader's workers, a reader); ``ticket`` numbers the loader's ``__iter__``
    call that made it, and ``ended`` says the loader's iterator has raised StopIteration. The
    iterator names the state after any of its batches, whatever the sampler has done since."""

    __slots__ = ("ended", "first", "requests", "ticket", "total", "yielded")

    def __init__(self, requests: Iterator[RequestArrays], ticket: int) -> None:
        self.requests = requests
        self.first: int = requests.batches_before  # type: ignore[attr-defined]
        self.total: int = requests.n_batches  # type: ignore[attr-defined]
        self.ticket = ticket
        self.yielded = 0
        self.ended = False

    @property
    def n_batches(self) -> int:
        """The epoch's batches counted from its start (``first + total``): what ``len()`` says."""
        return self.first + self.total

    def state_dict(self, done: int) -> SamplerStateDict:
        """The state after ``done`` of this pass's batches (``0 <= done <= total``); its
        ``batches_done`` counts from the epoch's start."""
        return self.requests.state_dict(done)  # type: ignore[attr-defined]


# --- the cursor -----------------------------------------------------------------------------------


class Cursor:
    """Where a loader over ``sampler`` (``n_obs`` observations, worker share ``worker`` of each
    pass's epoch; None: the DataLoader worker this process is, else the whole rank) stands: its current pass (``current``, None before the first and after
    ``set_epoch`` or a restore), the batches it has handed out of it to the training loop
    (``handed``; a loader whose consumer lags behind its reads counts them itself), and the state a
    restore is waiting to begin from (``restored``).

    ``rolls_over`` says what a state taken at its epoch's end restores: for a loader (True), the next
    epoch from its start, as a loop that resumes from a checkpoint expects; for a batch sampler
    (False), as for the sampler it stands for, the finished epoch's empty rest, which the next
    ``set_epoch`` leaves."""

    __slots__ = ("current", "handed", "n_obs", "owner", "restored", "rolls_over", "sampler", "tickets", "worker")

    def __init__(
        self,
        owner: str,
        sampler: Any,
        n_obs: int,
        worker: tuple[int, int] | None = (0, 1),
        *,
        rolls_over: bool = True,
    ) -> None:
        self.owner = owner
        self.sampler = sampler
        self.n_obs = n_obs
        self.worker = worker
        self.rolls_over = rolls_over
        self.current: Pass | None = None
        self.handed = 0
        self.restored: SamplerStateDict | None = None
        self.tickets = 0  # the loader's __iter__ calls so far, which number its passes

    # --- moving -------------------------------------------------------------------------------------

    def share(self) -> tuple[int, int]:
        """The worker share this cursor's passes play: its ``worker``, or the DataLoader worker this
        process is (``(0, 1)`` outside one)."""
        return _worker(None) if self.worker is None else self.worker

    def begin(self, ticket: int | None = None) -> Pass:
        """Starts a pass over the sampler's next epoch, or the rest of a restored one (for the
        cursor's worker share), numbered ``ticket`` (by default the latest ``__iter__``'s); the
        restore is spent, and the count of batches handed out starts again."""
        self.settle()
        requests = self.sampler.sample_arrays(self.n_obs, worker=self.share())
        self.current = Pass(requests, self.tickets if ticket is None else ticket)
        self.handed = 0
        self.restored = None
        return self.current

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass play ``epoch`` from its start, as PyTorch's ``set_epoch``; while a
        restore waits, the restored epoch's own number keeps it (the ``set_epoch(epoch)`` at the top
        of a resumed loop continues the epoch: to replay it from its start, call the sampler's)."""
        epoch = index("epoch", epoch)
        if epoch < 0:
            raise ConfigError(f"set_epoch: epoch ({epoch}) must be >= 0")
        self.settle()
        if self.sampler.restore_pending and epoch == self.sampler.epoch:
            return
        self.sampler.set_epoch(epoch)
        self.restored = None
        self.current = None

    def settle(self) -> None:
        """Puts a pending restore back if the sampler's own ``set_epoch`` of the same epoch dropped it
        (Lightning calls it on ``loader.sampler`` at every epoch's start); another epoch's number
        drops it for good."""
        restored = self.restored
        if restored is None or self.sampler.restore_pending:
            return
        if self.sampler.epoch == restored["epoch"]:
            self._put(restored)
        else:
            self.restored = None

    def restore(self, state: object) -> None:
        """Makes the next pass continue exactly after ``state`` (a sampler state dict of a sampler of
        the same configuration and seed): the rest of its epoch, or, for a state at its epoch's end,
        the next epoch from its start. Checked first (``check``); the state the cursor holds already
        changes nothing (Lightning restores a data module's and its training loader's, the same)."""
        if self.restored is not None and state == self.restored:
            return
        self.check(state, f"{self.owner}.load_state_dict: the state is not one of this loader's sampler")
        self._put(state)  # type: ignore[arg-type]
        self.current = None
        self.restored = state if self.sampler.restore_pending else None  # type: ignore[assignment]

    def _put(self, state: SamplerStateDict) -> None:
        if self.rolls_over:
            self.sampler._resume(state)
        else:
            self.sampler.load_state_dict(state)

    def check(self, state: object, problem: str) -> None:
        """Raises, the sampler untouched, unless ``state`` is one this cursor's sampler continues over
        its ``n_obs`` and worker count: ``StateMismatchError`` (another configuration, seed, dataset
        size or world size) or ``StateFormatError``, its message after ``problem``; ``TypeError`` for
        anything but a state dict."""
        probe = self.sampler._copy()
        try:
            probe.load_state_dict(state)
            probe.n_batches(self.n_obs, worker=self.share())
        except StateError as error:
            raise type(error)(
                f"{problem} (a checkpoint of another configuration, seed, dataset size or world size?): {error}"
            ) from None

    # --- where it stands ----------------------------------------------------------------------------

    def n_batches(self) -> int:
        """Batches of the epoch being handed out, else of the next pass's epoch, counted from the
        epoch's start (also while a restored epoch's rest is handed out)."""
        current = self.current
        if current is not None and self.handed < current.total:
            return current.n_batches
        self.settle()
        return self.sampler.n_batches(self.n_obs, worker=self.share())

    def next_state(self) -> SamplerStateDict:
        """Where the next pass begins: a restore's point, else the start of the epoch it plays."""
        self.settle()
        if self.restored is not None:
            return self.restored
        return self.sampler._next_state()

    def state_dict(self, done: int | None = None) -> SamplerStateDict:
        """The state after the batches handed out of the current pass, or after ``done`` of them
        (``0 <= done <= handed``, counted from where the pass began, as ``enumerate`` counts: a loop
        behind a wrapper that fetches ahead passes the batches it has finished); the dict's own
        ``batches_done`` counts from the epoch's start. Before a pass, or once ``set_epoch`` or a
        restore has moved the sampler since, where the next pass begins."""
        current = self.current
        if done is not None and (done > 0 or current is not None):
            if current is None or not 0 <= done <= self.handed:
                raise ConfigError(
                    f"{self.owner}.state_dict: batches_done ({done}) must be in [0, {self.handed}], the batches "
                    "this iteration has handed out"
                )
            return current.state_dict(done)
        if current is None or self.restored is not None or self.sampler._since in ("start", "restore"):
            return self.next_state()
        return current.state_dict(self.handed)


# --- how each split wraps a plain sampler ---------------------------------------------------------

# The DistributedSampler options a plain sampler of each kind of split is wrapped with:
# - "train": each rank its shard, every rank the same batch count (the gradient all-reduce of each
#   step waits for every rank);
# - "eval": each row once across the ranks, as many batches as a rank's rows make (a loop that
#   syncs its metrics only at its end: Lightning's validation, test and predict, scvi-tools');
# - "eval_gathered": each row once across the ranks, every rank the same batch count (a loop that
#   gathers every step's outputs across the ranks: the Hugging Face Trainer's evaluation).
WRAPS: dict[str, dict[str, Any]] = {
    "train": {},
    "eval": {"mode": "global", "enforce_equal_batches": False},
    "eval_gathered": {"mode": "global"},
}


def shard(split: str, sampler: Any, dist_info: Any, **options: Any) -> DistributedSampler:
    """``sampler`` wrapped for a split of kind ``split`` (a key of ``WRAPS``) over ``dist_info``'s
    ranks; ``options`` add to (or override) the split's."""
    return DistributedSampler(sampler, dist_info=dist_info, **{**WRAPS[split], **options})


# --- the envelope of a loader's state -------------------------------------------------------------

_FAMILY, _VERSION = "chunksampler.loaders", 1
FORMAT = f"{_FAMILY}/{_VERSION}"
# What chunksampler wrote before, read still: 0.3's scvi envelope (FORMAT's fields) and Grain's
# iterator state (a sampler state dict under a tag). Without a "format": 0.3's {"train": state}, and
# the Hugging Face Trainer's checkpoint file of a bare sampler state dict.
_SCVI_03, _GRAIN_1 = "chunksampler.scvi/1", "chunksampler.grain/1"
# The keys an envelope may hold beside "train" and "world_size": the train state's epoch and batch
# count repeated, for a reader of a Grain checkpoint.
_SUMMARY = ("epoch", "batches_done")


class StateShapeError(StateFormatError, TypeError):
    """A loader's state that is no envelope of ``write_state`` (nor of an earlier chunksampler): a
    ``StateFormatError``, and a ``TypeError`` as ``ChunkDataModule`` raised for it in 0.3."""


def write_state(train: SamplerStateDict | None, *, summary: bool = False) -> dict[str, Any]:
    """The envelope of a loader's state: ``{"format": FORMAT, "train": state, "world_size": n}``,
    ``state`` the training loader's (a sampler state dict), ``n`` the ranks it was taken on (as its
    text records: for a reader), and with ``summary`` the state's ``epoch`` and ``batches_done``
    beside them; ``{}`` where there is no training state yet."""
    if train is None:
        return {}
    world_size = _chunksampler.SamplerState.parse(train["state"]).world_size
    envelope: dict[str, Any] = {"format": FORMAT, "train": train, "world_size": world_size}
    if summary:
        envelope.update({key: train[key] for key in _SUMMARY})
    return envelope


def read_state(owner: str, state_dict: object) -> SamplerStateDict | None:
    """The training state an envelope holds, or None for one that holds none (``{}``): an envelope of
    ``write_state``, or of an earlier chunksampler (see the module). Raises ``StateFormatError``
    naming a format it does not know (a newer chunksampler's, or none of chunksampler's),
    ``StateShapeError`` for anything else that is not such an envelope, and the sampler state's
    own ``StateFormatError`` for its text."""
    if not isinstance(state_dict, Mapping):
        _malformed(owner, state_dict)
    tag = state_dict.get("format")
    if tag == _GRAIN_1 or (tag is None and isinstance(state_dict.get("state"), str)):
        train: object = {key: value for key, value in state_dict.items() if key != "format"}
    elif "format" in state_dict:
        if tag not in (FORMAT, _SCVI_03):
            _unknown(owner, tag)
        if "train" not in state_dict or set(state_dict) - {"format", "train", "world_size", *_SUMMARY}:
            _malformed(owner, state_dict)
        train = state_dict["train"]
    else:
        if set(state_dict) - {"train"}:
            _malformed(owner, state_dict)
        train = state_dict.get("train")
        if train is None:
            return None
    if not isinstance(train, dict) or not isinstance(train.get("state"), str):
        _malformed(owner, state_dict)
    _chunksampler.SamplerState.parse(train["state"])  # the text's own StateFormatError, now
    return train


def _malformed(owner: str, state_dict: object) -> NoReturn:
    raise StateShapeError(
        f"{owner}.load_state_dict: expected {{'train': state}} under 'format': {FORMAT!r}, as {owner}.state_dict() "
        f"writes it (state a sampler's state dict), got {state_dict!r:.200}"
    )


def _unknown(owner: str, tag: object) -> NoReturn:
    family, _, version = str(tag).partition("/")
    if family == _FAMILY and version.isdigit() and int(version) > _VERSION:
        why = "a newer chunksampler wrote it: upgrade chunksampler to resume from it"
    else:
        why = "it is not a format chunksampler writes"
    raise StateFormatError(
        f"{owner}.load_state_dict: the state's format {tag!r} is unknown ({why}); this chunksampler reads "
        f"{FORMAT!r} and the formats earlier ones wrote ({_SCVI_03!r}, {_GRAIN_1!r}, unversioned {{'train': state}})"
    )
