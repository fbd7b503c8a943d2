"""chunksampler.transformers: the Hugging Face Trainer over chunksampler's loaders. A 2-process job
(``torchrun --nproc-per-node 2``, gloo on the CPU; trainer_job.py) checked against the sampler's own
batches, the example, and the loaders in this process."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_tree_clean, make_example_tree, shown_output
from launch import Launch, check_crash_and_resume, crash_then_resume, waited

import chunksampler as cs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from chunksampler.torch import BatchSampler, ChunkDataLoader  # noqa: E402
from chunksampler.transformers import ChunkTrainer  # noqa: E402

import trainer_job as job  # noqa: E402  (tests/python is on sys.path, as for conftest)

JOB = Path(__file__).with_name("trainer_job.py")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "trainer_train.py"


def torchrun(out: Path, name: str, script: Path, *args: str) -> Launch:
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script), *args]
    return Launch(out, name, command)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    root = tmp_path_factory.mktemp("trainer")
    # The example as its page shows it: in an example tree, writing under work/trainer.
    # The crash and the resume as the page runs them (--standalone: each on a free port of its own).
    standalone = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(EXAMPLE),
                  "work/trainer", "--epochs", "2"]
    started = (torchrun(root / "job", "trainer_job.py", JOB, str(root / "job")),
               torchrun(make_example_tree(root / "example"), "trainer_train.py", EXAMPLE, "work/trainer",
                        "--epochs", "2"),
               crash_then_resume(make_example_tree(root / "crash"), "trainer_train.py --stop-after, --resume",
                                 [*standalone, "--stop-after", "23"],
                                 [*standalone, "--resume", "work/trainer/checkpoint-20"]))
    with waited(*started) as done:
        yield done


@pytest.fixture(scope="module")
def main(jobs):
    return jobs[0]


def expected(rank: int) -> dict[str, list[list[int]]]:
    batches = BatchSampler(cs.DistributedSampler(job.sampler(), dist_info=lambda: (rank, 2)), job.N_OBS)
    out = {}
    for epoch in range(job.EPOCHS):
        batches.set_epoch(epoch)
        out[str(epoch)] = list(batches)
    return out


def trained(launch: Launch, part: str, rank: int) -> dict[str, list[list[int]]]:
    result = launch.result(part, rank)
    assert "error" not in result, result.get("traceback")
    return result["trained"]


def test_each_process_trains_its_shard_a_new_order_each_epoch(main):
    full = [trained(main, "full", rank) for rank in (0, 1)]
    for rank in (0, 1):
        assert full[rank] == expected(rank)  # the sampler's batches, in its order, epoch by epoch
        assert full[rank]["0"] != full[rank]["1"] != full[rank]["2"]
    for epoch in full[0]:
        rows = [[i for batch in full[rank][epoch] for i in batch] for rank in (0, 1)]
        assert len(rows[0]) == len(set(rows[0])) == 1024 and not set(rows[0]) & set(rows[1])


def test_resume_from_a_mid_epoch_checkpoint_trains_exactly_the_rest(main):
    for rank in (0, 1):
        full, resumed = trained(main, "full", rank), trained(main, "resumed", rank)
        cut = main.result("cut", rank)
        assert cut.get("error") == "KeyboardInterrupt"  # stopped at step 23, 3 steps after checkpoint-20
        # Checkpoint 20: epoch 0's 16 steps and 4 of epoch 1.
        assert resumed == {"1": full["1"][4:], "2": full["2"]}


def test_a_checkpoint_of_another_seed_is_refused_on_every_process(main):
    results = [main.result("other-seed", rank) for rank in (0, 1)]
    for result in results:
        assert result["error"] == "StateMismatchError", result
        assert "chunksampler_state.json holds the state of another training sampler" in result["message"]
        assert "seed" in result["message"]


def test_evaluation_reads_each_row_once_across_the_processes(main):
    evaluated = [main.result("eval", rank) for rank in (0, 1)]
    rows = [[i for batch in result["evaluated"] for i in batch] for result in evaluated]
    assert len(evaluated[0]["evaluated"]) == len(evaluated[1]["evaluated"]) == 10  # equal counts: gathered per batch
    assert sorted(rows[0] + rows[1]) == list(range(job.N_EVAL))


def test_a_sampler_of_another_rank_is_refused_on_every_process(main):
    for rank in (0, 1):  # only rank 1's sampler is wrong; rank 0 must not wait for it
        result = main.result("foreign-rank", rank)
        assert result["error"] == "ConfigError", result
        assert "rank 1: train_sampler's dist_info gave rank 0 of world_size 2, but this is process 1" in result["message"]


def test_a_trainer_that_prepares_a_dataloader_over_batch_sampler_is_refused(main):
    for rank in (0, 1):
        result = main.result("plain-loader", rank)
        assert result["error"] == "ConfigError", result
        assert "chunksampler.accelerate.prepare_loader" in result["message"]


def test_the_example_prints_what_its_page_shows(jobs):
    example = jobs[1]
    assert example.returncode == 0, example.output[-3000:]
    printed = [line for line in example.output.splitlines() if line.startswith("epoch ")]
    assert printed == shown_output("trainer-train").splitlines()[:2]
    assert (example.out / "work" / "trainer" / "checkpoint-20").is_dir(), example.output[-3000:]
    assert_tree_clean(example.out, "trainer_train.py")


def test_the_example_dies_at_its_crash_and_resumes_as_the_uninterrupted_run(jobs):
    full, chained = jobs[1], jobs[2]
    check_crash_and_resume(full, chained, "trainer-train")
    assert_tree_clean(chained.out, "trainer_train.py")


# --- in this process --------------------------------------------------------------------------


@pytest.fixture
def args(tmp_path):
    return transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")


def test_the_loaders_are_chunk_data_loaders_of_the_samplers(args):
    trainer = ChunkTrainer(job.Model(), args, train_dataset=job.Rows(job.N_OBS, 0),
                           eval_dataset=job.Rows(job.N_EVAL, 1), train_sampler=job.sampler(),
                           eval_sampler=cs.SequentialSampler(chunk_size=50, preload_nchunks=4, batch_size=50))
    train = trainer.get_train_dataloader()
    assert isinstance(train, ChunkDataLoader) and isinstance(train.sampler, cs.DistributedSampler)
    assert (train.sampler.rank, train.sampler.world_size) == (0, 1)
    assert len(train) == 32
    batch = next(iter(train))
    assert set(batch) == {"x", "labels", "idx"} and batch["idx"].shape == (64,)  # the Trainer's collator
    evaluation = trainer.get_eval_dataloader()
    assert evaluation.sampler.mode == "global" and len(evaluation) == 20


def test_a_source_trains_its_collated_batches_and_a_given_collator_sees_each(args):
    # A Reader over a mapping: each batch comes out a dict of tensors, which the model takes as it is
    # (the Trainer's default collator, which expects a list of rows, is not applied); a data_collator
    # given to the Trainer is applied to each batch.
    from chunksampler.reader import Reader

    rows = job.Rows(job.N_OBS, 0)
    source = Reader({"x": rows.x.numpy(), "labels": rows.y.numpy(), "idx": np.arange(job.N_OBS)})
    args.num_train_epochs = 1
    model = job.Model()
    trainer = ChunkTrainer(model, args, train_dataset=source, train_sampler=job.sampler())
    trainer.train()
    want = BatchSampler(cs.DistributedSampler(job.sampler(), dist_info=lambda: (0, 1)), job.N_OBS)
    want.set_epoch(0)
    want = list(want)
    assert model.trained[0] == want
    seen = []

    def collator(batch):
        seen.append(batch["idx"].tolist())
        return batch

    trainer = ChunkTrainer(job.Model(), args, collator, train_dataset=source, train_sampler=job.sampler())
    loader = trainer.get_train_dataloader()
    loader.set_epoch(0)  # as the Trainer does before each epoch
    first = next(iter(loader))
    assert seen == [first["idx"].tolist()] == [want[0]]
    # A zarr 3 array has no len(), which the Trainer asks: it is read through a Reader of it.
    zarr = pytest.importorskip("zarr")
    array = zarr.create_array(zarr.storage.MemoryStore(), shape=(job.N_OBS,), dtype="i8", chunks=(16,))
    array[:] = np.arange(job.N_OBS)
    trainer = ChunkTrainer(job.Model(), args, train_dataset=array, train_sampler=job.sampler())
    loader = trainer.get_train_dataloader()
    loader.set_epoch(0)
    assert next(iter(loader)).tolist() == want[0]


def test_missing_samplers_and_foreign_ranks_are_named(args):
    trainer = ChunkTrainer(job.Model(), args, train_dataset=job.Rows(job.N_OBS, 0))
    with pytest.raises(cs.ConfigError, match="train_sampler is not given"):
        trainer.get_train_dataloader()
    foreign = cs.DistributedSampler(job.sampler(), dist_info=lambda: (1, 2))
    trainer = ChunkTrainer(job.Model(), args, train_dataset=job.Rows(job.N_OBS, 0), train_sampler=foreign)
    with pytest.raises(cs.ConfigError, match="rank 1 of world_size 2, but this is process 0 of the Trainer's 1"):
        trainer.get_train_dataloader()
    with pytest.raises(TypeError, match="train_sampler must be a chunksampler"):
        ChunkTrainer(job.Model(), args, train_dataset=job.Rows(job.N_OBS, 0),
                     train_sampler=torch.utils.data.RandomSampler(range(10)))


def test_one_process_without_torchrun_names_the_launch(args):
    # `python script.py` under the Trainer: Accelerate's state (which the Trainer's arguments make) is
    # one process, and no process group exists.
    assert args.world_size == 1
    with pytest.raises(cs.DistEnvironmentError) as error:
        cs.DistributedSampler(job.sampler(), dist_info="torch")
    for words in ("distributed_type=NO, num_processes=1", "torchrun --nproc-per-node N script.py",
                  "ChunkTrainer takes the plain sampler"):
        assert words in str(error.value), str(error.value)
    foreign = cs.DistributedSampler(job.sampler(), dist_info=lambda: (1, 2))
    trainer = ChunkTrainer(job.Model(), args, train_dataset=job.Rows(job.N_OBS, 0), train_sampler=foreign)
    with pytest.raises(cs.ConfigError,
                       match=r"process 0 of the Trainer's 1\. Accelerate runs this program as 1 process"):
        trainer.get_train_dataloader()


def test_skip_first_batches_draws_indices_again_and_reads_only_the_rest():
    # How the Trainer resumes: Accelerate's skip_first_batches makes a DataLoader over the loader's
    # own batch sampler that drops the first k batches, with the loader's collate_fn.
    from accelerate import skip_first_batches

    reads = []

    class Counted(job.Rows):
        def __getitem__(self, i):
            reads.append(i)
            return super().__getitem__(i)

    loader = ChunkDataLoader(Counted(job.N_OBS, 0), job.sampler(), collate_fn=transformers.default_data_collator)
    loader.set_epoch(1)
    reference = BatchSampler(job.sampler(), job.N_OBS)
    reference.set_epoch(1)
    want = list(reference)[5:]
    skipped = skip_first_batches(loader, 5)
    got = [batch["idx"].tolist() for batch in skipped]
    assert got == want
    assert sorted(reads) == sorted(i for batch in want for i in batch)
