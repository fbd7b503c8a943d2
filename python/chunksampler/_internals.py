"""Every read of another library's internals, each behind a probe that fails loudly.

The integrations need a few things that torch, Accelerate, Lightning, scvi-tools, annbatch, the
Hugging Face Trainer and Ray Train do not publish: a private attribute, a private method to override
or call, the frames of a function to tell apart. The rule: such a read lives here and nowhere else,
as a probe that names the library, the versions it was checked on (``Hook.checked_on``: the pins of
tests/stacks/requirements.txt, and torch 1.13, Debian's) and the hook it needs. A probe checks its
hook once (cached) against the library's own classes and functions, at the integration's first use
of it, or, where the hook is state of an object the library hands over, on that object each time
(a few attribute reads, never per batch). A missing hook (renamed, moved, another signature, another
frame layout) raises ``IntegrationError`` naming the library, its installed version and the hook.
Nothing falls back: the fallbacks were silent (a resume that skipped the batches a DataLoader's
workers had prefetched, a guard that switched itself off). Where a library is not in play (never
imported, an object not in its hands) a probe says so without importing it.

Where a public protocol does the job it is used instead, and nothing here reads: torchdata's
``StatefulDataLoader`` calls a batch sampler's ``state_dict`` itself, and the Trainer resumes through
Accelerate's ``skip_first_batches``. ``chunksampler.reader``'s reads of zarr's and zarrs's internals
are not here either: where one is missing the reader warns once and reads the same rows through
zarr's public indexers, more slowly.
"""

from __future__ import annotations

import copy
import functools
import inspect
import sys
from collections.abc import Callable
from importlib import metadata
from types import CodeType, FrameType
from typing import Any, NamedTuple, TypeVar

from ._errors import IntegrationError

__all__ = [
    "HOOKS",
    "PROBES",
    "Hook",
    "accelerate_no_remainder",
    "accelerate_prepares",
    "accelerate_shared_state",
    "annbatch_loader",
    "lightning_batches_done",
    "ray_calls",
    "scvi_split",
    "torch_handed_out",
    "torch_loader",
    "trainer_collator",
    "trainer_hooks",
    "trainer_output_dir",
]


class Hook(NamedTuple):
    """What chunksampler reads of a library's internals: ``library`` (its distribution's name),
    ``hook`` (what is read), ``use`` (what for) and the versions it was checked on."""

    library: str
    hook: str
    use: str
    checked_on: tuple[str, ...]

    def missing(self, problem: str) -> IntegrationError:
        """Our error for this hook, found missing as ``problem`` says, with the library's installed version."""
        version = _version(self.library)
        checked = " and ".join(self.checked_on)
        return IntegrationError(
            f"{self.library} {version} lacks what chunksampler reads of its internals: {self.hook} ({problem}). "
            f"chunksampler reads it to {self.use}, and was checked on {self.library} {checked}: use one of those, or "
            f"a chunksampler release that supports {self.library} {version}",
            library=self.library,
            version=version,
            hook=self.hook,
        )


def _version(library: str) -> str:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "(version unknown)"


class _Missing(Exception):
    """Raised by a probe's check: what it found in place of the hook."""


_Result = TypeVar("_Result")
# The cached probes, which tests clear around a hook they remove.
PROBES: list[Any] = []


def _probe(hook: Hook) -> Callable[[Callable[..., _Result]], Callable[..., _Result]]:
    """Makes ``check`` a probe of ``hook``: run once per argument (cached, so a check costs nothing
    after its first use), its ``_Missing`` turned into ``IntegrationError`` (not cached: a missing
    hook raises at every use)."""

    def wrap(check: Callable[..., _Result]) -> Callable[..., _Result]:
        @functools.cache
        def probe(*args: Any) -> _Result:
            try:
                return check(*args)
            except _Missing as missing:
                raise hook.missing(str(missing)) from None

        functools.update_wrapper(probe, check)
        PROBES.append(probe)
        return probe

    return wrap


def _code(owner: str, value: Any) -> CodeType:
    """The code of function ``value`` (``owner`` names it), under any decorator that keeps ``__wrapped__``."""
    if value is None:
        raise _Missing(f"there is no {owner}")
    function = inspect.unwrap(value) if callable(value) else value
    if not inspect.isfunction(function):
        raise _Missing(f"{owner} is not a function but a {type(value).__name__}")
    return function.__code__


