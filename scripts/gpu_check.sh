#!/usr/bin/env bash
# The checks that need a CUDA GPU (not part of CI; our CI machines have none). On one GPU, in the
# training stacks' environment (scripts/deps.sh) with the package's wheel and cupy:
#  1. annbatch's multi-GPU walk-through (examples/python/multi_gpu) with preload_to_gpu=True:
#     annbatch reads each request into GPU memory with cupy, and the ranks move their batches to
#     the GPU; world size 1, then 2 ranks sharing the GPU (gloo), each rank checking that its
#     batches are on the GPU and rank 0 that the shards are disjoint;
#  2. Lightning's Trainer(accelerator="gpu") fitting through ChunkDataModule/ChunkDataLoader
#     (examples/python/lightning_train.py, one device);
#  3. Accelerate on the GPU through chunksampler.accelerate.prepare_loader
#     (examples/python/accelerate_train.py --gpu), and a check that its batches arrive on the GPU;
#  4. ChunkDataLoader reading a zarr store and a CSR matrix through chunksampler.reader straight to
#     the GPU (device="cuda", pin_memory=True; 0 and 2 workers): each request's buffer moved in one
#     copy, its batches views there, equal to the same loader's batches on the CPU.
# Without a CUDA GPU it says so and exits 0. A few minutes once the environment exists (its first
# making downloads about 5 GB).
#   scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check.sh: no CUDA GPU here (nvidia-smi finds none): skipped" >&2
  exit 0
fi
source scripts/deps.sh
ensure_build_packages
stacks=$(ensure_stacks_env "$root")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_wheel "$root" "$stacks" "$work/wheels" "$work/build"
thin_stacks_env "$stacks" "$work/env"
python="$work/env/bin/python"
pip_quiet=(--quiet --disable-pip-version-check --no-input)
"$python" -m pip install "${pip_quiet[@]}" --no-deps "$work"/wheels/chunksampler-*-cp312-*.whl
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check.sh: nvidia-smi lists a GPU but torch $("$python" -c 'import torch; print(torch.__version__)') cannot use it: skipped" >&2
  exit 0
fi
# cupy for the CUDA major version torch was built with (the runtime libraries it brings).
cuda_major=$("$python" -c 'import torch; print(torch.version.cuda.split(".")[0])')
"$python" -m pip install "${pip_quiet[@]}" "cupy-cuda${cuda_major}x"
"$python" - <<'PY'
import torch, cupy
print(f"gpu_check.sh: {torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"cupy {cupy.__version__}", flush=True)
PY
export OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1
status=0
step() { echo "gpu_check.sh: $1" >&2; }
fail() { echo "gpu_check.sh: FAILED: $1" >&2; status=1; }

step "1. annbatch's walk-through, preload_to_gpu=True, world size 1 and 2 (gloo, one GPU)"
walk="$root/examples/python/multi_gpu"
(cd "$work" && "$python" "$walk/make_collection.py" "$work") || fail "make_collection.py"
for ranks in 1 2; do
  (cd "$work" && "$python" -m torch.distributed.run --nproc_per_node "$ranks" "$walk/stream.py" "$work" \
    --preload-to-gpu) || fail "stream.py --preload-to-gpu on $ranks rank(s)"
done

step "2. Lightning, Trainer(accelerator='gpu', devices=1)"
(cd "$work" && "$python" "$root/examples/python/lightning_train.py" --accelerator gpu --devices 1 --epochs 2 \
  --workers 0) || fail "lightning_train.py --accelerator gpu"

step "3. Accelerate on the GPU"
(cd "$work" && "$python" -m accelerate.commands.launch --num_processes 1 --num_machines 1 --mixed_precision no \
  --dynamo_backend no "$root/examples/python/accelerate_train.py" --gpu --epochs 2) || fail "accelerate_train.py --gpu"
"$python" - <<'PY' || fail "prepare_loader's batches on the GPU"
import numpy as np, torch
from accelerate import Accelerator
import chunksampler as cs
from chunksampler.accelerate import prepare_loader
from chunksampler.torch import ChunkDataLoader

accelerator = Accelerator()
rows = torch.utils.data.TensorDataset(torch.arange(2048), torch.randn(2048, 8))
sampler = cs.RandomSampler(chunk_size=64, preload_nchunks=4, batch_size=64, rng=np.random.default_rng(0))
loader = prepare_loader(accelerator, ChunkDataLoader(rows, sampler, pin_memory=True))
devices = {str(t.device) for batch in loader for t in batch}
print(f"gpu_check.sh: prepare_loader on {accelerator.device}: {len(loader)} batches on {sorted(devices)}", flush=True)
assert devices == {str(accelerator.device)} and accelerator.device.type == "cuda", devices
PY

step "4. ChunkDataLoader over a zarr store and a CSR matrix, device='cuda'"
(cd "$work" && "$python" - <<'PY') || fail "ChunkDataLoader's request buffers on the GPU"
import numpy as np, scipy.sparse, torch, zarr
import chunksampler as cs
from chunksampler.torch import ChunkDataLoader

data = np.random.default_rng(0).random((4096, 64), dtype=np.float32)
store = zarr.create_array("rows.zarr", shape=data.shape, dtype=data.dtype, chunks=(64, 64))
store[:] = data
make = lambda: cs.RandomSampler(chunk_size=64, preload_nchunks=8, batch_size=128, rng=np.random.default_rng(1))
for source in (store, scipy.sparse.csr_matrix(data * (data > 0.8))):
    for workers in (0, 2):
        on_cpu = list(ChunkDataLoader(source, make(), num_workers=workers))
        on_gpu = list(ChunkDataLoader(source, make(), num_workers=workers, pin_memory=True, device="cuda"))
        assert len(on_gpu) == len(on_cpu) and all(b.device.type == "cuda" for b in on_gpu)
        for cpu, gpu in zip(on_cpu, on_gpu):
            dense = gpu.to_dense() if gpu.layout == torch.sparse_csr else gpu
            expected = cpu.to_dense() if cpu.layout == torch.sparse_csr else cpu
            assert torch.equal(dense.cpu(), expected)
        print(f"gpu_check.sh: {type(source).__name__}, {workers} workers: {len(on_gpu)} batches on the GPU, "
              "equal to the CPU's", flush=True)
PY

if [ "$status" -eq 0 ]; then step "all passed"; else step "some checks failed (above)"; fi
exit "$status"
