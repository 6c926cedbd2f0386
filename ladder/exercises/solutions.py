"""Worked answers to the exercises, kept apart: try each ``check_<name>`` first. The checks
never read this module; each computes its answer on its own."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, float32

TILE = 8  # nb01_gemm.TILE

# nb00_start_here: (2 x 8192 x 8192 + 2 x 8192) x 4 bytes at 4 TB/s
copy_time = (2 * 8192 * 8192 + 2 * 8192) * 4 / 4.0e12 * 1e3
# 2 M N K over (M K + K N + M N) x 4 at (4096, 4096, 16): below 60 / 4 = 15, memory-bound
_flops, _bytes = 2 * 4096 * 4096 * 16, (4096 * 16 * 2 + 4096 * 4096) * 4
roofline = {
    "intensity": _flops / _bytes,
    "bound": "memory",
    "floor_ms": max(_bytes / 4.0e12, _flops / 60e12) * 1e3,
}

# nb01_gemm
coalescing = {"naive_A": 32, "naive_B": 1, "coalesced_A": 1, "coalesced_B": 4}
local_array = {"constant_index": 0, "runtime_index": 64}  # 16 floats x 4 bytes


@cuda.jit
def shared_tiling(A, B, C):
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        As[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        Bs[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            acc += As[ty, i] * Bs[i, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


# nb02_tensor_cores
bank_conflicts = {"column": 32, "column_padded": 1, "ldmatrix": 8, "ldmatrix_swizzled": 1}
fragment_registers = {"A": 4, "B": 2, "C": 4}
mma_count = {"block": 8 * 16 * 2, "warp": 8 * 16 * 2 // 8}
# 8 rows x 16 bytes (one aligned half-sector each); 32 x 16 = 512 bytes of one row
epilogue_sectors = {"direct": 8, "staged": 512 // 32, "direct_fill": 16 / 32}
# (128 x 64 + 64 x 256) halves of 2 bytes, 16 per cp.async; one A box + 512 / 128 B boxes
copy_instructions = {"cp_async": (128 * 64 + 64 * 256) * 2 // 16, "tma": 1 + 4}
copy_waits = {"wgmma_descriptors": 4, "wgmma": 4}
# 128-byte rows of 1-byte elements; 32 of K per m64n256k32; twice persistent's K per stage
fp8_stage = {"k_elements": 128, "wgmma": 128 // 32, "ratio": 2}
# bits 0-13 = 4352, 16-29 = 512, 32-45 = 64, each x 16; mode 1 at bits 62-63: 128-byte swizzle
descriptor_fields = {"start_address": 4352 * 16, "lbo": 512 * 16, "sbo": 64 * 16, "swizzle": 128}
# k 42: step 42 // 16 = 2, k8 half (42 % 16) // 8 = 1, row group 13 // 8 = 1; byte 84 of row 13
# is chunk 5 at byte 4, moved to chunk 5 ^ (13 % 8) = 0: 13 x 128 + 0 x 16 + 4
core_matrix = {"kk": 2, "core_matrix": (1, 1), "byte": 13 * 128 + 4}

# nb03_conv: conv1 (10000, 1, 4, 86, 86, 7) -> 80 x 80 outputs
conv1_shape_flops = {
    "output_shape": (10000, 4, 80, 80),
    "gflop": 2 * 10000 * 4 * 80 * 80 * 1 * 7 * 7 / 1e9,
}
quads_per_window = {"quads": 10 + 4 - 1, "mma": 10 * 4}  # k = i + j in 0 .. T + PAIRS - 2
# a0: 2i + 2j = 6; a1: 2i + 1 + 2j; a2: 2i + 2j + 1; a3: 2i + 1 + 2j + 1; column g + 2t = 2 + 6
quad_words = {"rows": (6, 7, 7, 8), "pairs": [(0, 3), (1, 2), (2, 1), (3, 0)], "column": 8}
# ceil(34 / 12) = 3 sub-bands x 34 columns = 102, 13 jobs of 8: 2 rounds of 8 warps; row 14 is
# sub-band 1, n = 34 + 5 = 39, job 39 // 8 = 4: warp 4, round 0
job_rounds = {"rounds": 2, "warp": 4, "round": 0}

# nb04_streams_and_graphs: 8 chunks of (0.5, 0.375, 0.25) ms; the copy in sets the pace
pipeline_time = {"sequential_ms": 9.0, "pipelined_ms": 4.0 + 0.375 + 0.25, "efficiency": 4 / 4.625}
graph_launches = {"direct_us": 100 * 20.0, "graph_us": 100 * 2.0}
call_costs = {"loop_us": 15.0, "graph_us": 6.0}  # host-bound, then GPU-bound

# nb05_fusion: 6 passes of 2 bytes against 2 (a and b, 2 x 8192 x 2 bytes, once each)
fusion_bytes = {
    "three_kernels_mb": (6 * 8192 * 8192 + 2 * 8192) * 2 / 1e6,
    "fused_mb": (2 * 8192 * 8192 + 2 * 8192) * 2 / 1e6,
}


def online_softmax(m: float, s: float, chunk: np.ndarray) -> tuple[float, float]:
    new = max(m, float(chunk.max()))
    return new, s * np.exp(m - new) + float(np.exp(chunk - new).sum())


# nb06_attention
score_memory = {"gb": 4 * 16 * 4096 * 4096 * 4 / 1e9, "growth": 4}


def flash_merge(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    (ma, la, oa), (mb, lb, ob) = a, b
    m = max(ma, mb)
    wa, wb = np.exp(ma - m), np.exp(mb - m)
    return m, la * wa + lb * wb, oa * wa + ob * wb


backward_products = {"executed": 7, "credited": 5}
softmax_share = {"d64": 1.0, "d128": 0.5}
consumer_registers = {"pool": 96 * 640, "consumer": 112}
wide_key_registers = {"s": 64 * 128 // 128, "p": 32}


# nb07_conv_hopper: row 37 = warp 2, dx = 0, i = 5: f = 4 x 1 + 2, dy = 1; 7 x 7 taps; 4 C x 4
filter_rows = {"row": (6, 1, 0), "taps": 49, "registers": 64}
# R = 40, NP = 17: start (1 x 40 + 2) x 17; LBO 20 x 17 chunks of 16 bytes; block 40 = (Y 2,
# n 6) needs row 2 x 2 + 5 = 9, stored at row 20 + 4: (40 + 24) x 17 + 6 = start + 340 + 40
step_descriptor = {
    "start_chunk": (1 * 40 + 2) * 17,
    "lbo_bytes": 40 // 2 * 17 * 16,
    "odd_chunk": (1 * 40 + 40 // 2 + 9 // 2) * 17 + 6,
}


# nb08_models
def matmul_backward(A: np.ndarray, B: np.ndarray, dC: np.ndarray) -> tuple[np.ndarray, ...]:
    return dC @ B.T, A.T @ dC


def softmax_backward(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return y * (dy - (dy * y).sum(1, keepdims=True))


# nb09_moe
def offsets(ids: np.ndarray, experts: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(ids.ravel(), minlength=experts))])


def _tile_padding() -> dict[str, float]:
    from ladder.exercises.nb09_moe import padding_counts
    from ladder.moe.r05_wgmma_grouped import BM

    counts = padding_counts()
    tiles = int(np.sum(-(-counts // BM)))
    return {"tiles": tiles, "empty_share": 1 - counts.sum() / (tiles * BM)}


tile_padding = _tile_padding()
