"""A NumPy model of the tensor-core flash kernel (``r05_tensor_core_flash.cu``), lane by lane.

The CUDA C++ kernel cannot run without a GPU, and most of what can go wrong in it is index
arithmetic: swizzled shared-memory addresses, which lane gives which ldmatrix row address,
how the accumulator fragments of S become the A fragments of P·V, the masks, and the order of
cp.async groups, waits and barriers. This module executes the same steps with the same
formulas, one warp at a time and all 32 lanes at once, on a byte array standing in for shared
memory, with the instruction semantics of the PTX ISA:

- ``ldmatrix_x4``: lanes 8i..8i+7 give the 16-byte row addresses of 8 x 8 matrix i; lane l
  receives row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 (of the transpose with ``.trans``),
  packed as two halves in a 32-bit register, the first in the low 16 bits;
- ``mma_16816``: ``mma.sync.m16n8k16.row.col.f32.f16.f16.f32`` with its documented fragment
  layout (the same one the GEMM ladder's `warp-tile-64` uses, verified there on a GPU);
- ``cp.async`` groups: each copy lands either at once (``landing="early"``, which exposes a
  stage overwritten while some warp still reads it) or only when a ``wait_group`` retires its
  group (``landing="late"``, which exposes a read before the wait). The kernel must give the
  same answer both ways.

``attention`` runs the model over every block of a small problem; the tests compare it with
the float64 reference for the configurations the launcher uses. The model checks the kernel's
logic, not its compilation or its races between threads of one warp.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

BKV = 64
LANES = np.arange(32)
G_OF, T_OF = LANES // 4, LANES % 4


def pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Two float16 arrays as half2 registers (uint32, ``lo`` in the low half)."""
    lo16 = np.asarray(lo, np.float16).view(np.uint16).astype(np.uint32)
    hi16 = np.asarray(hi, np.float16).view(np.uint16).astype(np.uint32)
    return lo16 | (hi16 << np.uint32(16))


