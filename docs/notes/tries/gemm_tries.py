"""Variants of the Hopper GEMM kernels that are not rungs, timed side by side (float16).

``python docs/notes/tries/gemm_tries.py --out results/<gpu>-gemm-tries.json [--sizes 4096 8192]``
on an sm_90a GPU. Each variant is a kernel source edited by exact text replacement (so the
diff is visible here), built by NVRTC like a rung, launched through the rungs' own
``TensorMapLaunch`` on square float16 matrices, timed with CUDA events around one launch after
writing 64 MB (flushing the L2), median of 30, and checked against a float32 product (the
variants that skip the epilogue leave C unwritten: their error is NaN by design).

- ``r16``, ``r17``: the rungs as they are, named by their numbers when the tries were run:
  today's rungs 18 (``wgmma``) and 19 (``smem-epilogue``).
- ``r16-no-epilogue``: rung 18 with its stores skipped (an upper bound: what the epilogue costs).
- ``cluster-multicast``: rung 18 in clusters of two blocks sharing B's tile by TMA multicast
  (``gemm_cluster_multicast.cu``, beside this file), ``-no-multicast`` the same clusters with
  each block loading all of B, ``-release-cluster`` with the stage releases arriving with
  ``.release.cluster`` semantics (what the first version did).
- ``r20``: rung 20 (``persistent``) as it is; ``r20-no-epilogue``: with its epilogue skipped
  (what overlapping the whole epilogue with multiplies could buy at most);
  ``r20-tma-store``: its epilogue's global stores made by the bulk tensor copy (a tensor map of
  C, two 64 x 64 boxes per round, issued by one thread, waited for only before the staging
  buffer is written again), so the consumers go back to multiplying as soon as C is staged.
- ``r20-tma-store-plain``: ``r20-tma-store`` without the copy of rung 20's store loop that it
  keeps behind a branch never taken (``if (M < 0)``), as the rung built from it had it;
  ``-trap``, ``-store1``, ``-syncwarp``: that loop replaced by a ``trap`` never taken, by a
  one-element store never taken, or by ``__syncwarp()``; ``-convert-first``: ``-plain`` with each
  round converted to half before the issuing thread waits for the last round's stores;
  ``-double``: ``-plain`` with C staged in four rounds of 64 columns into the two halves of each
  consumer's buffer in turn, the issuing thread waiting only for the round before last.
- ``r20-group1``, ``-group4``, ``-group16``, ``-group32``: rung 20 with GROUP_M (the block rows
  of its grouped tile order, 8 in the rung) set to 1 (row-major order), 4, 16 or 32.
- ``pingpong``: rung 20 with each consumer warpgroup on a tile of its own, 128 x 128, the tiles
  alternating between the two (``gemm_pingpong.cu``, beside this file): one writes C out while
  the other multiplies.

- ``r20-arrive-wg``, ``r20-arrive-warp``: rung 20 with one arrival on a stage's "empty"
  mbarrier per consumer warpgroup (or per warp) instead of one per consumer thread;
  ``r20-arrive-wg-tma-store`` adds ``r20-tma-store``'s epilogue.
- ``stream-k``: rung 20 with its last waves cut along K (``gemm_stream_k.cu``, beside this
  file): the tiles of the last full wave and the partial wave after it are shared out as equal
  ranges of K iterations, and a tile cut between two blocks is summed through a workspace.
- ``r20-skew1``, ``-skew2``, ``-skew3``: rung 20 with its second consumer warpgroup starting
  once the first has issued 1, 2 or 3 K tiles, so that their epilogues might fall apart.
- ``r20-stcs``: rung 20 with C's global stores marked streaming (``__stcs``: evict first).
- ``torch-matmul``: ``torch.matmul`` on the same inputs, timed the same way, with the names of
  the kernels cuBLAS ran (the PyTorch profiler).

``--only NAME ...`` times some variants only; ``--interleave`` times them in turns (one launch
of each per round, the order rotated by one each round, 30 rounds; the files of 2026-11-28 kept
one order) rather than one after another, so that the GPU's warming over the run does not fall
on the variants timed last; ``--head-start US`` queues US µs of GPU time (one thread sleeping)
before each repeat, as the harness does (1000 µs there), so that the GPU idles between repeats;
``--poison`` sets every byte of C (NaN) before each repeat's flush, as the harness does;
``--launch-only`` times nothing: it launches each variant four times and checks C, for Nsight
Compute to profile the fourth launch, one variant per run (``ncu --clock-control none
--launch-skip 3 --launch-count 1 -k regex:persistent python docs/notes/tries/gemm_tries.py
--launch-only --only r20-tma-store-plain --sizes 8192``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
GEMM = ROOT / "ladder" / "gemm"
HERE = Path(__file__).resolve().parent

NO_EPILOGUE = [
    (
        "    for (int j = 0; j < BN / 8; ++j) {\n      store2(",
        "    for (int j = 0; j < BN / 8; ++j) if (d[4 * j] == 12345.0f) {\n      store2(",
    )
]
NO_MULTICAST = [
    (
        "tma_load_multicast(sb + chunk * B_CHUNK_BYTES, &tmB, bar, n0 + chunk * B_CHUNK,\n"
        "                             kt * BK, (1u << CLUSTER) - 1);",
        "(void)chunk;",
    ),
    (
        "for (int j = 0; j < MY_CHUNKS; ++j) {",
        "for (int j = 0; j < 4; ++j) { "
        "tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK);",
    ),
    (
        "constexpr int RELEASES = CLUSTER * CONSUMERS * 4;",
        "constexpr int RELEASES = CONSUMERS * 4;",
    ),
    ("for (unsigned r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(bar, r);", "mbar_arrive(bar);"),
]
RELEASE_CLUSTER = (
    "mbarrier.arrive.shared::cluster.b64",
    "mbarrier.arrive.release.cluster.shared::cluster.b64",
)


# rung 20 with its epilogue skipped: never true, so the compiler keeps the sums
R20_NO_EPILOGUE = [
    (
        "    // The epilogue: rung 19's, in two rounds",
        "    if (M < 0) {  // never: the epilogue skipped\n"
        "    // The epilogue: rung 19's, in two rounds",
    ),
    (
        "      named_barrier(2 + c, 128);  // read back: the buffer is free for the next round\n"
        "    }\n  }\n}\n",
        "      named_barrier(2 + c, 128);  // read back: the buffer is free for the next round\n"
        "    }\n    }\n  }\n}\n",
    ),
]
# rung 20 with the bulk tensor copy storing C from the staging buffer (TMA's 128-byte swizzle is
# the staged layout), one thread issuing, the buffer waited for before it is written again
TMA_STORE = """
__device__ static inline void store_box(const TensorMap* map, unsigned src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1)
               : "memory");
}
"""
R20_TMA_STORE = [
    (
        '#include "hopper.cuh"  // TMA, mbarriers, descriptors, wgmma: the library\n',
        '#include "hopper.cuh"  // TMA, mbarriers, descriptors, wgmma: the library\n' + TMA_STORE,
    ),
    ("const TensorMap& tmB,\n", "const TensorMap& tmB, const TensorMap& tmC,\n"),
    (
        "const __grid_constant__ TensorMap tmB,",
        "const __grid_constant__ TensorMap tmB, const __grid_constant__ TensorMap tmC,",
    ),
    ("gemm<T>(tmA, tmB, C, M, N, K);", "gemm<T>(tmA, tmB, tmC, C, M, N, K);"),
    (
        "#pragma unroll\n      for (int u = 0; u < UNITS_PER_ROW; ++u) {",
        "      if (threadIdx.x % 128 == 0)  // the last bulk store has read the buffer\n"
        '        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
        "      named_barrier(2 + c, 128);\n"
        "#pragma unroll\n      for (int u = 0; u < UNITS_PER_ROW; ++u) {",
    ),
    (
        "      named_barrier(2 + c, 128);  // this round is staged\n",
        '      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");\n'
        "      named_barrier(2 + c, 128);  // this round is staged\n"
        "      if (threadIdx.x % 128 == 0) {\n"
        "        for (int q = 0; q < 2; ++q)\n"
        "          store_box(&tmC, smem_addr(stage_c + q * C_CHUNK_BYTES),\n"
        "                    n0 + h * ROUND_COLS + q * 64, m0 + c * 64);\n"
        '        asm volatile("cp.async.bulk.commit_group;" ::: "memory");\n'
        "      }\n"
        "      if (M < 0) {  // the threads' own stores: skipped\n",
    ),
    (
        "      named_barrier(2 + c, 128);  // read back: the buffer is free for the next round\n"
        "    }\n  }\n}\n",
        "      }\n    }\n  }\n"
        "  if (threadIdx.x % 128 == 0)\n"
        '    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");\n'
        "}\n",
    ),
]


# r20-tma-store's kernel keeps rung 20's own store loop behind a branch never taken (M < 0):
# the variants below take that dead loop out ("plain", what the rung built from it had) or put
# something else there, since without it the kernel runs 3% slower at 8192³
_DEAD_STORES = (
    "      if (M < 0) {  // the threads' own stores: skipped\n"
    "#pragma unroll 4\n"
    "      for (int i = threadIdx.x % 128; i < 64 * UNITS_PER_ROW; i += 128) {\n"
    "        const int r = i / UNITS_PER_ROW, u = i % UNITS_PER_ROW;\n"
    "        *reinterpret_cast<uint4*>(out + (size_t)r * N + h * ROUND_COLS + u * 8) =\n"
    "            *reinterpret_cast<const uint4*>(stage_c + staged(r, u));\n"
    "      }\n"
    "      }\n"
)
R20_TMA_STORE_PLAIN = [*R20_TMA_STORE, (_DEAD_STORES, "")]
R20_TMA_STORE_TRAP = [*R20_TMA_STORE, (_DEAD_STORES, '      if (M < 0) asm volatile("trap;");\n')]
R20_TMA_STORE_STORE1 = [*R20_TMA_STORE, (_DEAD_STORES, "      if (M < 0) C[threadIdx.x] = T(0);\n")]
R20_TMA_STORE_SYNCWARP = [*R20_TMA_STORE, (_DEAD_STORES, "      __syncwarp();\n")]
# ... and "plain" with each round's 64 conversions to half made (and pinned by an empty asm)
# before the thread that issues the stores waits for the last round's to have read the buffer
PACK2 = """
template <typename T> __device__ __forceinline__ unsigned pack2(float a, float b);
template <> __device__ __forceinline__ unsigned pack2<half>(float a, float b) {
  __half2 v = __floats2half2_rn(a, b);
  return *reinterpret_cast<unsigned*>(&v);
}
template <> __device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned*>(&v);
}
"""
R20_TMA_STORE_CONVERT_FIRST = [
    *R20_TMA_STORE_PLAIN,
    (TMA_STORE, TMA_STORE + PACK2),
    (
        "      if (threadIdx.x % 128 == 0)  // the last bulk store has read the buffer\n"
        '        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
        "      named_barrier(2 + c, 128);\n"
        "#pragma unroll\n      for (int u = 0; u < UNITS_PER_ROW; ++u) {"
        "  // 8-column group j = 16h + u of the tile\n"
        "        const int j = h * UNITS_PER_ROW + u;\n"
        "        store2(reinterpret_cast<T*>(stage_c + staged(r0, u) + (lane % 4) * 4), d[4 * j],\n"
        "               d[4 * j + 1]);\n"
        "        store2(reinterpret_cast<T*>(stage_c + staged(r0 + 8, u) + (lane % 4) * 4),"
        " d[4 * j + 2],\n"
        "               d[4 * j + 3]);\n"
        "      }\n",
        "      unsigned packed[2 * UNITS_PER_ROW];\n"
        "#pragma unroll\n      for (int u = 0; u < UNITS_PER_ROW; ++u) {\n"
        "        const int j = h * UNITS_PER_ROW + u;\n"
        "        packed[2 * u] = pack2<T>(d[4 * j], d[4 * j + 1]);\n"
        "        packed[2 * u + 1] = pack2<T>(d[4 * j + 2], d[4 * j + 3]);\n"
        '        asm volatile("" : "+r"(packed[2 * u]), "+r"(packed[2 * u + 1]));\n'
        "      }\n"
        "      if (threadIdx.x % 128 == 0)  // the last bulk store has read the buffer\n"
        '        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
        "      named_barrier(2 + c, 128);\n"
        "#pragma unroll\n      for (int u = 0; u < UNITS_PER_ROW; ++u) {\n"
        "        *reinterpret_cast<unsigned*>(stage_c + staged(r0, u) + (lane % 4) * 4) ="
        " packed[2 * u];\n"
        "        *reinterpret_cast<unsigned*>(stage_c + staged(r0 + 8, u) + (lane % 4) * 4) =\n"
        "            packed[2 * u + 1];\n"
        "      }\n",
    ),
]

# ... and "plain" with C staged in four rounds of 64 columns into the two halves of each
# consumer's 16 KB in turn, so that the issuing thread waits only for the stores of the round
# before last (wait_group.read 1): the copy reads one half while the threads fill the other
R20_TMA_STORE_DOUBLE = [
    *R20_TMA_STORE_PLAIN,
    ("constexpr int ROUND_COLS = 128;", "constexpr int ROUND_COLS = 64;"),
    ("constexpr int C_BYTES = 64 * ROUND_COLS * 2;",
     "constexpr int C_BYTES = 2 * 64 * ROUND_COLS * 2;"),
    ('asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");',
     'asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");'),
    ("store2(reinterpret_cast<T*>(stage_c + staged(r0, u)",
     "store2(reinterpret_cast<T*>(stage_c + (h % 2) * C_CHUNK_BYTES + staged(r0, u)"),
    ("store2(reinterpret_cast<T*>(stage_c + staged(r0 + 8, u)",
     "store2(reinterpret_cast<T*>(stage_c + (h % 2) * C_CHUNK_BYTES + staged(r0 + 8, u)"),
    ("        for (int q = 0; q < 2; ++q)\n"
     "          store_box(&tmC, smem_addr(stage_c + q * C_CHUNK_BYTES),\n",
     "        for (int q = 0; q < 1; ++q)\n"
     "          store_box(&tmC, smem_addr(stage_c + (h % 2) * C_CHUNK_BYTES),\n"),
]  # fmt: skip

# rung 20 with one arrival per consumer warpgroup (or per warp) on a stage's "empty" barrier,
# not one per thread: thread 0 of the warpgroup (lane 0 of each warp) arrives after its
# wgmma.wait_group, as CUTLASS's consumer release does
R20_ARRIVE_WG = [
    ("mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);",
     "mbar_init(smem_addr(&empty[s]), CONSUMERS);"),
    ("if (kt > 0) mbar_arrive(", "if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive("),
    ("    mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));  // the tile's",
     "    if (threadIdx.x % 128 == 0)\n"
     "      mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));  // the tile's"),
]  # fmt: skip
R20_ARRIVE_WARP = [
    ("mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);",
     "mbar_init(smem_addr(&empty[s]), CONSUMERS * 4);"),
    ("if (kt > 0) mbar_arrive(", "if (kt > 0 && lane == 0) mbar_arrive("),
    ("    mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));  // the tile's",
     "    if (lane == 0) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));  // the tile's"),
]  # fmt: skip


def _skew(k: int) -> list[tuple[str, str]]:
    """Rung 20 with its second consumer starting once the first has issued its first ``k`` K
    tiles (a named barrier the first arrives at after issuing K tile k - 1, when it has
    released K tile k - 2), so that the two might reach their epilogues apart and one multiply
    while the other stores C."""
    return [
        ("  float d[128];\n  int it = 0;",
         "  float d[128];\n"
         '  if (c == 1) asm volatile("bar.sync 1, 256;" ::: "memory");  // the first is ahead\n'
         "  int it = 0;"),
        ("      if (kt > 0) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));\n",
         "      if (kt > 0) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));\n"
         f'      if (c == 0 && it == {k} - 1) asm volatile("bar.arrive 1, 256;" ::: "memory");\n'),
    ]  # fmt: skip


# rung 20 with its global stores of C marked streaming (st.global.cs: evict first), so that C's
# 32 MB at 4096³ do not push A's and B's tiles out of L2 while other blocks still read them
R20_STCS = [
    ("        *reinterpret_cast<uint4*>(out + (size_t)r * N + h * ROUND_COLS + u * 8) =\n"
     "            *reinterpret_cast<const uint4*>(stage_c + staged(r, u));",
     "        __stcs(reinterpret_cast<uint4*>(out + (size_t)r * N + h * ROUND_COLS + u * 8),\n"
     "               *reinterpret_cast<const uint4*>(stage_c + staged(r, u)));"),
]  # fmt: skip


def _group(g: int) -> list[tuple[str, str]]:
    """Rung 20 with GROUP_M = g block rows to a group (1: plain row-major tile order)."""
    return [("constexpr int GROUP_M = 8;", f"constexpr int GROUP_M = {g};")]


def _source(tmp: Path, path: Path, name: str, edits: list[tuple[str, str]]) -> Any:
    from ladder.core import cuda_cpp

    folder = tmp / name
    folder.mkdir()
    shutil.copy(GEMM / "hopper.cuh", folder / "hopper.cuh")
    text = path.read_text()
    for old, new in edits:
        assert old in text, (name, old)
        text = text.replace(old, new)
    (folder / path.name).write_text(text)
    return cuda_cpp.CudaSource(folder / path.name, ("sm_90a",), True)


def variants(tmp: Path) -> dict[str, tuple[Any, str]]:
    r16, r17 = GEMM / "r18_wgmma.cu", GEMM / "r19_smem_epilogue.cu"
    r20 = GEMM / "r20_persistent.cu"
    cluster = HERE / "gemm_cluster_multicast.cu"
    return {
        "r16": (_source(tmp, r16, "r16", []), "wgmma_tma"),
        "r16-no-epilogue": (_source(tmp, r16, "r16-no-epilogue", NO_EPILOGUE), "wgmma_tma"),
        "r17": (_source(tmp, r17, "r17", []), "smem_epilogue"),
        "cluster-multicast": (_source(tmp, cluster, "cluster", []), "cluster_multicast"),
        "cluster-no-multicast": (
            _source(tmp, cluster, "cluster-no-multicast", NO_MULTICAST), "cluster_multicast"),
        "cluster-multicast-release-cluster": (
            _source(tmp, cluster, "cluster-release", [RELEASE_CLUSTER]), "cluster_multicast"),
        "r20": (_source(tmp, r20, "r20", []), "persistent"),
        "r20-no-epilogue": (_source(tmp, r20, "r20-no-epilogue", R20_NO_EPILOGUE), "persistent"),
        "r20-tma-store": (_source(tmp, r20, "r20-tma-store", R20_TMA_STORE), "persistent"),
        **{f"r20-tma-store-{name}": (_source(tmp, r20, f"r20-tma-store-{name}", edits),
                                     "persistent")
           for name, edits in [("plain", R20_TMA_STORE_PLAIN), ("trap", R20_TMA_STORE_TRAP),
                               ("store1", R20_TMA_STORE_STORE1),
                               ("syncwarp", R20_TMA_STORE_SYNCWARP),
                               ("convert-first", R20_TMA_STORE_CONVERT_FIRST),
                               ("double", R20_TMA_STORE_DOUBLE)]},
        "r20-stcs": (_source(tmp, r20, "r20-stcs", R20_STCS), "persistent"),
        "r20-arrive-wg": (_source(tmp, r20, "r20-arrive-wg", R20_ARRIVE_WG), "persistent"),
        "r20-arrive-warp": (_source(tmp, r20, "r20-arrive-warp", R20_ARRIVE_WARP), "persistent"),
        "r20-arrive-wg-tma-store": (
            _source(tmp, r20, "r20-arrive-wg-tma-store", R20_ARRIVE_WG + R20_TMA_STORE),
            "persistent"),
        "pingpong": (_source(tmp, HERE / "gemm_pingpong.cu", "pingpong", []), "pingpong"),
        "stream-k": (_source(tmp, HERE / "gemm_stream_k.cu", "stream-k", []), "stream_k"),
        **{f"r20-skew{k}": (_source(tmp, r20, f"r20-skew{k}", _skew(k)), "persistent")
           for k in (1, 2, 3)},
        **{
            f"r20-group{g}": (_source(tmp, r20, f"r20-group{g}", _group(g)), "persistent")
            for g in (1, 4, 16, 32)
        },
    }  # fmt: skip


def _timed(
    run: tuple[Any, Any, Any], size: int, repeats: int, head_start_us: int = 0,
    poison: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Launch once and check C against ``ref``; then the median of ``repeats`` CUDA-event
    timings of one launch each, the L2 flushed (64 MB written) before each."""
    return _interleaved({"one": run}, size, repeats, head_start_us, poison)["one"]


