"""chunksampler._internals: every hook of another library's internals passes its probe at the installed
versions, and each one removed (an attribute deleted, a class replaced, a signature changed, a frame
layout changed) raises IntegrationError naming the library and its installed version where the
integration first needs it; where the library is not in play, nothing is probed. The pins are the
lowest versions the extras allow, so the stacks stage runs the integrations at both."""

from __future__ import annotations

import builtins
import pickle
import re
import sys
import tomllib
import types
from importlib import metadata

import pytest
from conftest import SOURCE, rng

import chunksampler as cs
from chunksampler import _internals


def reprobe() -> None:
    """Forgets every probe's answer: a probe checks its hook once, at its first use."""
    for probe in _internals.PROBES:
        probe.cache_clear()


@pytest.fixture(autouse=True)
def fresh_probes():
    """Each test probes afresh, and leaves no probe's answer about a hook it removed behind."""
    reprobe()
    yield
    reprobe()


def missing(library: str):
    """pytest.raises for our error naming ``library`` at its installed version."""
    version = metadata.version(library)
    return pytest.raises(cs.IntegrationError, match=rf"^{re.escape(library)} {re.escape(version)} lacks ")


def check_error(info, library: str) -> None:
    error = info.value
    assert error.library == library and error.version == metadata.version(library)
    hook = next(hook for hook in _internals.HOOKS if hook.hook == error.hook)
    assert f"checked on {library} {' and '.join(hook.checked_on)}" in str(error)


def sampler():
    return cs.RandomSampler(chunk_size=10, preload_nchunks=2, batch_size=10, rng=rng(0))


def test_the_error_is_a_runtime_error_with_its_data_and_pickles():
    error = cs.IntegrationError("torch 9 lacks ...", library="torch", version="9", hook="_num_yielded")
    assert isinstance(error, RuntimeError) and not isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.library, copy.version, copy.hook) == ("torch 9 lacks ...", "torch", "9", "_num_yielded")
    # torch's DataLoader re-raises a worker's exception as its type called with the message alone.
    assert str(cs.IntegrationError("from a worker")) == "from a worker"


# --- the versions ------------------------------------------------------------------------------------


