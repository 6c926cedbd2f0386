"""Flash: K and V tiles in shared memory, online softmax, memory linear in N.

What changes: `row-in-shared` kept a whole row of scores on chip (N capped by shared memory) and
every block read all of k and v for one query. Flash attention (Dao et al., 2022) removes both with
the softmax ladder's online softmax (`softmax/online`): a running max ``m`` and sum ``l`` let the
keys arrive in tiles, each tile's scores used and dropped at once. When a tile raises the row max
from ``m`` to ``m'``, what was accumulated is rescaled by ``α = exp(m - m')``:

    l' = α·l + Σ_j exp(s_j - m')            O' = α·O + Σ_j exp(s_j - m')·v_j

and the output is ``O / l`` after the last tile. A block of 256 threads (16 x 16) owns 64 query
rows (32 when d > 64) and loops over the keys in tiles of 32 (16 when d > 64):

1. the tile's k and v rows are copied into shared memory (coalesced; float16 becomes float32);
2. thread (ty, tx) computes the 4 x 2 scores of rows ``ty + 16i`` and keys ``tx + 16j`` from
   the q tile (staged once) and the k tile: 8 multiply-adds per 6 shared loads;
3. the 16 lanes of a row combine their maxima with four xor shuffles; each thread rescales its
   outputs and partial sum by ``α`` and writes ``exp2(s - m')`` to a shared P tile (scores are
   prescaled by ``log2(e) / √d``, so ``exp`` is one ``exp2``);
4. thread (ty, tx) adds ``P·V`` into its 4 x (d / 16) outputs; P's rows are written and read
   by the same half-warp, so a warp barrier separates 3 and 4.

Shared rows are padded by one word (16 lanes reading a column hit 16 banks). Edges are zeros in
shared memory and -inf scores. Causal blocks stop at their last query's diagonal tile and are
launched longest first. No N x N buffer and no workspace: N = 32768 runs wherever its inputs
fit; 41.6 KB of shared memory per block at d = 64, 35 KB at d = 128 (hence d <= 128).
Why: a block reads k and v once per 64 queries instead of once per query, and each value read
from shared memory serves 4 or 2 multiply-adds.
Prediction: roughly the GEMM ladder's shared-tiling rung (7.8 TFLOP/s at 4096³ on an H200) less
the softmax work: 3 to 8 TFLOP/s in float32, tens of times faster than `naive` at N = 4096, and
far below SDPA, capped by FP32 arithmetic on the CUDA cores.
Measured: on an NVIDIA H200 (results/nvidia-h200.json, ``ladder bench``), at the SDPA shape [4, 16,
16, 4096, 64] (B, H, HKV, N, d): 28.783 ms and 9.5 TFLOP/s in float32 (`row-in-shared`: 313.550 ms,
`naive`: 301.727 ms, SDPA: 7.849 ms) and 29.104 ms in float16 (`row-in-shared`: 311.366 ms).
Verdict: the rate beat the prediction (10.89x `row-in-shared`, 10.48x `naive` in float32; 0.27x
SDPA), likely because each shared value serves 4 or 2 multiply-adds where the GEMM's shared-tiling
rung does two shared loads per multiply-add; the ratio to `naive` is about 10x, not tens, because
`naive` ran at 0.9 TFLOP/s, not the 0.5 the prediction assumed.

Lab notes: docs/notes/attention.md
"""

import math
from typing import Any

import numpy as np
from numba import cuda, float32

from ladder.attention.problem import IS_CAUSAL, LOG2E, attention_rung
from ladder.core.intrinsics import FULL_MASK, shfl_xor_sync, syncwarp

SIDE = 16  # threads per block: SIDE x SIDE, a query row per half-warp of SIDE lanes
THREADS = SIDE * SIDE
MAX_D = 128  # above this the tiles no longer fit in 48 KB of shared memory
NEG_INF = np.float32(-np.inf)


def tile_shape(padded_d: int) -> tuple[int, int]:
    """Rows and keys per thread, (TM, TN): a tile of 16·TM queries and 16·TN keys."""
    return (4, 2) if padded_d <= 64 else (2, 1)


