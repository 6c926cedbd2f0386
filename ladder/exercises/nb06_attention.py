"""Exercises for notebook 06 (attention).

- ``check_score_memory(dict)``: the memory of the N x N scores the naive rungs materialize.
- ``check_flash_merge(merge)``: combine two partial softmax-weighted sums of one query row,
  as flash attention does between blocks of keys, written by you.
- ``check_backward_products(dict)``: the N x N x d products the backward's flash rungs run per
  head, against those the problem credits.
- ``check_softmax_share(dict)``: a key tile's exponentials against its two products, in an
  H100 SM's clocks, at d = 64 and d = 128: what rung 8 hides under the tensor cores.
- ``check_consumer_registers(dict)``: the registers rung 9's block holds at d = 64 and the
  most a consumer thread can raise itself to with setmaxnreg.
- ``check_wide_key_registers(dict)``: the registers a consumer thread gives S and P when rung
  11 widens the key tile to 128.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ladder.exercises._common import as_dict, close, require

SHAPE = (4, 16, 4096)  # B, H, N (d = 64 does not matter here)


def check_score_memory(answer: Any) -> str:
    """float32 scores S = Q K^T for every (batch, head) at SHAPE. Keys: gb (1 GB = 1e9
    bytes), growth (how many times larger when N doubles)."""
    found = as_dict(answer, ("gb", "growth"), "check_score_memory")
    b, h, n = SHAPE
    gb = b * h * n * n * 4 / 1e9
    require(close(found["gb"], gb), "gb: B x H x N x N scores of 4 bytes")
    require(found["growth"] == (2 * n) ** 2 // n**2, "growth: the scores are N x N")
    return f"right: {gb:.2f} GB, 4x per doubling; the flash rungs keep a block of scores at a time"


def check_flash_merge(merge: Callable[..., Any]) -> str:
    """A partial result over some keys is (m, l, o): m the max score, l = sum exp(s - m), o =
    sum exp(s - m) v (a vector, not yet divided by l). Write ``merge(a, b) -> (m, l, o)`` for
    the partials a and b of two blocks of keys; o / l of the merged result is the attention
    output. The check merges random blocks and compares with softmax(s) @ V in float64."""
    rng = np.random.default_rng(6)
    scores = rng.normal(0.0, 4.0, 29)
    values = rng.normal(0.0, 1.0, (29, 5))

    def partial(lo: int, hi: int) -> tuple[float, float, np.ndarray]:
        s, v = scores[lo:hi], values[lo:hi]
        m = float(s.max())
        p = np.exp(s - m)
        return m, float(p.sum()), p @ v

    merged = partial(0, 7)
    for lo, hi in ((7, 20), (20, 29)):
        merged = merge(merged, partial(lo, hi))
    m, total, o = merged
    weights = np.exp(scores - scores.max())
    ref = weights / weights.sum() @ values
    require(close(m, scores.max(), 1e-12), "m: the larger of the two maxima")
    require(
        close(total, weights.sum(), 1e-9),
        "l: rescale each block's sum to the new max, l_a exp(m_a - m) + l_b exp(m_b - m)",
    )
    out = np.asarray(o) / total
    err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    require(
        err < 1e-9,
        f"o / l is off (relative error {err:.2g}): o needs the same rescaling as l, "
        "o_a exp(m_a - m) + o_b exp(m_b - m)",
    )
    return (
        "right: any order of blocks gives softmax(s) @ V; rung 3 keeps (m, l, o) per row in "
        "registers"
    )


def check_backward_products(answer: Any) -> str:
    """Rungs 2 to 4 of the backward run two kernels with no atomics: a key kernel that owns dK
    and dV and a query kernel that owns dQ, each recomputing what it needs from the saved
    log-sum-exp. Count the products of N x N x d multiply-adds (2·N²·d operations each) per
    head. Keys: executed (by both kernels together), credited (what the problem's FLOP count
    stands for: ``get_problem("attention-backward").flops``)."""
    from ladder.core.rung import get_problem

    found = as_dict(answer, ("executed", "credited"), "check_backward_products")
    b, h, n, d = 1, 1, 64, 64
    credited = get_problem("attention-backward").flops((b, h, h, n, d)) / (2 * n * n * d)
    key_kernel = ("S", "dP", "dV", "dK")  # Sᵀ and dPᵀ, then the two sums over queries
    query_kernel = ("S", "dP", "dQ")  # S and dP again: the recomputation
    executed = len(key_kernel) + len(query_kernel)
    require(
        found["credited"] == credited,
        "credited: the chain rule's products, S, dP, dV, dQ and dK, each once",
    )
    require(
        found["executed"] == executed,
        "executed: the query kernel cannot see the key kernel's P and dS (they never leave "
        "the chip), so it computes S and dP again before dQ = dS K",
    )
    return (
        f"right: {executed} run where {credited:g} are credited, {executed / credited:.1f}x the "
        "tensor work; FlashAttention-2 runs 5 by adding dQ with atomics from the key kernel"
    )


def check_softmax_share(answer: Any) -> str:
    """An H100 SM multiplies 4096 half-precision FLOP a clock on its tensor cores and computes
    16 exponentials a clock (``diagrams.TENSOR_FLOP_PER_CLOCK``, ``EXP_PER_CLOCK``). One key
    tile of a warpgroup is 64 query rows x 64 keys: S = Q·Kᵀ and O += P·V (2 · 64 · 64 · d
    FLOP each) and one exponential a score. Keys: d64, d128: the exponentials' clocks over
    the two products' clocks, at each head dimension."""
    from ladder.attention import diagrams

    found = as_dict(answer, ("d64", "d128"), "check_softmax_share")
    share = {}
    for d in (64, 128):
        c = diagrams.tile_clocks(d, keys=64)
        share[f"d{d}"] = c["exp"] / (c["S"] + c["PV"])
    require(
        close(found["d64"], share["d64"]),
        "d64: 64 x 64 exponentials at 16 a clock, against 2 products of 2 · 64 · 64 · 64 FLOP "
        "at 4096 a clock",
    )
    require(
        close(found["d128"], share["d128"]), "d128: the products double, the exponentials do not"
    )
    return (
        f"right: {share['d64']:g} and {share['d128']:g}; waited for in turn (rung 7), the "
        "exponentials double a tile's time at d = 64 and add half at d = 128, which is why "
        "rung 8 runs them under P·V"
    )