def _codes(code: CodeType) -> list[CodeType]:
    """``code`` and the code of every function, comprehension and class body defined in it."""
    found = [code]
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found += _codes(const)
    return found


def _class_codes(cls: type) -> list[CodeType]:
    """The code of every method of ``cls``'s own (not inherited): functions, static and class
    methods, properties, and what each defines inside."""
    found: list[CodeType] = []
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        functions = [value.fget, value.fset, value.fdel] if isinstance(value, property) else [value]
        for function in functions:
            function = inspect.unwrap(function) if callable(function) else function
            if inspect.isfunction(function):
                found += _codes(function.__code__)
    return found


def _class(module: Any, name: str) -> type:
    value = getattr(module, name, None)
    if not isinstance(value, type):
        raise _Missing(f"{module.__name__} has no class {name}")
    return value


# --- torch: the batches a DataLoader has handed to the training loop ------------------------------

TORCH_LOADER = Hook(
    "torch",
    "torch.utils.data.dataloader's _SingleProcessDataLoaderIter and _MultiProcessingDataLoaderIter, which call "
    "iter() on the batch sampler from their own methods and count the batches they hand out in _num_yielded",
    "tell the batches a torch DataLoader has handed to the training loop from those its workers have prefetched "
    "(chunksampler.torch.BatchSampler.state_dict)",
    ("1.13", "2.15.0"),
)


def _first(batch: list[Any]) -> Any:
    return batch


@_probe(TORCH_LOADER)
def _torch_iterators() -> tuple[type, ...]:
    """torch's DataLoader iterators, once a one-batch DataLoader has shown that its iterator calls
    ``iter()`` on the batch sampler from a method of its own and counts the batch in ``_num_yielded``
    (a live check of the layout both rely on: the multi-process iterator shares those methods)."""
    import torch.utils.data
    from torch.utils.data import dataloader

    single = _class(dataloader, "_SingleProcessDataLoaderIter")
    multi = _class(dataloader, "_MultiProcessingDataLoaderIter")
    if multi.__next__ is not single.__next__:
        raise _Missing("the two iterators no longer share the __next__ that counts _num_yielded")
    callers: list[Any] = []

    class Batches:
        def __iter__(self) -> Any:
            callers.append(sys._getframe(1).f_locals.get("self"))
            return iter([[0]])

    iterator = iter(torch.utils.data.DataLoader([0], batch_sampler=Batches(), collate_fn=_first))
    next(iterator)
    if type(iterator) is not single:
        raise _Missing(f"a DataLoader without workers iterates with a {type(iterator).__qualname__}")
    if callers != [iterator]:
        raise _Missing("the DataLoader's iterator calls iter() on its batch sampler from outside its own methods")
    if iterator.__dict__.get("_num_yielded") != 1:
        raise _Missing("the iterator's _num_yielded is not the batches it has handed out")
    return single, multi


def torch_loader(frame: FrameType) -> Any:
    """The torch DataLoader iterator whose method ``frame`` is, where that frame calls ``iter()`` on a
    batch sampler; None for any other caller (a loop iterating it by hand, another loader, a subclass
    of torch's iterators such as torchdata's ``StatefulDataLoader``'s, which takes the batch
    sampler's ``state_dict`` itself). Checks torch's hooks at its first call."""
    iterators = _torch_iterators()
    caller = frame.f_locals.get("self")
    return caller if type(caller) in iterators else None


def torch_handed_out(loader: Any) -> int | None:
    """The batches ``loader`` (from ``torch_loader``) has handed to the training loop; None until its
    ``__init__`` sets the count, which is just after it calls ``iter()`` on the batch sampler."""
    count = loader.__dict__.get("_num_yielded")
    return count if isinstance(count, int) else None


# --- Accelerate: prepare() of a DataLoader over a chunksampler BatchSampler ------------------------

