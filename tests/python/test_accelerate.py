"""chunksampler.accelerate: a ChunkDataLoader handed to Hugging Face Accelerate. A 2-process job
(``accelerate launch --multi_gpu --num_processes 2`` with ``Accelerator(cpu=True)``: gloo on the CPU;
accelerate_job.py) checked against the samplers' own batches, and the refusals and the device
placement in this process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_tree_clean, make_example_tree, shown_output
from launch import Launch, check_crash_and_resume, crash_then_resume, waited

import chunksampler as cs

torch = pytest.importorskip("torch")
accelerate = pytest.importorskip("accelerate")
from chunksampler.accelerate import AcceleratedLoader, prepare_loader  # noqa: E402
from chunksampler.torch import BatchSampler, ChunkDataLoader  # noqa: E402

import accelerate_job as job  # noqa: E402  (tests/python is on sys.path, as for conftest)

JOB = Path(__file__).with_name("accelerate_job.py")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "accelerate_train.py"


def launch_command(script: Path, *args: str, multi_gpu: bool = True) -> list[str]:
    """``accelerate launch`` of ``script`` on 2 CPU processes (``--multi_gpu`` starts them with
    torchrun; the scripts' ``Accelerator(cpu=True)`` then runs gloo on the CPU; without it Accelerate
    starts one process). Port 0: a free one of Accelerate's choosing, since its default, 29500, is
    every launch's: two at once would meet."""
    return [sys.executable, "-m", "accelerate.commands.launch", *(["--multi_gpu"] if multi_gpu else []),
            "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", "0", str(script), *args]


def launch(out: Path, name: str, script: Path, *args: str, multi_gpu: bool = True) -> Launch:
    return Launch(out, name, launch_command(script, *args, multi_gpu=multi_gpu))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    root = tmp_path_factory.mktemp("accelerate")
    crash = launch_command(EXAMPLE, "work/accelerate", "--epochs", "2", "--stop-after", "21")
    resume = launch_command(EXAMPLE, "work/accelerate", "--epochs", "2", "--resume", "work/accelerate/step-20")
    # The example as its page shows it: in an example tree, writing under work/accelerate.
    started = (launch(root / "job", "accelerate_job.py", JOB, str(root / "job")),
               launch(make_example_tree(root / "example"), "accelerate_train.py", EXAMPLE, "work/accelerate",
                      "--epochs", "2"),
               crash_then_resume(make_example_tree(root / "crash"), "accelerate_train.py --stop-after, --resume",
                                 crash, resume),
               launch(root / "one", "accelerate_job.py --one-process", JOB, str(root / "one"), "--one-process",
                      multi_gpu=False))
    with waited(*started) as done:
        yield done


@pytest.fixture(scope="module")
def main(jobs):
    return jobs[0]


def expected(rank: int, epochs=range(job.EPOCHS)) -> dict[int, list[list[int]]]:
    """Each epoch's batches of rank ``rank`` of 2, as the sampler plays them."""
    batches = BatchSampler(cs.DistributedSampler(job.base(), dist_info=lambda: (rank, 2)), job.N_OBS)
    out = {}
    for epoch in epochs:
        batches.set_epoch(epoch)
        out[epoch] = list(batches)
    return out


def test_each_process_reads_its_shard_with_chunk_locality(main):
    full = [main.result("full", rank)["epochs"] for rank in (0, 1)]
    for rank in (0, 1):
        want = expected(rank)
        for epoch in range(job.EPOCHS):
            got = full[rank][str(epoch)]
            # The sampler's own batches, in its order: no round-robin, no padding, nothing re-dealt.
            assert got["batches"] == want[epoch]
            assert got["len"] == len(got["batches"]) == 16
            assert got["devices"] == ["cpu"]
    for epoch in range(job.EPOCHS):
        rows = [[i for batch in full[rank][str(epoch)]["batches"] for i in batch] for rank in (0, 1)]
        assert len(set(rows[0])) == len(rows[0]) == 1024 and not set(rows[0]) & set(rows[1])
    # set_epoch reaches the sampler: every epoch a new order.
    assert full[0]["0"]["batches"] != full[0]["1"]["batches"] != full[0]["2"]["batches"]