def check_consumer_registers(answer: Any) -> str:
    """Rung 9 at d = 64 launches one block an SM of 5 warpgroups (640 threads: a producer and
    4 consumers), compiled for the most registers a thread that 640 threads leave in an H100
    SM's 65,536 (a multiple of 8). The producer warpgroup keeps 24 a thread
    (``setmaxnreg.dec``) and gives the rest to the consumers (``setmaxnreg.inc``, a multiple of
    8). Keys: pool (the registers the block holds), consumer (the most a consumer thread can
    have)."""
    from ladder.attention import r09_producer_flash as r09
    from ladder.attention import warp_specialized

    found = as_dict(answer, ("pool", "consumer"), "check_consumer_registers")
    pool = warp_specialized.launch_registers(r09.CONSUMERS[64])
    consumer = warp_specialized.consumer_registers(r09.CONSUMERS[64])
    require(
        close(found["pool"], pool),
        "pool: setmaxnreg moves only what the launch allocated: 640 threads times the registers "
        "ptxas compiled for (65,536 / 640, down to a multiple of 8), not the SM's whole file",
    )
    require(
        close(found["consumer"], consumer),
        "consumer: the pool less 128 x 24 for the producer, over 4 x 128 consumer threads, down "
        "to a multiple of 8",
    )
    return (
        f"right: {pool:,} registers, {consumer} a consumer thread, against the 96 every thread "
        "had at launch; rung 8's kernel needs 118 at d = 64, so without setmaxnreg four "
        "consumers would spill"
    )


def check_wide_key_registers(answer: Any) -> str:
    """Rung 11 makes each key tile 128 keys wide. A consumer warpgroup (128 threads) computes
    S = Q·Kᵀ for its 64 query rows as one 64 x 128 float32 accumulator spread evenly over its
    threads, then packs P = exp(S) two halves to a 32-bit register for the P·V product. Keys:
    s (the float registers S takes a thread), p (the 32-bit registers P takes a thread)."""
    from ladder.attention import r11_wide_keys_flash as r11

    found = as_dict(answer, ("s", "p"), "check_wide_key_registers")
    s = 64 * r11.BKV // 128
    require(
        close(found["s"], s),
        "s: 64 rows x 128 keys of float32 over the warpgroup's 128 threads (not a warp's 32)",
    )
    require(close(found["p"], s // 2), "p: two 16-bit values of P share a 32-bit register")
    return (
        f"right: {s} for S and {s // 2} for P, twice rung 9's; with O's 32 at d = 64 that is "
        f"{s + s // 2 + 32} before any address or statistic, more than the 112 four consumers "
        "get, so rung 11 runs three at 160"
    )