ACCELERATE_PREPARE = Hook(
    "accelerate",
    "accelerate.data_loader's prepare_data_loader, which reads a batch sampler's sampler through get_sampler "
    "and shards or dispatches its batches with BatchSamplerShard and DataLoaderDispatcher, and those three",
    "refuse accelerator.prepare() of a torch DataLoader over a chunksampler.torch.BatchSampler, which would deal "
    "each process a fraction of its shard",
    ("1.15.0",),
)


class _Frames(NamedTuple):
    """The ids of code objects to find among a caller's frames, with the code objects (kept alive)."""

    ids: frozenset[int]
    codes: tuple[CodeType, ...]


def _frames(codes: list[CodeType]) -> _Frames:
    return _Frames(frozenset(map(id, codes)), tuple(codes))


@_probe(ACCELERATE_PREPARE)
def _accelerate_frames(module: Any) -> tuple[_Frames, _Frames]:
    """The code of ``prepare_data_loader`` and ``get_sampler``, which read the batch sampler's
    ``sampler`` and ``batch_size`` themselves, and of every method of the two wrappers, which
    iterate it; ``prepare_data_loader`` must still go through all three."""
    prepare = _code("accelerate.data_loader.prepare_data_loader", getattr(module, "prepare_data_loader", None))
    get_sampler = _code("accelerate.data_loader.get_sampler", getattr(module, "get_sampler", None))
    wrappers = [_class(module, name) for name in ("BatchSamplerShard", "DataLoaderDispatcher")]
    unused = [name for name in ("get_sampler", "BatchSamplerShard", "DataLoaderDispatcher") if name not in prepare.co_names]
    if unused:
        raise _Missing(f"prepare_data_loader no longer uses {' nor '.join(unused)}")
    return _frames([prepare, get_sampler]), _frames([code for cls in wrappers for code in _class_codes(cls)])


def accelerate_prepares(frame: FrameType) -> bool:
    """Whether ``frame`` (the caller of a batch sampler's ``sampler``, ``batch_size`` or ``__iter__``)
    belongs to Accelerate preparing a plain DataLoader over it (``prepare_data_loader``,
    ``get_sampler``), or it or one of the five frames below it to a wrapper that shards or dispatches
    its batches (between a wrapper's iterator and the batch sampler: DataLoader.__iter__, its
    _get_iterator, the iterator's __init__ and _reset). False, at the cost of one dict lookup, where
    Accelerate's data_loader is not imported; else a comparison of code ids per frame."""
    module = sys.modules.get("accelerate.data_loader")
    if module is None:
        return False
    prepares, wrappers = _accelerate_frames(module)
    if id(frame.f_code) in prepares.ids:
        return True
    for _ in range(6):
        if frame is None:
            return False
        if id(frame.f_code) in wrappers.ids:
            return True
        frame = frame.f_back
    return False


ACCELERATE_STATE_MIXIN = Hook(
    "accelerate",
    "accelerate.data_loader.DataLoaderStateMixin.begin(), which pads no last batch (leaves remainder at -1) "
    "where the loader's _drop_last is set",
    "keep accelerator.gather_for_metrics from dropping rows of an AcceleratedLoader's last batch",
    ("1.15.0",),
)


@_probe(ACCELERATE_STATE_MIXIN)
def _accelerate_mixin() -> str:
    from accelerate.data_loader import DataLoaderStateMixin

    begin = _code("DataLoaderStateMixin.begin", getattr(DataLoaderStateMixin, "begin", None))
    if "_drop_last" not in begin.co_names:
        raise _Missing("DataLoaderStateMixin.begin() no longer reads _drop_last")
    return "_drop_last"


def accelerate_no_remainder(loader: Any) -> None:
    """Tells Accelerate's ``DataLoaderStateMixin`` that ``loader`` pads no last batch."""
    setattr(loader, _accelerate_mixin(), True)


ACCELERATE_STATE = Hook(
    "accelerate",
    "accelerate.state.PartialState._shared_state, the state every PartialState shares (a dict)",
    "say how Accelerate runs this program when dist_info='torch' finds no process group",
    ("1.15.0",),
)


def accelerate_shared_state() -> dict[str, Any]:
    """A copy of the state Accelerate's ``PartialState`` objects share (empty where none has been
    made), or ``{}`` where ``accelerate.state`` was never imported; imports nothing. Checked at each
    call: it is called only to word an error."""
    module = sys.modules.get("accelerate.state")
    if module is None:
        return {}
    shared = getattr(getattr(module, "PartialState", None), "_shared_state", None)
    if not isinstance(shared, dict):
        raise ACCELERATE_STATE.missing(f"PartialState._shared_state is {type(shared).__name__}, not a dict")
    return dict(shared)