@pytest.mark.parametrize("prefix", ["", "stateful-"], ids=["save_state", "use_stateful_dataloader"])
def test_save_state_resumes_mid_epoch_exactly(main, prefix):
    for rank in (0, 1):
        full = main.result("full", rank)["epochs"]
        cut = main.result(f"{prefix}cut", rank)
        assert "error" not in cut, cut.get("traceback")
        assert cut["epochs"]["1"]["batches"] == full["1"]["batches"][: job.CUT_AT + job.RAN_ON]
        resumed = main.result(f"{prefix}resumed", rank)
        assert "error" not in resumed, resumed.get("traceback")
        assert resumed["start"] == job.CUT_EPOCH
        assert resumed["epochs"]["1"]["batches"] == full["1"]["batches"][job.CUT_AT:]
        assert resumed["epochs"]["1"]["len"] == 16  # the epoch's count from its start, as Accelerate counts
        assert resumed["epochs"]["2"]["batches"] == full["2"]["batches"]
        # The skipped batches were not read: only the rows of the batches trained after the restore.
        trained = sum(len(b) for epoch in resumed["epochs"].values() for b in epoch["batches"])
        assert resumed["rows_read"] == trained == (11 + 16) * 64


def test_gradients_sync_at_each_accumulation_and_at_the_epochs_end(main):
    for rank in (0, 1):
        sync = main.result("accumulate", rank)["epochs"]["0"]["sync"]
        # gradient_accumulation_steps=3 over 16 batches: after batches 3, 6, ..., 15, and the last.
        assert [k for k, synced in enumerate(sync, 1) if synced] == [3, 6, 9, 12, 15, 16]


@pytest.mark.parametrize("part, error, words", [
    ("plain", "ConfigError", "chunksampler.accelerate.prepare_loader"),
    ("plain-split", "ConfigError", "deals this sampler's batches round-robin"),
    ("plain-dispatch", "ConfigError", "split_batches/dispatch_batches"),
    ("split", "ConfigError", "DataLoaderConfiguration(split_batches=False)"),
    ("dispatch", "ConfigError", "DataLoaderConfiguration(dispatch_batches=False)"),
    ("not-distributed", "ConfigError", "not a DistributedSampler"),
    ("wrong-rank", "ConfigError", "rank 1: dist_info gave rank 0 of world_size 2"),
    ("skip", "NotADataLoaderError", "accelerator.save_state()/load_state()"),
])
def test_each_wrong_combination_stops_every_process_with_our_error(main, part, error, words):
    results = [main.result(part, rank) for rank in (0, 1)]
    for result in results:
        assert result.get("error") == error, result
        assert words in result["message"]
        assert "ConfigError" in result["mro"] and "ValueError" in result["mro"]
    assert results[0]["message"] == results[1]["message"]


def test_the_example_prints_what_its_page_shows(jobs):
    example = jobs[1]
    assert example.returncode == 0, example.output[-3000:]
    printed = [line for line in example.output.splitlines() if line.startswith("epoch ")]
    assert printed == shown_output("accelerate-train").splitlines()[:2]
    assert (example.out / "work" / "accelerate" / "step-20").is_dir(), example.output[-3000:]
    assert_tree_clean(example.out, "accelerate_train.py")


def test_the_example_dies_at_its_crash_and_resumes_as_the_uninterrupted_run(jobs):
    full, chained = jobs[1], jobs[2]
    check_crash_and_resume(full, chained, "accelerate-train")
    work = chained.out / "work" / "accelerate"
    assert sorted(p.name for p in work.iterdir()) == ["step-20"]  # nothing half written left behind
    assert_tree_clean(chained.out, "accelerate_train.py")


def test_one_process_launched_for_two_names_the_launch(jobs):
    one = jobs[3]
    assert one.returncode == 0, one.output[-3000:]
    error = one.result("one-process-torch", 0)
    assert error["error"] == "DistEnvironmentError", error
    for words in ("distributed_type=NO, num_processes=1", "it set MASTER_ADDR/MASTER_PORT",
                  "accelerate launch --multi_gpu --num_processes N", "accelerate config"):
        assert words in error["message"], error["message"]
    refused = one.result("one-process-prepare", 0)
    assert refused["error"] == "ConfigError"
    assert "world_size 2, but this is process 0 of the accelerator's 1. Accelerate runs" in refused["message"]
    assert "--multi_gpu" in refused["message"]


