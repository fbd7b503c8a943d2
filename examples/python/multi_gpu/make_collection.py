"""Step 1 of the multi-GPU walk-through: a small synthetic single-cell matrix and an annbatch
collection of it, preshuffled into two on-disk datasets of 10,000 rows, for the ranks to share.

    python make_collection.py DIR        # writes DIR/synthetic.zarr and DIR/ddp_collection.zarr (and DIR)

The matrix is 20,000 cells x 256 genes, CSR, about 10% non-zero, seeded so every run writes the
same data. annbatch's ``DatasetCollection`` does the preshuffling (chunksampler only samples), so
the ranks later read whole chunks of an already mixed order.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp
import zarr
from annbatch import DatasetCollection

N_CELLS, N_GENES = 20_000, 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="the folder to write synthetic.zarr and ddp_collection.zarr into")
    where = parser.parse_args().dir
    where.mkdir(parents=True, exist_ok=True)
    # The zarr v3 layout, sharded, as AnnData 0.13 writes by default.
    ad.settings.zarr_write_format = 3
    ad.settings.auto_shard_zarr_v3 = True

    counts = sp.random(N_CELLS, N_GENES, density=0.1, format="csr", dtype="float32", random_state=0)
    genes = pd.DataFrame(index=[f"gene_{g}" for g in range(N_GENES)])
    ad.AnnData(X=counts, var=genes).write_zarr(where / "synthetic.zarr")

    collection = DatasetCollection(zarr.open(where / "ddp_collection.zarr", mode="w"))
    collection.add_adatas(adata_paths=[str(where / "synthetic.zarr")], shuffle=True, dataset_size=10_000,
                          rng=np.random.default_rng(0))

    rows = [int(group["X"].attrs["shape"][0]) for group in collection]
    print(f"ddp_collection.zarr: {len(rows)} datasets of {' + '.join(map(str, rows))} = {sum(rows)} cells "
          f"x {N_GENES} genes, CSR, {counts.nnz} non-zero values")


if __name__ == "__main__":
    main()