# --- Ray Train: prepare_data_loader() of a ChunkDataLoader -----------------------------------------

RAY_PREPARE = Hook(
    "ray",
    "ray.train.torch.prepare_data_loader, and the torch DataLoader subclass its module wraps a loader in",
    "refuse Ray Train's prepare_data_loader() of a chunksampler.torch.ChunkDataLoader, which would rebuild it "
    "around torch's DistributedSampler or fetch a batch ahead of its state_dict()",
    ("2.60.0",),
)


@_probe(RAY_PREPARE)
def _ray_modules(package: Any) -> _Frames:
    """The namespaces of the module of ``ray.train.torch.prepare_data_loader`` (which reads the
    loader's settings to rebuild it) and of each module defining a torch DataLoader subclass that
    module holds (the wrapper that iterates the loader a batch ahead), as ids of their dicts."""
    from torch.utils.data import DataLoader

    prepare = getattr(package, "prepare_data_loader", None)
    prepare = inspect.unwrap(prepare) if callable(prepare) else prepare
    if not inspect.isfunction(prepare):
        raise _Missing("ray.train.torch has no function prepare_data_loader")
    home = sys.modules.get(prepare.__module__)
    if home is None:
        raise _Missing(f"prepare_data_loader's module {prepare.__module__} is not imported")
    wrappers = [
        value for value in vars(home).values()
        if isinstance(value, type) and issubclass(value, DataLoader) and not value.__module__.startswith("torch.")
    ]
    if not wrappers:
        raise _Missing(f"{home.__name__} holds no torch DataLoader subclass to wrap a loader in")
    spaces = [vars(home), *(vars(sys.modules[wrapper.__module__]) for wrapper in wrappers)]
    return _Frames(frozenset(map(id, spaces)), ())


def ray_calls(frame: FrameType) -> bool:
    """Whether ``frame`` (the code reading a loader's attribute, or iterating it) is Ray Train's
    ``prepare_data_loader`` or the wrapper it returns. False, at the cost of one dict lookup, where
    ``ray.train.torch`` was never imported."""
    package = sys.modules.get("ray.train.torch")
    if package is None:
        return False
    return id(frame.f_globals) in _ray_modules(package).ids


# --- Lightning, scvi-tools and annbatch: scvi's data module ---------------------------------------

LIGHTNING_PROGRESS = Hook(
    "lightning",
    "trainer.fit_loop.epoch_loop.batch_progress.current.processed, the batches of its current epoch Lightning's "
    "fit loop has trained on",
    "name the batches of the epoch a checkpoint holds (chunksampler.scvi.AnnbatchDataModule)",
    ("2.6.6",),
)


def lightning_batches_done(trainer: Any) -> tuple[int, int]:
    """``(trainer.current_epoch, batches)``: the epoch Lightning's fit loop is in and the batches of
    it the training loop has trained on. Read on ``trainer`` each time (its loops' state), at an
    epoch's start and at a checkpoint."""
    try:
        processed = trainer.fit_loop.epoch_loop.batch_progress.current.processed
    except AttributeError as error:
        raise LIGHTNING_PROGRESS.missing(str(error)) from None
    if not isinstance(processed, int):
        raise LIGHTNING_PROGRESS.missing(f"processed is a {type(processed).__name__}, not an int")
    return trainer.current_epoch, processed


SCVI_SPLIT = Hook(
    "scvi-tools",
    "scvi.dataloaders.AnnbatchDataModule.set_split, which stores the split it cuts in _train_mask and _val_mask",
    "serve scvi-tools' split (model.train's train_size, validation_size) from the samplers "
    "(chunksampler.scvi.AnnbatchDataModule)",
    ("1.5.1",),
)


@_probe(SCVI_SPLIT)
def _scvi_split_names(cls: type) -> None:
    set_split = _code(f"{cls.__qualname__}.set_split", getattr(cls, "set_split", None))
    unset = [name for name in ("_train_mask", "_val_mask") if name not in set_split.co_names]
    if unset:
        raise _Missing(f"{cls.__qualname__}.set_split no longer sets {' nor '.join(unset)}")