# --- in this process: one process, no launcher ----------------------------------------------------


def loader(**kwargs) -> ChunkDataLoader:
    return ChunkDataLoader(job.dataset(), job.base(), **kwargs)


@pytest.fixture(scope="module")
def accelerator():
    return accelerate.Accelerator(cpu=True)


def test_batches_are_placed_on_the_device():
    # On a CPU machine the accelerator's device is the CPU, where the batches are already: the meta
    # device shows that each batch is moved, every tensor of it.
    prepared = AcceleratedLoader(loader(), device=torch.device("meta"))
    batch = next(iter(prepared))
    assert [t.device.type for t in batch] == ["meta"] * 3


def test_prepare_loader_registers_for_checkpointing_and_places_on_the_accelerators_device(accelerator):
    prepared = prepare_loader(accelerator, loader())
    assert prepared in accelerator._custom_objects
    assert prepared.device == accelerator.device
    assert prepare_loader(accelerator, loader(), device_placement=False).device is None
    assert len(prepared) == len(prepared.loader) == 32
    assert sorted(int(i) for batch in prepared for i in batch[0]) == list(range(job.N_OBS))


def test_the_saved_state_is_the_loaders_envelope_and_a_bare_state_of_0_4_still_resumes():
    prepared = AcceleratedLoader(loader(), device=None)
    whole = [batch[0].tolist() for batch in AcceleratedLoader(loader(), device=None)]
    batches = iter(prepared)
    for _ in range(5):
        next(batches)
    state = prepared.state_dict()
    train = prepared.loader.state_dict()
    assert state == {"format": "chunksampler.loaders/1", "train": train, "world_size": 1, "epoch": 0, "batches_done": 5}
    for saved in (state, state["train"]):  # the envelope, and the bare state chunksampler 0.4 saved
        resumed = AcceleratedLoader(loader(), device=None)
        resumed.load_state_dict(saved)
        assert [batch[0].tolist() for batch in resumed] == whole[5:]
    with pytest.raises(cs.StateFormatError, match="format 'chunksampler.loaders/2' is unknown"):
        AcceleratedLoader(loader(), device=None).load_state_dict({**state, "format": "chunksampler.loaders/2"})


def test_the_plain_dataloader_is_refused_in_one_process_too(accelerator):
    plain = torch.utils.data.DataLoader(job.dataset(), batch_sampler=BatchSampler(job.base(), job.N_OBS))
    with pytest.raises(cs.ConfigError, match="prepare_loader"):
        accelerator.prepare(plain)


def test_prepare_loader_takes_a_chunk_data_loader(accelerator):
    plain = torch.utils.data.DataLoader(job.dataset(), batch_sampler=BatchSampler(job.base(), job.N_OBS))
    with pytest.raises(TypeError, match=r"ChunkDataLoader\(dataset, sampler"):
        prepare_loader(accelerator, plain)
    with pytest.raises(TypeError, match="accelerate.Accelerator"):
        prepare_loader(object(), loader())


def test_skip_first_batches_names_load_state_and_hasattr_still_answers(accelerator):
    prepared = prepare_loader(accelerator, loader())
    assert not hasattr(prepared, "batch_sampler")
    with pytest.raises(cs.NotADataLoaderError, match="load_state"):
        accelerate.skip_first_batches(prepared, 2)


def test_a_distributed_sampler_of_another_world_size_is_refused_in_one_process(accelerator):
    sampler = cs.DistributedSampler(job.base(), dist_info=lambda: (0, 2))
    with pytest.raises(cs.ConfigError, match="rank 0 of world_size 2, but this is process 0 of the accelerator's 1"):
        prepare_loader(accelerator, ChunkDataLoader(job.dataset(), sampler))


def test_the_loader_for_accelerate_needs_no_lightning():
    code = ("import sys, chunksampler.accelerate, chunksampler.torch; "
            "print('lightning' in sys.modules, 'pytorch_lightning' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "False False\n"
    # Nor does chunksampler import any of the trainers whose integrations it holds.
    code = "import sys, chunksampler; print([m for m in ('accelerate', 'transformers', 'ray') if m in sys.modules])"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