def _error(launch: Any, c: Any, ref: Any, calls: int = 1) -> float:
    """C's largest error against ``ref``, relative to ``ref``'s largest entry, after filling C
    with NaN and launching ``calls`` times."""
    import cupy

    c.fill(np.nan)
    for _ in range(calls):
        launch()
    cupy.cuda.Device().synchronize()
    return float(cupy.abs(c.astype(cupy.float32) - ref).max() / cupy.abs(ref).max())


def _interleaved(
    launches: dict[str, tuple[Any, Any, Any]], size: int, repeats: int, head_start_us: int = 0,
    poison: bool = False,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """``_timed`` for several kernels at once, taking turns: repeat r times each of them once
    before repeat r + 1 of any, the order rotated by one each round, so a GPU that warms up
    (and clocks down) over the run slows them alike instead of the ones timed last. With
    ``head_start_us``, the harness's one sleeping thread is queued that long before each
    repeat (the GPU nearly idle between repeats, as in ``ladder run``); with ``poison``,
    every byte of C is set before it, as the harness does. C is filled with NaN and computed
    once more after the timing, and checked again."""
    import cupy

    from ladder.core.timing import _Scratch

    errors = {name: _error(*run) for name, run in launches.items()}
    flush = cupy.empty(64 << 20, cupy.uint8)
    names = list(launches)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            launch, c, _ = launches[name]
            if head_start_us:  # on the legacy default stream, CuPy's current one here
                _Scratch.head_start(head_start_us)
            if poison:
                cupy.cuda.runtime.memsetAsync(c.data.ptr, 0xFF, c.nbytes, 0)
            flush.fill(1)
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            launch()
            end.record()
            end.synchronize()
            times[name].append(cupy.cuda.get_elapsed_time(start, end))
    after = {}
    for name, (launch, c, ref) in launches.items():
        after[name] = _error(launch, c, ref)
        if hasattr(launch, "after"):
            launch.after()
    flops = 2.0 * size**3
    out = {}
    for name, samples in times.items():
        ms = float(np.median(samples))
        out[name] = {"size": [size] * 3, "median_ms": ms, "tflops": flops / ms / 1e9,
                     "min_ms": float(min(samples)), "max_ms": float(max(samples)),
                     "rel_err": errors[name] if np.isfinite(errors[name]) else None,
                     "rel_err_after": after[name] if np.isfinite(after[name]) else None,
                     }  # fmt: skip
        if hasattr(launches[name][0], "kernels"):
            out[name]["kernels"] = launches[name][0].kernels
    return out


def _inputs(size: int) -> tuple[Any, Any, Any, Any]:
    """Square float16 A and B (uniform in [-1, 1), seed 0), their float32 product and a C
    filled with NaN."""
    import cupy

    rng = cupy.random.default_rng(0)
    a = rng.uniform(-1, 1, (size, size), dtype=cupy.float32).astype(cupy.float16)
    b = rng.uniform(-1, 1, (size, size), dtype=cupy.float32).astype(cupy.float16)
    ref = a.astype(cupy.float32) @ b.astype(cupy.float32)
    return a, b, ref, cupy.full((size, size), np.nan, cupy.float16)


def prepare_variant(source: Any, entry: str, size: int) -> tuple[Any, Any, Any]:
    """(launch, C, reference) of a one-block-per-tile kernel (rungs 18 and 19, the cluster
    tries): rung 18's launch, grid and shared memory."""
    from ladder.gemm.hopper import tensor_map
    from ladder.gemm.r18_wgmma import SMEM_BYTES
    from ladder.gemm.tensor_core import TensorMapLaunch

    m = n = k = size
    a, b, ref, c = _inputs(size)
    kernel = source.kernel(entry)
    kernel.max_dynamic_shared_size_bytes = SMEM_BYTES

    def maps(pa: int, pb: int) -> tuple[np.ndarray, np.ndarray]:
        return tensor_map(pa, m, k, 128, 64), tensor_map(pb, k, n, 64, 64)

    launch = TensorMapLaunch(kernel, ((m // 128) * (n // 256),), (384,), SMEM_BYTES, maps,
                             (np.int32(m), np.int32(n), np.int32(k)))  # fmt: skip
    return lambda: launch(a.data.ptr, b.data.ptr, c.data.ptr), c, ref


def prepare_persistent(
    source: Any, entry: str, size: int, store: bool = False, bn: int = 256,
    workspace: bool = False,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """``prepare_variant`` for rung 20's kernels: min(SMs, tiles) blocks of 128 x ``bn`` tiles,
    rung 20's shared memory; with ``store`` a third tensor map, of C in 64 x 64 boxes, after
    A's and B's (the ping-pong try has 128 x 128 tiles and the same shared memory); with
    ``workspace`` (the stream-K try) two more pointers: G x 128 KB of partial sums and G x 4
    ints of flags, zeroed once (every launch must leave them zero, checked after the timing)."""
    import cupy

    from ladder.gemm.hopper import sm_count, tensor_map
    from ladder.gemm.r20_persistent import SMEM_BYTES

    m = n = k = size
    a, b, ref, c = _inputs(size)
    kernel = source.kernel(entry)
    kernel.max_dynamic_shared_size_bytes = SMEM_BYTES
    maps = [tensor_map(a.data.ptr, m, k, 128, 64), tensor_map(b.data.ptr, k, n, 64, 64)]
    if store:
        maps.append(tensor_map(c.data.ptr, m, n, 64, 64))
    blocks = min((m // 128) * (n // bn), sm_count())
    args = [*maps, np.uint64(c.data.ptr), np.int32(m), np.int32(n), np.int32(k)]
    work = flags = None
    if workspace:
        work = cupy.zeros(blocks * 2 * 64 * 256, cupy.float32)
        flags = cupy.zeros(blocks * 4, cupy.int32)
        args += [np.uint64(work.data.ptr), np.uint64(flags.data.ptr)]

    def launch() -> None:
        kernel((blocks,), (384,), tuple(args), shared_mem=SMEM_BYTES)

    if flags is not None:

        def check_flags() -> None:
            assert int(cupy.abs(flags).max()) == 0, "stream-K flags left set"

        launch.after = check_flags  # type: ignore[attr-defined]
    launch.keep = (a, b, work, flags)  # type: ignore[attr-defined]  # the maps hold pointers
    return launch, c, ref


def prepare_library(size: int) -> tuple[Any, Any, Any]:
    """``torch.matmul`` (cuBLAS) on the same inputs, timed as the variants are, with the names
    of the kernels cuBLAS ran (from the PyTorch profiler) written with the run."""
    import cupy
    import torch

    a, b, ref, _ = _inputs(size)
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    tc = torch.empty_like(ta)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.matmul(ta, tb, out=tc)
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})

    def launch() -> None:
        torch.matmul(ta, tb, out=tc)

    launch.kernels = names  # type: ignore[attr-defined]
    print(f"{size} torch-matmul kernels: {names}")
    return launch, cupy.asarray(tc), ref


def _prepare(found: dict[str, tuple[Any, str]], name: str, size: int) -> tuple[Any, Any, Any]:
    source, entry = found[name]
    if name == "torch-matmul":
        return prepare_library(size)
    if name == "pingpong":
        return prepare_persistent(source, entry, size, bn=128)
    if name == "stream-k":
        return prepare_persistent(source, entry, size, workspace=True)
    if name.startswith("r20"):
        return prepare_persistent(source, entry, size, store="tma-store" in name)
    return prepare_variant(source, entry, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the results file (not with --launch-only)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--only", nargs="+", help="time these variants only")
    parser.add_argument(
        "--head-start",
        type=int,
        default=0,
        help="µs of GPU time (one thread sleeping) queued before each repeat",
    )
    parser.add_argument(
        "--poison",
        action="store_true",
        help="set every byte of C (NaN) before each repeat, as the harness does",
    )
    parser.add_argument("--interleave", action="store_true",
                        help="time the variants in turns, one launch each per round")  # fmt: skip
    parser.add_argument(
        "--launch-only",
        action="store_true",
        help="launch each variant four times and check C, untimed (for Nsight Compute)",
    )
    args = parser.parse_args()
    if not args.out and not args.launch_only:
        parser.error("--out is required (unless --launch-only)")
    import cupy

    from ladder.core import device

    tmp = Path(tempfile.mkdtemp())
    try:
        found = {**variants(tmp), "torch-matmul": (None, "")}
        runs = []
        for size in args.sizes:
            chosen = [name for name in found if not args.only or name in args.only]
            prepared = {name: _prepare(found, name, size) for name in chosen}
            if args.launch_only:
                for name in chosen:
                    print(f"{size} {name}: error {_error(*prepared[name], calls=4):.3g}")
                continue
            how = (30, args.head_start, args.poison)
            if args.interleave:
                timed = _interleaved(prepared, size, *how)
            else:
                timed = {name: _timed(prepared[name], size, *how) for name in chosen}
            for name in chosen:
                run = {"variant": name, **timed[name]}
                print(f"{size} {name}: {run['median_ms']:.4f} ms, {run['tflops']:.1f} TFLOP/s")
                runs.append(run)
            del prepared
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.launch_only:
        return
    doc = {"gpu": device.facts().name, "cupy": cupy.__version__, "dtype": "float16",
           "method": "docs/notes/tries/gemm_tries.py: CUDA events around one launch, L2 "
           "flushed (64 MB written) before each, median of 30"
           + (", the variants in turns" if args.interleave else "")
           + (f", {args.head_start} µs head start" if args.head_start else "")
           + (", C poisoned before each" if args.poison else ""),
           "runs": runs}  # fmt: skip
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
