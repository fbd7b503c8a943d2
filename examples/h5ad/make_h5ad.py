#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the AnnData fixture that h5ad_stream reads: a sparse count matrix and, per cell, its
row sum and number of stored values, computed here in float64 so the C++ side checks against an
independent computation.

    /usr/bin/python3 make_h5ad.py cells.h5ad --cells 6000 --genes 2000 --density 0.05 --seed 1

Needs Debian's python3-anndata (0.8), which the pyenv `python3` on some machines lacks.
"""

import argparse
import os
import sys

try:
    import anndata
    import numpy as np
    import pandas as pd
    import scipy.sparse as sp
except ImportError:
    print("python3-anndata is missing: apt-get install python3-anndata", file=sys.stderr)
    sys.exit(1)

# Rows are drawn in blocks so a 200,000-cell file needs no dense cells x genes array at once.
BLOCK_ROWS = 8192


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the .h5ad file to write")
    parser.add_argument("--cells", type=int, required=True)
    parser.add_argument("--genes", type=int, required=True)
    parser.add_argument("--density", type=float, required=True, help="mean fraction of stored values per row")
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args()
    if args.cells < 1 or args.genes < 1 or not 0 < args.density <= 1:
        parser.error("--cells and --genes must be >= 1 and --density in (0, 1]")
    return args


def row_densities(rng, cells, density):
    """Per-row fractions of stored values: log-normal around `density`, as real cells differ in
    depth, with empty rows (nnz = 0) scattered and in one run long enough to fill whole chunks."""
    p = density * rng.lognormal(mean=-0.245, sigma=0.7, size=cells)  # the factor's mean is 1
    p[rng.random(cells) < 0.02] = 0.0
    run_start = cells // 6
    p[run_start:run_start + 150] = 0.0
    p[-1] = 0.0  # the last row is empty: indptr's final value repeats
    return np.clip(p, 0.0, 1.0)


def count_matrix(rng, cells, genes, density):
    """A CSR float32 matrix of small counts (1 + geometric) with varying row density."""
    p = row_densities(rng, cells, density)
    blocks = []
    for first in range(0, cells, BLOCK_ROWS):
        block_p = p[first:first + BLOCK_ROWS]
        stored = rng.random((len(block_p), genes), dtype=np.float32) < block_p[:, None]
        rows, cols = np.nonzero(stored)
        values = rng.geometric(0.4, size=len(rows)).astype(np.float32)
        blocks.append(sp.csr_matrix((values, (rows, cols)), shape=(len(block_p), genes), dtype=np.float32))
    matrix = sp.vstack(blocks, format="csr")
    matrix.sort_indices()
    return matrix


def main():
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    x = count_matrix(rng, args.cells, args.genes, args.density)
    obs = pd.DataFrame(
        {
            "row_sum": np.asarray(x.astype(np.float64).sum(axis=1)).ravel(),
            "nnz": x.getnnz(axis=1).astype(np.int64),
        },
        index=[f"cell_{i}" for i in range(args.cells)],
    )
    var = pd.DataFrame(index=[f"gene_{j}" for j in range(args.genes)])
    anndata.AnnData(X=x, obs=obs, var=var).write_h5ad(args.out)
    empty = int((obs["nnz"] == 0).sum())
    print(f"{args.out}: {args.cells} cells x {args.genes} genes, {x.nnz} stored values "
          f"({empty} empty rows), {os.path.getsize(args.out) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