def unpack(reg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo = (reg & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
    hi = (reg >> np.uint32(16)).astype(np.uint16).view(np.float16)
    return lo, hi


BANK_CONFLICTS = [0]  # ldmatrix matrices whose 8 rows share a bank group (should stay 0)


def ldmatrix_x4(smem: np.ndarray, addrs: np.ndarray, trans: bool = False) -> np.ndarray:
    """``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16``: (32,) byte addresses -> (32, 4).

    Also counts, in ``BANK_CONFLICTS``, the matrices whose 8 rows do not fall in 8 distinct
    16-byte bank groups (``(address / 16) % 8``): those take more than one pass."""
    halves = smem.view(np.float16)
    regs = np.empty((32, 4), np.uint32)
    for i in range(4):
        groups = {(int(a) // 16) % 8 for a in addrs[8 * i : 8 * i + 8]}
        BANK_CONFLICTS[0] += len(groups) < 8
        rows = []
        for r in range(8):
            addr = int(addrs[8 * i + r])
            assert addr % 16 == 0, "ldmatrix rows must be 16-byte aligned"
            rows.append(halves[addr // 2 : addr // 2 + 8])
        matrix = np.stack(rows)
        if trans:
            matrix = matrix.T
        regs[:, i] = pack(matrix[G_OF, 2 * T_OF], matrix[G_OF, 2 * T_OF + 1])
    return regs


def mma_16816(d: np.ndarray, a: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``: d (32, 4) += A (16 x 16) B."""
    g, t = G_OF, T_OF
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for reg, (row, col) in enumerate(
        ((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))
    ):
        lo, hi = unpack(a[:, reg])
        A[row, col], A[row, col + 1] = lo, hi
    for reg, k in ((b0, 2 * t), (b1, 2 * t + 8)):
        lo, hi = unpack(reg)
        B[k, g], B[k + 1, g] = lo, hi
    acc = np.zeros((16, 8))
    acc[g, 2 * t], acc[g, 2 * t + 1], acc[g + 8, 2 * t], acc[g + 8, 2 * t + 1] = d.T.astype(float)
    acc += A @ B
    return np.stack(
        [acc[g, 2 * t], acc[g, 2 * t + 1], acc[g + 8, 2 * t], acc[g + 8, 2 * t + 1]], axis=1
    ).astype(np.float32)


def shfl_xor(x: np.ndarray, mask: int) -> np.ndarray:
    return x[LANES ^ mask]


def swizzle(row: Any, chunk: Any, row_bytes: int) -> Any:
    return row * row_bytes + ((chunk ^ (row & 7)) << 4)


class _SharedMemory:
    """Shared memory with cp.async groups that land early or late."""

    def __init__(self, nbytes: int, landing: str) -> None:
        self.bytes = np.full(nbytes, 0xFF, np.uint8)  # garbage (NaN halves) until written
        self.landing = landing
        self.open: list[tuple[int, np.ndarray]] = []
        self.groups: list[list[tuple[int, np.ndarray]]] = []

    def cp_async16(self, dst: int, src: np.ndarray, offset: int, valid: bool) -> None:
        data = src[offset : offset + 8] if valid else np.zeros(8, np.float16)
        chunk = np.asarray(data, np.float16).view(np.uint8).copy()
        assert dst % 16 == 0 and chunk.size == 16
        if self.landing == "early":
            self.bytes[dst : dst + 16] = chunk
        else:
            self.open.append((dst, chunk))

    def commit(self) -> None:
        self.groups.append(self.open)
        self.open = []

    def wait(self, pending: int) -> None:
        while len(self.groups) > pending:
            for dst, chunk in self.groups.pop(0):
                self.bytes[dst : dst + 16] = chunk


def _block(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray,
    shape: tuple[int, int, int, int, int], block: tuple[int, int, int], grid_x: int,
    config: tuple[int, int, bool], scale_log2: float, causal: bool, landing: str,
) -> None:  # fmt: skip
    """One block of ``flash_forward<D, WARPS, MI, PACKED>``; q, k, v, o are flat float16."""
    _, heads, kv_heads, n, d = shape
    warps, mi_count, packed = config
    threads, bq, row_bytes, chunks = 32 * warps, 16 * mi_count * warps, d * 2, d // 8
    kv_bytes, pass_rows = BKV * row_bytes, threads // chunks
    ksteps, nt_count, dt_count = d // 16, BKV // 8, d // 8
    bx, by, bz = block
    neg_inf = np.float32(-np.inf)

    smem = _SharedMemory(bq * row_bytes + 4 * kv_bytes, landing)
    s_q, s_k = 0, bq * row_bytes
    s_v = s_k + 2 * kv_bytes
    group = heads // kv_heads
    b = bz
    kv = by if packed else by // group
    rows = n * group if packed else n
    tile = grid_x - 1 - bx if causal else bx
    row0 = tile * bq
    k_head = (b * kv_heads + kv) * n * d

    def position(row: int) -> int:
        return row // group if packed else row

    def row_offset(row: int) -> int:
        head = kv * group + row % group if packed else by
        return ((b * heads + head) * n + position(row)) * d

    first = position(row0)
    last = position(min(row0 + bq, rows) - 1)
    kv_len = min(n, last + 1) if causal else n
    tiles = (kv_len + BKV - 1) // BKV

    for tid in range(threads):  # Q tile
        c_row, c_chunk = tid // chunks, tid % chunks
        for i in range(bq // pass_rows):
            r = c_row + i * pass_rows
            valid = row0 + r < rows
            src = (row_offset(row0 + r) if valid else 0) + c_chunk * 8
            smem.cp_async16(s_q + swizzle(r, c_chunk, row_bytes), q, src, valid)

    def load_kv(source: np.ndarray, stage: int, kv0: int) -> None:
        for tid in range(threads):
            c_row, c_chunk = tid // chunks, tid % chunks
            for i in range(BKV // pass_rows):
                r = c_row + i * pass_rows
                valid = kv0 + r < n
                src = k_head + (kv0 + r if valid else 0) * d + c_chunk * 8
                smem.cp_async16(stage + swizzle(r, c_chunk, row_bytes), source, src, valid)

    load_kv(k, s_k, 0)
    smem.commit()
    load_kv(v, s_v, 0)
    smem.commit()
    smem.wait(1)  # and __syncthreads()

    lane = LANES
    k_key, k_chunk = (lane // 16) * 8 + lane % 8, (lane // 8) % 2
    v_key, v_chunk = lane % 16, lane // 16
    state = []
    for warp in range(warps):
        warp_row = warp * 16 * mi_count
        qf = [
            [
                ldmatrix_x4(
                    smem.bytes,
                    s_q + swizzle(warp_row + mi * 16 + lane % 16, 2 * ks + lane // 16, row_bytes),
                )
                for ks in range(ksteps)
            ]
            for mi in range(mi_count)
        ]
        pos = [
            [np.array([position(row0 + warp_row + mi * 16 + g + 8 * hh) for g in G_OF])
             for hh in range(2)]
            for mi in range(mi_count)
        ]  # fmt: skip
        state.append(
            {
                "qf": qf,
                "pos": pos,
                "o": [
                    [np.zeros((32, 4), np.float32) for _ in range(dt_count)]
                    for _ in range(mi_count)
                ],
                "m": [[np.full(32, neg_inf) for _ in range(2)] for _ in range(mi_count)],
                "l": [[np.zeros(32, np.float32) for _ in range(2)] for _ in range(mi_count)],
            }
        )

    for j in range(tiles):
        stage, kv0 = j & 1, j * BKV
        if j > 0:
            smem.wait(1)  # and __syncthreads()
        if j + 1 < tiles:
            load_kv(k, s_k + (stage ^ 1) * kv_bytes, kv0 + BKV)
        smem.commit()
        k_tile = s_k + stage * kv_bytes
        for warp in range(warps):
            st = state[warp]
            s = [[np.zeros((32, 4), np.float32) for _ in range(nt_count)] for _ in range(mi_count)]
            for ks in range(ksteps):
                for p in range(nt_count // 2):
                    kb = ldmatrix_x4(
                        smem.bytes, k_tile + swizzle(p * 16 + k_key, 2 * ks + k_chunk, row_bytes)
                    )
                    for mi in range(mi_count):
                        s[mi][2 * p] = mma_16816(s[mi][2 * p], st["qf"][mi][ks], kb[:, 0], kb[:, 1])
                        s[mi][2 * p + 1] = mma_16816(
                            s[mi][2 * p + 1], st["qf"][mi][ks], kb[:, 2], kb[:, 3]
                        )
            if kv0 + BKV > n or (causal and kv0 + BKV - 1 > first):
                for mi in range(mi_count):
                    for nt in range(nt_count):
                        for e in range(4):
                            key = kv0 + nt * 8 + 2 * T_OF + (e & 1)
                            hide = (key >= n) | (causal & (key > st["pos"][mi][e // 2]))
                            s[mi][nt][hide, e] = neg_inf
            pf = []
            for mi in range(mi_count):
                for hh in range(2):
                    top = np.full(32, neg_inf)
                    for nt in range(nt_count):
                        top = np.maximum(
                            top, np.maximum(s[mi][nt][:, 2 * hh], s[mi][nt][:, 2 * hh + 1])
                        )
                    top = np.maximum(top, shfl_xor(top, 1))
                    top = np.maximum(top, shfl_xor(top, 2))
                    m_old = st["m"][mi][hh]
                    m_new = np.maximum(m_old, top * np.float32(scale_log2))
                    shift = np.where(m_new == neg_inf, np.float32(0), m_new).astype(np.float32)
                    with np.errstate(invalid="ignore"):
                        alpha = np.exp2(m_old - shift).astype(np.float32)
                    st["m"][mi][hh] = m_new
                    total = np.zeros(32, np.float32)
                    for nt in range(nt_count):
                        for e in (2 * hh, 2 * hh + 1):
                            p = np.exp2(s[mi][nt][:, e] * np.float32(scale_log2) - shift)
                            s[mi][nt][:, e] = p
                            total += p
                    st["l"][mi][hh] = st["l"][mi][hh] * alpha + total
                    for dt in range(dt_count):
                        st["o"][mi][dt][:, 2 * hh] *= alpha
                        st["o"][mi][dt][:, 2 * hh + 1] *= alpha
                pf.append(
                    [
                        np.stack(
                            [
                                pack(s[mi][2 * kk][:, 0], s[mi][2 * kk][:, 1]),
                                pack(s[mi][2 * kk][:, 2], s[mi][2 * kk][:, 3]),
                                pack(s[mi][2 * kk + 1][:, 0], s[mi][2 * kk + 1][:, 1]),
                                pack(s[mi][2 * kk + 1][:, 2], s[mi][2 * kk + 1][:, 3]),
                            ],
                            axis=1,
                        )
                        for kk in range(BKV // 16)
                    ]
                )
            st["pf"] = pf
        smem.wait(1)  # and __syncthreads()
        if j + 1 < tiles:
            load_kv(v, s_v + (stage ^ 1) * kv_bytes, kv0 + BKV)
        smem.commit()
        v_tile = s_v + stage * kv_bytes
        for warp in range(warps):
            st = state[warp]
            for kk in range(BKV // 16):
                for dp in range(dt_count // 2):
                    vb = ldmatrix_x4(
                        smem.bytes,
                        v_tile + swizzle(kk * 16 + v_key, 2 * dp + v_chunk, row_bytes),
                        trans=True,
                    )
                    for mi in range(mi_count):
                        o_ = st["o"][mi]
                        o_[2 * dp] = mma_16816(o_[2 * dp], st["pf"][mi][kk], vb[:, 0], vb[:, 1])
                        o_[2 * dp + 1] = mma_16816(
                            o_[2 * dp + 1], st["pf"][mi][kk], vb[:, 2], vb[:, 3]
                        )
    smem.wait(0)

    for warp in range(warps):
        st = state[warp]
        for mi in range(mi_count):
            for hh in range(2):
                total = st["l"][mi][hh]
                total = total + shfl_xor(total, 1)
                total = total + shfl_xor(total, 2)
                inv = np.where(total > 0, np.float32(1) / np.maximum(total, 1e-30), 0).astype(
                    np.float32
                )
                for ln in range(32):
                    row = row0 + warp * 16 * mi_count + mi * 16 + G_OF[ln] + 8 * hh
                    if row >= rows:
                        continue
                    base = row_offset(row) + 2 * T_OF[ln]
                    for dt in range(dt_count):
                        pair = st["o"][mi][dt][ln, 2 * hh : 2 * hh + 2] * inv[ln]
                        o[base + dt * 8 : base + dt * 8 + 2] = pair.astype(np.float16)


def attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = False,
    warps: int = 4, mi: int = 2, packed: bool = False, landing: str = "late",
) -> np.ndarray:  # fmt: skip
    """The kernel's output for float16 q (B, H, N, D), k and v (B, HKV, N, D), D in {64, 128}."""
    batch, heads, n, d = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    out = np.full(q.size, np.nan, np.float16)
    bq = 16 * mi * warps
    rows = n * group if packed else n
    grid_x = (rows + bq - 1) // bq
    grid_y = kv_heads if packed else heads
    scale_log2 = 1.0 / math.sqrt(d) * math.log2(math.e)
    flat = [np.ascontiguousarray(x, np.float16).ravel() for x in (q, k, v)]
    for bz in range(batch):
        for by in range(grid_y):
            for bx in range(grid_x):
                _block(
                    *flat, out, (batch, heads, kv_heads, n, d), (bx, by, bz), grid_x,
                    (warps, mi, packed), scale_log2, causal, landing,
                )  # fmt: skip
    return out.reshape(q.shape)