def scvi_split(module: Any, base: type) -> tuple[Any, Any]:
    """The training and validation masks (slices; the validation one None without validation rows)
    that ``base.set_split`` (scvi-tools' ``AnnbatchDataModule``) has just cut on ``module``."""
    _scvi_split_names(base)
    return module._train_mask, module._val_mask


ANNBATCH_SAMPLER = Hook(
    "annbatch",
    "annbatch.Loader._batch_sampler, the sampler its batch_sampler property returns and its iteration draws from",
    "serve each rank its shard through a copy of the dataset's Loader, as scvi-tools' own data module does "
    "(chunksampler.scvi.AnnbatchDataModule)",
    ("0.3.1",),
)


@_probe(ANNBATCH_SAMPLER)
def _annbatch_slot(cls: type) -> str:
    batch_sampler = inspect.getattr_static(cls, "batch_sampler", None)
    if not isinstance(batch_sampler, property):
        raise _Missing(f"{cls.__qualname__}.batch_sampler is not a property")
    if "_batch_sampler" not in _code(f"{cls.__qualname__}.batch_sampler", batch_sampler.fget).co_names:
        raise _Missing(f"{cls.__qualname__}.batch_sampler no longer returns _batch_sampler")
    return "_batch_sampler"


def annbatch_loader(loader: Any, sampler: Any) -> Any:
    """A shallow copy of annbatch's ``loader`` that draws its batches from ``sampler``."""
    slot = _annbatch_slot(type(loader))
    copied = copy.copy(loader)
    setattr(copied, slot, sampler)
    return copied


# --- the Hugging Face Trainer ----------------------------------------------------------------------

TRAINER = Hook(
    "transformers",
    "transformers.Trainer's _save_checkpoint(self, model, trial), which chunksampler.transformers overrides, and "
    "_get_output_dir(trial) and _get_collator_with_removed_columns(data_collator, description), which it calls",
    "save the training sampler's state in each checkpoint and hand the loaders the Trainer's collator "
    "(chunksampler.transformers.ChunkTrainer)",
    ("5.24.0",),
)


def _signature(cls: type, name: str) -> inspect.Signature:
    method = inspect.getattr_static(cls, name, None)
    if not inspect.isfunction(inspect.unwrap(method) if callable(method) else method):
        raise _Missing(f"Trainer has no method {name}")
    return inspect.signature(method)


@_probe(TRAINER)
def _trainer_hooks(cls: type) -> None:
    save = _signature(cls, "_save_checkpoint")
    if list(save.parameters) != ["self", "model", "trial"]:
        raise _Missing(f"Trainer._save_checkpoint{save}, not (self, model, trial)")
    for name, args, kwargs in (
        ("_get_output_dir", (None,), {"trial": None}),
        ("_get_collator_with_removed_columns", (None, None), {"description": "training"}),
    ):
        signature = _signature(cls, name)
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            raise _Missing(f"Trainer.{name}{signature} takes other arguments") from None


def trainer_hooks() -> None:
    """Checks the Trainer's private methods that ``ChunkTrainerMixin`` overrides and calls."""
    import transformers

    _trainer_hooks(transformers.Trainer)


def trainer_output_dir(trainer: Any, trial: Any) -> str:
    """The Trainer's output directory for ``trial`` (None: no hyperparameter search)."""
    trainer_hooks()
    return trainer._get_output_dir(trial=trial)  # type: ignore[no-any-return]


def trainer_collator(trainer: Any, collator: Any, description: str) -> Any:
    """``collator`` as the Trainer hands it to its own loaders: the dataset's columns the model's
    ``forward`` does not take removed first."""
    trainer_hooks()
    return trainer._get_collator_with_removed_columns(collator, description=description)


HOOKS = (
    TORCH_LOADER, ACCELERATE_PREPARE, ACCELERATE_STATE_MIXIN, ACCELERATE_STATE, RAY_PREPARE, LIGHTNING_PROGRESS,
    SCVI_SPLIT, ANNBATCH_SAMPLER, TRAINER,
)
