"""A Ray Train job: examples/python/ray_train.py's training function, with what a test checks;
test_ray.py runs this script and reads what the workers write.

    python ray_job.py OUT

``ray.init(num_cpus=2)`` and one ``TorchTrainer`` fit on 2 workers (gloo on the CPU) of the
example's ``train_loop`` for 3 epochs, which dies at step 23 (3 steps after its step-20 checkpoint);
Ray starts the workers again (``FailureConfig(max_failures=1)``) and they resume from that
checkpoint. Before the first attempt trains, each worker tries Ray's ``prepare_data_loader`` on a
``ChunkDataLoader``, with its defaults and with ``add_dist_sampler=False``, and writes what each
raised to ``OUT/refusals-rank<r>.json``; the example writes each worker's batches per epoch to
``OUT/epoch<e>-rank<r>.json`` and prints its lines, which Ray forwards to this driver's output.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
# The workers import the example's module too (Ray pickles the training function by reference).
sys.path.insert(0, str(EXAMPLES))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(EXAMPLES), os.environ.get("PYTHONPATH"))))
# Every line the workers print, as printed: Ray otherwise folds lines that several workers print alike.
os.environ["RAY_DEDUP_LOGS"] = "0"

import ray.train  # noqa: E402
import ray.train.torch  # noqa: E402
import ray_train as example  # noqa: E402

import chunksampler as cs  # noqa: E402
from chunksampler.torch import ChunkDataLoader  # noqa: E402

EPOCHS, FAIL_AT = 3, 23


def error(e: BaseException) -> dict:
    return {"error": type(e).__name__, "message": str(e), "mro": [c.__name__ for c in type(e).__mro__],
            "traceback": traceback.format_exc()[-2000:]}


def train(config: dict) -> None:
    if not ray.train.get_checkpoint():
        rank = ray.train.get_context().get_world_rank()
        sampler = cs.DistributedSampler(cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64),
                                        dist_info="torch")
        refusals = {}
        for name, kwargs in (("default", {}), ("no-dist-sampler", {"add_dist_sampler": False})):
            try:
                next(iter(ray.train.torch.prepare_data_loader(ChunkDataLoader(example.rows(2048, 0), sampler),
                                                              **kwargs)))
                refusals[name] = {"error": None}
            except Exception as e:  # noqa: BLE001 -- recorded and checked by the test
                refusals[name] = error(e)
        Path(config["record"], f"refusals-rank{rank}.json").write_text(json.dumps(refusals))
    example.train_loop(config)


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    example.fit(train, {"epochs": EPOCHS, "fail_at": FAIL_AT, "record": str(out)}, out / "ray")


if __name__ == "__main__":
    main()
