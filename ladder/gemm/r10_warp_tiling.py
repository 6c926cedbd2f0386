"""Warp tiling: each warp owns a 64 x 64 piece of C's tile, each thread 8 x 16 outputs.

What changes: the warp, the unit the hardware schedules, gets its own level of tiling.
- 128 threads in 4 warps; each warp computes a WM x WN = 64 x 64 piece of the 128 x 128 block
  tile (2 x 2 warps).
- A warp walks its piece as WNITER = 4 sub-tiles of 64 x 16. In each, its 32 lanes form an
  8 x 4 grid and a lane owns TM x TN = 8 x 4 outputs; over the four sub-tiles a thread holds
  8 x 16 = 128 accumulators (`wide-loads`: 64).
- BK grows from 8 to 16, so each K tile (128 x 16 of A, 16 x 128 of B; 4 float4 of each per thread)
  spreads its two barriers over twice as many multiply-adds. Everything else is `wide-loads`'s:
  unsigned indices, A's tile transposed with rows padded by 4 floats, 16-byte accesses where
  alignment allows, masked edges. The tile sizes are a ``Config`` and ``make_kernel`` assembles the
  kernel from device functions, so `double-buffered` reuses the pieces and `tuned` sweeps the
  sizes.
Why: `wide-loads` lays its 256 threads over the block tile as one 16 x 16 grid, so per step of k a
warp reads 16 distinct values of A and 128 of B from shared memory for 2048 multiply-adds.
Here a warp reads 64 of A and 64 of B for 4096: less than half the shared-memory traffic per
multiply-add, and 6 float4 shared reads per 128 multiply-adds per thread (`wide-loads`: 4 per 64).
Prediction: less shared-memory traffic per FMA and twice the independent accumulators per
thread: a clear step over `wide-loads`. Each K tile's global loads are still exposed between two
barriers, which is `double-buffered`'s subject.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): 0.198 ms at
1024³ (1.02x `wide-loads`) and 4.479 ms at 4096³ (30.69 TFLOP/s, 0.97x). Nsight Compute at 4096³
(lab/gemm/2026-11-22-profiles/nvidia-h200-profile-float32.json): SM throughput 57.5% (`wide-loads`:
65.9%), occupancy 18.0% (24.3%), shared-store bank conflicts 17.5 million (3.7 million).
Verdict: missed: no step. Nsight Compute
(lab/gemm/2026-11-24-counts/nvidia-h200-profile-gemm-counts.json) counts 2.69 billion warp
instructions against `wide-loads`'s 2.99 billion (10% fewer), yet the time did not fall (0.97x at
4096³, within the spread of the repeats): issue-slot use fell from 67.9% to 65.3% and occupancy
from 24.3% to 18.1%. The kernel is no longer bound by issuing; its warps wait, with fewer of them
resident to cover the waits. The prediction's own caveat fits: each K tile's global loads are
exposed between two barriers, and `double-buffered`, which changes only that, is 1.18x faster. The
stall reasons that would name the wait are not in the file: not yet measured.

Lab notes: docs/notes/gemm.md#rung-10-warp-tiling
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba import cuda, float32, uint32

from ladder.core.intrinsics import VECTOR_ALIGN, load4, store4
from ladder.gemm.problem import ByAlignment, gemm_rung, grid_2d

BM, BN, BK = 128, 128, 16  # block tile
WM, WN = 64, 64  # warp tile
WNITER = 4  # sub-tiles of a warp tile along N (WSUBN = 16); WMITER = 1 follows
TM, TN = 8, 4  # outputs per thread per sub-tile
THREADS = 128  # 4 warps = (BM / WM) x (BN / WN)
PAD = 4  # floats of padding per row of the transposed A tile (rows stay 16-byte multiples)
WARP = 32
SMEM_STATIC_LIMIT = 48 * 1024  # bytes of static shared memory a block may declare


@dataclass(frozen=True)
class Config:
    """Tile sizes of the warp-tiled kernel.

    bm x bn is the block tile and bk the K tile; wm x wn the warp tile, walked as wniter
    sub-tiles along N and as many along M (wmiter) as it takes for the 32 lanes to own tm x tn
    outputs each per sub-tile; threads = 32 x (bm / wm) x (bn / wn).
    """

    bm: int = BM
    bn: int = BN
    bk: int = BK
    wm: int = WM
    wn: int = WN
    wniter: int = WNITER
    tm: int = TM
    tn: int = TN
    threads: int = THREADS

    def __post_init__(self) -> None:
        bad = self.problems()
        if bad:
            raise ValueError(f"invalid {self}: " + "; ".join(bad))

    @property
    def wmiter(self) -> int:
        return self.wm * self.wn // (WARP * self.tm * self.tn * self.wniter)

    def smem_bytes(self, stages: int = 1) -> int:
        """Static shared memory of ``stages`` copies of the A and B tiles."""
        return stages * self.bk * ((self.bm + PAD) + self.bn) * 4

    def problems(self, stages: int = 1) -> list[str]:
        """Why this config cannot build a kernel with ``stages`` buffers (empty: it can)."""
        sizes = (self.bm, self.bn, self.bk, self.wm, self.wn, self.wniter, self.tm, self.tn)
        if min(*sizes, self.threads) < 1:
            return ["every size must be positive"]
        if self.tm % 4 or self.tn % 4 or self.bk % 4 or self.bn % 4:
            return ["tm, tn, bk and bn must be multiples of 4 (float4 accesses)"]
        bad = []
        if self.bm % self.wm or self.bn % self.wn:
            bad.append("the warp tile must divide the block tile")
        elif (self.bm // self.wm) * (self.bn // self.wn) * WARP != self.threads:
            bad.append("threads must be 32 x (bm / wm) x (bn / wn)")
        per_sub_tile = WARP * self.tm * self.tn * self.wniter
        if self.wn % self.wniter or (self.wm * self.wn) % per_sub_tile:
            bad.append("wm x wn must split into sub-tiles of 32 lanes x tm x tn")
        elif self.wm % self.wmiter:
            bad.append("wmiter must divide wm")
        else:
            wsubm, wsubn = self.wm // self.wmiter, self.wn // self.wniter
            lanes = (wsubm // self.tm) * (wsubn // self.tn)
            if wsubm % self.tm or wsubn % self.tn or lanes != WARP:
                bad.append("a warp sub-tile must be 32 lanes of tm x tn")
        a_vec, b_vec = self.bk // 4, self.bn // 4  # float4 per row of A's and B's tiles
        if self.threads % a_vec or self.bm % (self.threads // a_vec):
            bad.append("A's tile must load in whole passes of all threads")
        if self.threads % b_vec or self.bk % (self.threads // b_vec):
            bad.append("B's tile must load in whole passes of all threads")
        if self.smem_bytes(stages) > SMEM_STATIC_LIMIT:
            bad.append(f"{self.smem_bytes(stages)} bytes of static shared memory exceed 48 KB")
        return bad


DEFAULT = Config()


class Parts(NamedTuple):
    """Plain-int array sizes and device functions of a warp-tiled kernel for one Config."""

    as_row: int  # floats per row of A's transposed tile
    n_acc: int  # accumulators per thread
    n_m: int  # A values a thread reads per step of K
    n_n: int  # B values a thread reads per step of K
    n_a: int  # floats of A's tile a thread loads
    n_b: int  # floats of B's tile a thread loads
    place: Any  # (tid) -> a_row, a_col, b_row, b_col, m_base, n_base (see make_parts)
    zero: Any  # (acc): acc <- 0
    load_a: Any  # (A, r, c, a_regs): this thread's part of A's K tile, zero outside A
    load_b: Any  # (B, r, c, b_regs): this thread's part of B's K tile, zero outside B
    store_a: Any  # (As, row, col, a_regs): into A's tile, transposed
    store_b: Any  # (Bs, row, col, b_regs): into B's tile
    compute: Any  # (As, Bs, row_off, m_base, n_base, acc, reg_m, reg_n): one K tile
    store_c: Any  # (C, row, col, acc): the thread's outputs, masked


def _make_strip_loader(passes: int, row_step: int, wide_global: bool) -> Any:
    """A device function loading ``passes`` strips of 4 floats, ``row_step`` rows apart."""
    u_step = np.uint32(row_step)

    @cuda.jit(device=True, inline="always")
    def load_strip(X, r, c, regs):
        # regs[4p .. 4p + 3] = X[r + p * row_step, c .. c + 3], zero outside X
        rows, cols = uint32(X.shape[0]), uint32(X.shape[1])
        zero = float32(0.0)
        for p in range(passes):
            rp = r + uint32(p) * u_step
            i = 4 * p
            if wide_global:
                if rp < rows and c < cols:  # the row length is a multiple of 4: all or nothing
                    regs[i], regs[i + 1], regs[i + 2], regs[i + 3] = load4(X, rp, c)
                else:
                    regs[i], regs[i + 1], regs[i + 2], regs[i + 3] = zero, zero, zero, zero
            else:
                ok = rp < rows
                for q in range(4):
                    cq = c + uint32(q)
                    regs[i + q] = X[rp, cq] if ok and cq < cols else zero

    return load_strip


@functools.cache
def make_parts(config: Config, wide_global: bool) -> Parts:
    """The pieces for ``config``. Every size is a plain int fixed here, before the jit."""
    bk, tm, tn, wniter, wmiter = config.bk, config.tm, config.tn, config.wniter, config.wmiter
    wsubm, wsubn = config.wm // wmiter, config.wn // wniter
    n_m, n_n = wmiter * tm, wniter * tn  # a thread's outputs: n_m rows x n_n columns
    n_acc = n_m * n_n
    tm4, tn4 = tm // 4, tn // 4  # float4 per sub-tile, per thread, along M and N
    a_step = config.threads // (bk // 4)  # rows of A's tile per loading pass
    b_step = config.threads // (config.bn // 4)  # rows of B's tile per loading pass
    a_passes, b_passes = config.bm // a_step, bk // b_step
    u_a_step, u_b_step = np.uint32(a_step), np.uint32(b_step)
    u_warp, u_warps_n = np.uint32(WARP), np.uint32(config.bn // config.wn)
    u_lanes_n = np.uint32(wsubn // tn)  # lanes across a warp sub-tile
    u_wm, u_wn, u_tm, u_tn = (np.uint32(x) for x in (config.wm, config.wn, tm, tn))
    u_a_vec, u_b_vec = np.uint32(bk // 4), np.uint32(config.bn // 4)
    u_four = np.uint32(4)

    @cuda.jit(device=True, inline="always")
    def place(tid):
        # The thread loads A's tile at rows a_row + p * a_step, columns a_col .. a_col + 3
        # (B's likewise) and computes the outputs whose first row and column in the block
        # tile are m_base + i_sub * wsubm and n_base + j_sub * wsubn.
        warp, lane = tid // u_warp, tid % u_warp
        m_base = warp // u_warps_n * u_wm + lane // u_lanes_n * u_tm
        n_base = warp % u_warps_n * u_wn + lane % u_lanes_n * u_tn
        a_row, a_col = tid // u_a_vec, tid % u_a_vec * u_four
        b_row, b_col = tid // u_b_vec, tid % u_b_vec * u_four
        return a_row, a_col, b_row, b_col, m_base, n_base

    @cuda.jit(device=True, inline="always")
    def zero(acc):
        for i in range(n_acc):
            acc[i] = float32(0.0)

    load_a = _make_strip_loader(a_passes, a_step, wide_global)
    load_b = _make_strip_loader(b_passes, b_step, wide_global)

    @cuda.jit(device=True, inline="always")
    def store_a(As, row, col, regs):
        # A[r, c .. c + 3] goes to As[c .. c + 3, r]: the tile is stored transposed
        for p in range(a_passes):
            cp = col + uint32(p) * u_a_step
            for q in range(4):
                As[row + uint32(q), cp] = regs[4 * p + q]

    @cuda.jit(device=True, inline="always")
    def store_b(Bs, row, col, regs):
        for p in range(b_passes):
            i, rp = 4 * p, row + uint32(p) * u_b_step
            store4(Bs, rp, col, regs[i], regs[i + 1], regs[i + 2], regs[i + 3])

    @cuda.jit(device=True, inline="always")
    def compute(As, Bs, row_off, m_base, n_base, acc, reg_m, reg_n):
        # rows row_off .. row_off + bk - 1 of As and Bs hold the K tile
        for d in range(bk):
            k = row_off + uint32(d)
            # registers filled element by element: indexing a tuple with a loop variable
            # puts it on the stack
            for i_sub in range(wmiter):
                for q in range(tm4):
                    i = i_sub * tm + 4 * q
                    m = m_base + uint32(i_sub * wsubm + 4 * q)
                    reg_m[i], reg_m[i + 1], reg_m[i + 2], reg_m[i + 3] = load4(As, k, m)
            for j_sub in range(wniter):
                for q in range(tn4):
                    j = j_sub * tn + 4 * q
                    n = n_base + uint32(j_sub * wsubn + 4 * q)
                    reg_n[j], reg_n[j + 1], reg_n[j + 2], reg_n[j + 3] = load4(Bs, k, n)
            for i in range(n_m):
                for j in range(n_n):
                    acc[i * n_n + j] += reg_m[i] * reg_n[j]

    @cuda.jit(device=True, inline="always")
    def store_c(C, row, col, acc):
        # output (i_sub * tm + i, j_sub * tn + j) of the thread is
        # C[row + i_sub * wsubm + i, col + j_sub * wsubn + j]
        M, N = uint32(C.shape[0]), uint32(C.shape[1])
        for i_sub in range(wmiter):
            for i in range(tm):
                r = row + uint32(i_sub * wsubm + i)
                if r < M:
                    for j_sub in range(wniter):
                        for q in range(tn4):
                            c = col + uint32(j_sub * wsubn + 4 * q)
                            a = (i_sub * tm + i) * n_n + j_sub * tn + 4 * q
                            if wide_global:
                                if c < N:  # N is a multiple of 4: all or nothing
                                    store4(C, r, c, acc[a], acc[a + 1], acc[a + 2], acc[a + 3])
                            else:
                                for j in range(4):
                                    if c + uint32(j) < N:
                                        C[r, c + uint32(j)] = acc[a + j]

    return Parts(
        as_row=config.bm + PAD,
        n_acc=n_acc,
        n_m=n_m,
        n_n=n_n,
        n_a=4 * a_passes,
        n_b=4 * b_passes,
        place=place,
        zero=zero,
        load_a=load_a,
        load_b=load_b,
        store_a=store_a,
        store_b=store_b,
        compute=compute,
        store_c=store_c,
    )


@functools.cache
def make_kernel(config: Config, wide_global: bool) -> Any:
    """The warp-tiled kernel for ``config``, with 16-byte (``wide_global``) or scalar I/O."""
    p = make_parts(config, wide_global)
    place, zero, compute, store_c = p.place, p.zero, p.compute, p.store_c
    load_a, load_b, store_a, store_b = p.load_a, p.load_b, p.store_a, p.store_b
    bk, bn, as_row = config.bk, config.bn, p.as_row  # array shapes must be plain ints
    n_acc, n_m, n_n, n_a, n_b = p.n_acc, p.n_m, p.n_n, p.n_a, p.n_b
    u_bm, u_bn, u_bk = np.uint32(config.bm), np.uint32(config.bn), np.uint32(bk)
    u_zero = np.uint32(0)

    @cuda.jit
    def kernel(A, B, C):
        As = cuda.shared.array((bk, as_row), float32, alignment=VECTOR_ALIGN)  # As[k, m]
        Bs = cuda.shared.array((bk, bn), float32, alignment=VECTOR_ALIGN)
        K = uint32(A.shape[1])
        row0 = uint32(cuda.blockIdx.y) * u_bm
        col0 = uint32(cuda.blockIdx.x) * u_bn
        a_row, a_col, b_row, b_col, m_base, n_base = place(uint32(cuda.threadIdx.x))
        acc = cuda.local.array(n_acc, float32)
        reg_m = cuda.local.array(n_m, float32)
        reg_n = cuda.local.array(n_n, float32)
        a_regs = cuda.local.array(n_a, float32)
        b_regs = cuda.local.array(n_b, float32)
        zero(acc)
        for k0 in range(u_zero, K, u_bk):
            load_a(A, row0 + a_row, k0 + a_col, a_regs)
            load_b(B, k0 + b_row, col0 + b_col, b_regs)
            store_a(As, a_col, a_row, a_regs)
            store_b(Bs, b_row, b_col, b_regs)
            cuda.syncthreads()
            compute(As, Bs, u_zero, m_base, n_base, acc, reg_m, reg_n)
            cuda.syncthreads()
        store_c(C, row0 + m_base, col0 + n_base, acc)

    return kernel


wide_kernel = make_kernel(DEFAULT, wide_global=True)
scalar_kernel = make_kernel(DEFAULT, wide_global=False)


@gemm_rung(name="warp-tiling", parent="wide-loads", title="Warp tiling: 64 x 64 per warp")
def geometry(m: int, n: int, k: int) -> tuple:
    """The 16-byte kernel where every row of A, B and C allows it, else the scalar one; a block
    of THREADS per BM x BN tile of C."""
    return ByAlignment(wide_kernel, scalar_kernel), grid_2d(n, BN, m, BM), THREADS