def make_kernel(padded_d: int, tm: int, tn: int, staging: Any = float32) -> Any:
    """The flash kernel for head dimensions up to ``padded_d`` (a multiple of 16), with
    16·``tm`` queries and 16·``tn`` keys per tile, q, k and v staged as ``staging``."""
    dp, oc = padded_d, padded_d // SIDE  # output columns per thread
    bq, bkv = SIDE * tm, SIDE * tn
    pad = 1 if staging == float32 else 2  # one 4-byte word: shifts each row by one bank
    # array shapes must be compile-time constants: tuples built here, not in the kernel
    q_tile, k_tile, v_tile, p_tile = (bq, dp + pad), (bkv, dp + pad), (bkv, dp), (bq, bkv + 1)
    s_regs, o_regs = (tm, tn), (tm, oc)

    @cuda.jit
    def flash_kernel(q, k, v, out, scale_log2, causal):
        qs = cuda.shared.array(q_tile, staging)
        ks = cuda.shared.array(k_tile, staging)
        vs = cuda.shared.array(v_tile, staging)
        ps = cuda.shared.array(p_tile, float32)
        s = cuda.local.array(s_regs, float32)
        o = cuda.local.array(o_regs, float32)
        m = cuda.local.array(tm, float32)
        lsum = cuda.local.array(tm, float32)
        kreg = cuda.local.array(tn, float32)
        vreg = cuda.local.array(oc, float32)
        heads, n, d = q.shape[1], q.shape[2], q.shape[3]
        h, b = cuda.blockIdx.y, cuda.blockIdx.z
        kv = h // (heads // k.shape[1])
        zero = staging(float32(0.0))
        tid = cuda.threadIdx.x
        ty, tx = tid // SIDE, tid % SIDE
        # causal: the last query tile has the most keys; launch it first
        tile = cuda.gridDim.x - 1 - cuda.blockIdx.x if causal else cuda.blockIdx.x
        q0 = tile * bq

        for e in range(tid, bq * dp, THREADS):
            r, c = e // dp, e % dp
            qs[r, c] = staging(q[b, h, q0 + r, c]) if q0 + r < n and c < d else zero
        for i in range(tm):
            m[i] = NEG_INF
            lsum[i] = float32(0.0)
            for cc in range(oc):
                o[i, cc] = float32(0.0)

        kv_end = min(n, q0 + bq) if causal else n
        for k0 in range(0, kv_end, bkv):
            cuda.syncthreads()  # the previous tile's k, v and P are read by every warp
            for e in range(tid, bkv * dp, THREADS):
                r, c = e // dp, e % dp
                inside = k0 + r < n and c < d
                ks[r, c] = staging(k[b, kv, k0 + r, c]) if inside else zero
                vs[r, c] = staging(v[b, kv, k0 + r, c]) if inside else zero
            cuda.syncthreads()

            # scores of rows ty + 16 i, keys tx + 16 j
            for i in range(tm):
                for j in range(tn):
                    s[i, j] = float32(0.0)
            for c in range(dp):
                for j in range(tn):
                    kreg[j] = float32(ks[tx + SIDE * j, c])
                for i in range(tm):
                    a = float32(qs[ty + SIDE * i, c])
                    for j in range(tn):
                        s[i, j] += a * kreg[j]

            # online softmax, one row per half-warp
            for i in range(tm):
                row = q0 + ty + SIDE * i
                top = NEG_INF
                for j in range(tn):
                    key = k0 + tx + SIDE * j
                    x = s[i, j] * scale_log2
                    if key >= n or (causal and key > row):
                        x = NEG_INF
                    s[i, j] = x
                    top = max(top, x)
                for step in range(4):  # xor 8, 4, 2, 1: the 16 lanes of this row
                    top = max(top, shfl_xor_sync(FULL_MASK, top, 8 >> step))
                m_new = max(m[i], top)
                shift = m_new if m_new != NEG_INF else float32(0.0)  # a row with no key yet
                alpha = math.exp2(m[i] - shift)
                m[i] = m_new
                partial = float32(0.0)
                for j in range(tn):
                    p = math.exp2(s[i, j] - shift)
                    ps[ty + SIDE * i, tx + SIDE * j] = p
                    partial += p
                lsum[i] = lsum[i] * alpha + partial
                for cc in range(oc):
                    o[i, cc] *= alpha
            syncwarp()  # the P rows of this half-warp are written

            for j in range(bkv):
                for cc in range(oc):
                    vreg[cc] = float32(vs[j, tx + SIDE * cc])
                for i in range(tm):
                    p = ps[ty + SIDE * i, j]
                    for cc in range(oc):
                        o[i, cc] += p * vreg[cc]

        for i in range(tm):
            total = lsum[i]
            for step in range(4):
                total += shfl_xor_sync(FULL_MASK, total, 8 >> step)
            row = q0 + ty + SIDE * i
            if row < n:
                inv = float32(1.0) / total
                for cc in range(oc):
                    c = tx + SIDE * cc
                    if c < d:
                        out[b, h, row, c] = o[i, cc] * inv

    return flash_kernel


def padded(d: int) -> int:
    """d rounded up to the multiple of 16 that the kernels are built for."""
    return max(SIDE, (d + SIDE - 1) // SIDE * SIDE)


_kernels: dict[int, Any] = {}


def kernel_for(d: int) -> Any:
    dp = padded(d)
    if dp not in _kernels:
        _kernels[dp] = make_kernel(dp, *tile_shape(dp))
    return _kernels[dp]


# what ``ladder check`` compiles: the kernel for three head dimensions
KERNELS = {f"flash_d{d}": kernel_for(d) for d in (16, 64, 128)}
KERNEL_ARGS = {name: lambda q, k, v, out: (q, k, v, out, np.float32(1), False) for name in KERNELS}


def check_d(d: int, rung: str) -> None:
    if d > MAX_D:
        raise ValueError(
            f"{rung} supports head dimensions up to {MAX_D} (its shared-memory tiles), got d={d}"
        )


def flash_geometry(kernel: Any, q: Any, queries: int) -> tuple:
    """A flash kernel whose tile holds ``queries`` rows: one block of THREADS per tile and
    head, its scalars the scale (for exp2) and the mask's flag."""
    batch, heads, n, d = q.shape
    grid = ((n + queries - 1) // queries, heads, batch)
    scale_log2 = np.float32(1.0 / math.sqrt(d) * LOG2E)
    return kernel, grid, THREADS, 0, (scale_log2, IS_CAUSAL)


@attention_rung(
    name="flash",
    parent="row-in-shared",
    title="Flash attention: K/V tiles in shared memory, online softmax (FP32)",
)
def geometry(q: Any, k: Any, v: Any, out: Any) -> tuple:
    """The kernel for this head dimension (up to MAX_D) and its tile of queries."""
    d = q.shape[3]
    check_d(d, "rung 3")
    return flash_geometry(kernel_for(d), q, SIDE * tile_shape(padded(d))[0])