def pins() -> dict[str, str]:
    """tests/stacks/requirements.txt: package name (normalized) -> pinned version."""
    found = {}
    for line in (SOURCE / "tests" / "stacks" / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            found[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return found


def test_each_hook_was_checked_on_the_pinned_version_of_its_library():
    pinned = pins()
    for hook in _internals.HOOKS:
        assert pinned[hook.library] in hook.checked_on, (hook.library, pinned[hook.library], hook.checked_on)
    # torch 1.13 too: Debian's python3-torch, which the Debian stage runs.
    assert "1.13" in _internals.TORCH_LOADER.checked_on


# The extras whose lower bounds are not the pins: `all` names the others; `test` holds the test tools,
# not a library chunksampler works with.
NOT_INTEGRATIONS = {"all", "test"}
# torch's lower bound is Debian's python3-torch 1.13, which the Debian stage runs; the stacks stage
# runs the pin.
DEBIAN = {"torch": "1.13"}


def test_each_extras_lower_bound_is_its_pin_so_the_stacks_stage_runs_the_lowest_versions():
    from packaging.requirements import Requirement
    from packaging.version import Version

    pinned = pins()
    extras = tomllib.loads((SOURCE / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    checked = set()
    for extra, requirements in extras.items():
        if extra in NOT_INTEGRATIONS:
            continue
        for text in requirements:
            requirement = Requirement(text)
            if requirement.name == "chunksampler":
                continue
            (bound,) = requirement.specifier  # one lower bound, nothing above it
            assert bound.operator == ">=", (extra, text)
            name = re.sub(r"[-_.]+", "-", requirement.name).lower()
            lowest = DEBIAN.get(name, pinned[name])
            assert Version(bound.version) == Version(lowest), (extra, text, lowest)
            checked.add(name)
    assert {"torch", "lightning", "scvi-tools", "accelerate", "transformers", "ray", "annbatch"} <= checked


# --- torch: BatchSampler's count of the batches a DataLoader has handed on ----------------------------


@pytest.fixture
def dataloader():
    torch = pytest.importorskip("torch")
    return torch.utils.data.dataloader


def batches(n_obs: int = 40):
    from chunksampler.torch import BatchSampler

    return BatchSampler(sampler(), n_obs)


def test_torch_hooks_pass_and_a_loop_by_hand_counts_its_own_batches(dataloader):
    import torch.utils.data

    single, multi = _internals._torch_iterators()
    assert single is dataloader._SingleProcessDataLoaderIter and multi is dataloader._MultiProcessingDataLoaderIter
    by_hand = batches()
    iterator = iter(by_hand)
    next(iterator), next(iterator)
    assert by_hand._consumer is None and by_hand.state_dict()["batches_done"] == 2
    loaded = batches()
    batch_iterator = iter(torch.utils.data.DataLoader(range(40), batch_sampler=loaded))
    next(batch_iterator)
    assert loaded._consumer[1]() is batch_iterator and loaded.state_dict()["batches_done"] == 1


def test_a_torch_iterator_class_gone_raises_at_the_first_iteration(dataloader, monkeypatch):
    import torch.utils.data

    monkeypatch.delattr(dataloader, "_MultiProcessingDataLoaderIter")
    with missing("torch") as info:
        iter(torch.utils.data.DataLoader(range(40), batch_sampler=batches()))
    check_error(info, "torch")
    assert "has no class _MultiProcessingDataLoaderIter" in str(info.value)
    with missing("torch"):  # by hand too: the hook is checked, not the caller
        iter(batches())


def test_a_renamed_count_raises(dataloader, monkeypatch):
    base = dataloader._SingleProcessDataLoaderIter.__mro__[1]
    original = base.__next__

    def counting_elsewhere(self):
        batch = original(self)
        self._handed_out = self.__dict__.pop("_num_yielded")
        return batch

    monkeypatch.setattr(base, "__next__", counting_elsewhere)
    with missing("torch") as info:
        iter(batches())
    assert "_num_yielded is not the batches it has handed out" in str(info.value)


def test_another_frame_layout_raises(dataloader, monkeypatch):
    # The DataLoader's iterator calling iter() on its batch sampler through a helper of its module.
    monkeypatch.setattr(dataloader, "iter", lambda batch_sampler: builtins.iter(batch_sampler), raising=False)
    with missing("torch") as info:
        iter(batches())
    assert "from outside its own methods" in str(info.value)


# --- Accelerate -----------------------------------------------------------------------------------------


@pytest.fixture
def accelerate_loader():
    pytest.importorskip("torch")
    pytest.importorskip("accelerate")
    import accelerate.data_loader

    return accelerate.data_loader


def test_accelerate_hooks_pass_and_its_prepare_is_refused(accelerate_loader):
    import torch.utils.data

    plain = torch.utils.data.DataLoader(range(40), batch_sampler=batches())
    with pytest.raises(cs.ConfigError, match="Accelerate's prepare"):
        accelerate_loader.get_sampler(plain)
    assert batches().sampler.batch_size == 10  # read from anywhere else


@pytest.mark.parametrize(
    ("remove", "problem"),
    [
        (lambda module, mp: mp.delattr(module, "get_sampler"), "there is no accelerate.data_loader.get_sampler"),
        (lambda module, mp: mp.setattr(module, "BatchSamplerShard", lambda *a: None), "has no class BatchSamplerShard"),
        (lambda module, mp: mp.setattr(module, "prepare_data_loader", lambda loader, **kw: loader),
         "prepare_data_loader no longer uses get_sampler nor BatchSamplerShard nor DataLoaderDispatcher"),
    ],
    ids=["get_sampler gone", "BatchSamplerShard replaced", "prepare_data_loader changed"],
)
def test_an_accelerate_hook_gone_raises_at_a_guarded_read(accelerate_loader, monkeypatch, remove, problem):
    remove(accelerate_loader, monkeypatch)
    with missing("accelerate") as info:
        batches().sampler
    check_error(info, "accelerate")
    assert problem in str(info.value)


def test_without_accelerate_imported_nothing_is_probed(accelerate_loader, monkeypatch):
    monkeypatch.delattr(accelerate_loader, "get_sampler")
    monkeypatch.delitem(sys.modules, "accelerate.data_loader")
    assert batches().sampler.batch_size == 10 and not _internals.accelerate_prepares(sys._getframe())


def test_accelerate_gradient_state_hook(accelerate_loader, monkeypatch):
    from chunksampler.accelerate import AcceleratedLoader
    from chunksampler.torch import ChunkDataLoader

    loader = ChunkDataLoader(range(40), sampler())
    assert AcceleratedLoader(loader, device=None)._drop_last is True
    reprobe()
    def begin(self):
        self.reset()
        self.gradient_state._add_dataloader(self)

    monkeypatch.setattr(accelerate_loader.DataLoaderStateMixin, "begin", begin)
    with missing("accelerate") as info:
        AcceleratedLoader(loader, device=None)
    check_error(info, "accelerate")
    assert "begin() no longer reads _drop_last" in str(info.value)


def test_accelerate_shared_state_hook(monkeypatch):
    pytest.importorskip("accelerate")
    import accelerate.state

    from chunksampler._dist import accelerate_hint

    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    assert isinstance(_internals.accelerate_shared_state(), dict)
    monkeypatch.setattr(accelerate.state, "PartialState", types.SimpleNamespace())
    with missing("accelerate") as info:
        accelerate_hint()
    check_error(info, "accelerate")
    monkeypatch.delitem(sys.modules, "accelerate.state")  # never imported: nothing to read
    assert accelerate_hint() is None


# --- Ray Train ------------------------------------------------------------------------------------------


@pytest.fixture
def ray_torch():
    pytest.importorskip("torch")
    return pytest.importorskip("ray.train.torch")


def test_ray_hooks_pass_and_its_wrapper_is_refused(ray_torch):
    import torch
    from ray.train.torch.train_loop_utils import _WrappedDataLoader

    from chunksampler.torch import ChunkDataLoader

    assert len(next(iter(ChunkDataLoader(range(40), sampler())))) == 10  # a loop of one's own
    wrapped = _WrappedDataLoader(ChunkDataLoader(range(40), sampler()), torch.device("cpu"), False)
    with pytest.raises(cs.ConfigError, match="Ray Train's prepare_data_loader"):
        iter(wrapped)


def test_ray_prepare_data_loader_gone_raises(ray_torch, monkeypatch):
    from chunksampler.torch import ChunkDataLoader

    monkeypatch.delattr(ray_torch, "prepare_data_loader")
    with missing("ray") as info:
        next(iter(ChunkDataLoader(range(40), sampler())))
    check_error(info, "ray")
    assert "ray.train.torch has no function prepare_data_loader" in str(info.value)


def test_ray_prepare_data_loader_without_a_wrapper_raises(ray_torch, monkeypatch):
    from chunksampler.torch import ChunkDataLoader

    home = types.ModuleType("moved_train_loop_utils")
    exec("def prepare_data_loader(data_loader):\n    return data_loader\n", vars(home))
    monkeypatch.setitem(sys.modules, home.__name__, home)
    monkeypatch.setattr(ray_torch, "prepare_data_loader", home.prepare_data_loader)
    with missing("ray") as info:
        next(iter(ChunkDataLoader(range(40), sampler())))
    assert "moved_train_loop_utils holds no torch DataLoader subclass" in str(info.value)


def test_without_ray_imported_nothing_is_probed(ray_torch, monkeypatch):
    from chunksampler.torch import ChunkDataLoader

    monkeypatch.delattr(ray_torch, "prepare_data_loader")
    monkeypatch.delitem(sys.modules, "ray.train.torch")
    assert len(next(iter(ChunkDataLoader(range(40), sampler())))) == 10


# --- Lightning, scvi-tools and annbatch (scvi's data module) ---------------------------------------------


def test_lightning_batch_progress(monkeypatch):
    pytest.importorskip("lightning")
    from lightning.pytorch import Trainer

    trainer = Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    assert _internals.lightning_batches_done(trainer) == (0, 0)
    monkeypatch.delattr(trainer.fit_loop.epoch_loop, "batch_progress")
    with missing("lightning") as info:
        _internals.lightning_batches_done(trainer)
    check_error(info, "lightning")
    assert "batch_progress" in str(info.value)


@pytest.fixture
def scvi_module():
    pytest.importorskip("scvi")
    import scvi.dataloaders

    return scvi.dataloaders.AnnbatchDataModule


def test_scvi_split_hook(scvi_module, monkeypatch):
    cut = types.SimpleNamespace(_train_mask=slice(10, 40), _val_mask=slice(0, 10))
    assert _internals.scvi_split(cut, scvi_module) == (slice(10, 40), slice(0, 10))
    reprobe()

    def set_split(self, train_size=None, validation_size=None, shuffle_set_split=True, batch_size=None):
        self._split = (slice(10, 40), slice(0, 10))

    monkeypatch.setattr(scvi_module, "set_split", set_split)
    with missing("scvi-tools") as info:
        _internals.scvi_split(cut, scvi_module)
    check_error(info, "scvi-tools")
    assert "set_split no longer sets _train_mask nor _val_mask" in str(info.value)


def test_annbatch_loader_hook(monkeypatch):
    annbatch = pytest.importorskip("annbatch")

    class Loader(annbatch.Loader):
        def __init__(self) -> None:  # the hook is the class's; no collection is needed to see it
            pass

    shard = sampler()
    assert _internals.annbatch_loader(Loader(), shard).batch_sampler is shard
    reprobe()
    monkeypatch.setattr(annbatch.Loader, "batch_sampler", property(lambda self: self._sampler))
    with missing("annbatch") as info:
        _internals.annbatch_loader(Loader(), shard)
    check_error(info, "annbatch")
    assert "batch_sampler no longer returns _batch_sampler" in str(info.value)


# --- the Hugging Face Trainer ---------------------------------------------------------------------------


@pytest.fixture
def trainer_class():
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    _internals.trainer_hooks()  # present at the installed version
    reprobe()
    return transformers.Trainer


@pytest.mark.parametrize(
    ("name", "replacement", "problem"),
    [
        ("_save_checkpoint", lambda self, model, trial, metrics=None: None, "not (self, model, trial)"),
        ("_get_output_dir", None, "Trainer has no method _get_output_dir"),
        ("_get_collator_with_removed_columns", lambda self, data_collator, *, columns: None, "takes other arguments"),
    ],
    ids=["_save_checkpoint signature", "_get_output_dir gone", "_get_collator_with_removed_columns signature"],
)
def test_a_trainer_hook_changed_raises_when_the_trainer_is_made(trainer_class, monkeypatch, name, replacement, problem):
    from chunksampler.transformers import ChunkTrainer

    if replacement is None:
        monkeypatch.delattr(trainer_class, name)
    else:
        monkeypatch.setattr(trainer_class, name, replacement)
    with missing("transformers") as info:
        ChunkTrainer(train_sampler=sampler())
    check_error(info, "transformers")
    assert problem in str(info.value)


# Each hook's test of its removal: a hook added to _internals without one fails below.
REMOVALS = {
    "TORCH_LOADER": (test_a_torch_iterator_class_gone_raises_at_the_first_iteration, test_a_renamed_count_raises,
                     test_another_frame_layout_raises),
    "ACCELERATE_PREPARE": (test_an_accelerate_hook_gone_raises_at_a_guarded_read,),
    "ACCELERATE_STATE_MIXIN": (test_accelerate_gradient_state_hook,),
    "ACCELERATE_STATE": (test_accelerate_shared_state_hook,),
    "RAY_PREPARE": (test_ray_prepare_data_loader_gone_raises, test_ray_prepare_data_loader_without_a_wrapper_raises),
    "LIGHTNING_PROGRESS": (test_lightning_batch_progress,),
    "SCVI_SPLIT": (test_scvi_split_hook,),
    "ANNBATCH_SAMPLER": (test_annbatch_loader_hook,),
    "TRAINER": (test_a_trainer_hook_changed_raises_when_the_trainer_is_made,),
}


def test_every_hook_has_a_removal_test_and_is_listed():
    hooks = {name: value for name, value in vars(_internals).items() if isinstance(value, _internals.Hook)}
    assert set(hooks) == set(REMOVALS)
    assert sorted(_internals.HOOKS) == sorted(hooks.values())
