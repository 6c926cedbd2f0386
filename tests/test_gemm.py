"""Every registered GEMM rung against a float64 reference, and every launcher's input checks.

Parametrized over the registry and each rung's dtypes: a rung added to ladder/gemm is tested
here without edits. Sizes are not multiples of any tile; the 4-aligned ones take the float4
paths, the others the padded paths of the tensor-core rungs.
"""

import numpy as np
import pytest
from conftest import ON_GPU, quick_unless, run_poisoned
from numba import cuda

from ladder.core import timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import get_problem, rungs
from ladder.gemm.problem import SIMULATOR_TEST_SIZES

PROBLEM = get_problem("gemm")
SIZES = PROBLEM.test_sizes("float32") if ON_GPU else SIMULATOR_TEST_SIZES

RUNGS = [r for r in rungs("gemm") if r.unavailable_reason() is None]
SKIPPED = [r for r in rungs("gemm") if r.unavailable_reason() is not None]
DEVICE_RUNGS = [r for r in RUNGS if not r.on_cpu]
RUNG_DTYPES = [(r, d) for r in RUNGS for d in r.dtypes]
DEVICE_RUNG_DTYPES = [(r, d) for r, d in RUNG_DTYPES if not r.on_cpu]


def _ids(case):
    rung, dtype = case
    return f"{rung.name}-{dtype}"


def _run(rung, size, dtype, seed=0):
    a, b = PROBLEM.make_inputs(size, dtype, seed)
    m, n, _ = size
    if rung.on_cpu:
        out = np.full((m, n), np.nan, resolve(dtype))
        rung.launch(a, b, out)
        return out, PROBLEM.reference((a, b))
    return run_poisoned(rung, (a, b), (m, n), dtype), PROBLEM.reference((a, b))


# the fast path keeps one size past every tile and the empty inner dimension (K = 0: no loop
# runs, C is zeros); the rest, the 1 x 1 x 1 edge among them, are slow
QUICK = {(17, 33, 65), (3, 5, 0)}


@pytest.mark.parametrize(
    "size",
    [pytest.param(s, marks=quick_unless(s not in QUICK)) for s in SIZES],
    ids=lambda s: "x".join(map(str, s)),
)
@pytest.mark.parametrize("case", RUNG_DTYPES, ids=_ids)
def test_rung_matches_float64_reference(case, size):
    rung, dtype = case
    out, ref = _run(rung, size, dtype, seed=sum(size))
    assert out.dtype == resolve(dtype)
    assert np.all(np.isfinite(out)), "an element of C was never written (still NaN)"
    assert timing.relative_error(out, ref) <= PROBLEM.tolerance(dtype)


@pytest.mark.parametrize("case", DEVICE_RUNG_DTYPES, ids=_ids)
def test_launcher_allocates_output_when_none(case):
    rung, dtype = case
    a, b = PROBLEM.make_inputs((9, 10, 11), dtype, 1)
    c = rung.launch(to_device(a), to_device(b))
    assert c.dtype == resolve(dtype)
    err = timing.relative_error(to_host(c), PROBLEM.reference((a, b)))
    assert err <= PROBLEM.tolerance(dtype)


def _bad_inputs(dtype):
    x = np.ones((4, 8), resolve(dtype))
    yield "float64 A", (x.astype(np.float64), x.T.copy()), TypeError, f"A must be .*{dtype}"
    yield "inner mismatch", (x, x), ValueError, "inner dimensions differ"
    yield "1-D A", (np.ones(8, x.dtype), x.T.copy()), ValueError, "A must be 2-D"
    yield "C shape", (x, x.T.copy(), np.ones((3, 3), x.dtype)), ValueError, "C must have"
    other = np.float16 if dtype == "float32" else np.float32
    yield "C dtype", (x, x.T.copy(), np.ones((4, 4), other)), TypeError, f"C must be {dtype}"


BAD_CASES = [(r, d, c) for r in DEVICE_RUNGS for d in r.dtypes for c in _bad_inputs(d)]


@pytest.mark.parametrize(
    "bad", BAD_CASES, ids=lambda b: f"{b[0].name}-{b[1]}-{b[2][0].replace(' ', '-')}"
)
def test_bad_input_raises_clear_error(bad):
    rung, _, (_, arrays, error, message) = bad
    with pytest.raises(error, match=message):
        rung.launch(*[to_device(x) for x in arrays])


@pytest.mark.parametrize("case", DEVICE_RUNG_DTYPES, ids=_ids)
def test_host_array_is_refused(case):
    rung, dtype = case
    a = np.ones((4, 8), resolve(dtype))
    with pytest.raises(TypeError, match="host array"):
        rung.launch(a, to_device(a.T.copy()))


@pytest.mark.parametrize("case", DEVICE_RUNG_DTYPES, ids=_ids)
def test_non_contiguous_is_refused(case):
    rung, dtype = case
    a = to_device(np.ones((4, 16), resolve(dtype)))[:, ::2]
    b = to_device(np.ones((8, 4), resolve(dtype)))
    with pytest.raises(ValueError, match="C-contiguous"):
        rung.launch(a, b)


def test_cpu_rung_refuses_device_arrays():
    cpu = next(r for r in rungs("gemm") if r.on_cpu)
    a = np.ones((4, 8), np.float32)
    with pytest.raises(TypeError, match="NumPy array"):
        cpu.launch(cuda.to_device(a), a.T.copy())


def test_unavailable_rungs_say_why():
    for rung in SKIPPED:
        assert "needs" in rung.unavailable_reason()
    if not ON_GPU:
        assert any(r.reference for r in SKIPPED), "cuBLAS should need a GPU here"


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU: CuPy and PyTorch arrays are GPU arrays")
@pytest.mark.parametrize("dtype", ["float32", "float16"])  # CuPy and CAI have no bfloat16
def test_cupy_and_torch_arrays_are_accepted(dtype):
    cupy = pytest.importorskip("cupy")
    best = [r for r in DEVICE_RUNGS if dtype in r.dtypes and not r.reference][-1]
    a, b = PROBLEM.make_inputs((65, 66, 67), dtype, 3)
    ref, tol = PROBLEM.reference((a, b)), PROBLEM.tolerance(dtype)
    c = best.launch(cupy.asarray(a), cupy.asarray(b))
    assert timing.relative_error(c.copy_to_host(), ref) <= tol
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = best.launch(ta, tb)
    assert timing.relative_error(c.copy_to_host(), ref) <= tol


# Rung 20 carries a stage's index and its barriers' phase from one tile to the next. At 140
# tiles of 128 x 256 on a GPU of fewer SMs, some blocks take two tiles; K = 192 is 3 K tiles,
# so a block's second tile starts at stage 3 of the ring of 4 and its copies wait on stages
# the first tile released (the test sizes above give each block one tile, or one K tile).
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_persistent_rung_carries_the_ring_across_tiles(dtype):
    from ladder.core.rung import get_rung

    rung = get_rung("gemm", "persistent")
    why = rung.unavailable_reason()
    if why:
        pytest.skip(why)
    size = (128 * 140, 256, 192)
    out, ref = _run(rung, size, dtype, seed=11)
    assert np.all(np.isfinite(out)), "an element of C was never written (still NaN)"
    assert timing.relative_error(out, ref) <= PROBLEM.tolerance(dtype)


def test_split_k_splits_where_the_tiles_are_few():
    """``splits_for``'s picks on 132 SMs, as the rung's prediction states them: one split
    where the tiles fill the GPU (the benchmark's squares, GPT-2's qkv, Llama's projections),
    more for decode's 16 tiles, LeNet's fully connected layer and GPT-2's fc2; never more
    splits than K tiles."""
    from ladder.gemm import r25_split_k as r25
    from ladder.gemm.tensor_core import padded_sizes

    def splits(m, n, k):
        return r25.splits_for(*padded_sizes(m, n, k, (r25.BM, r25.BN, r25.BK)), 132)

    assert [splits(s, s, s) for s in (4096, 8192)] == [1, 1]
    assert [splits(8192, 2304, 768), splits(4096, 4096, 14336)] == [1, 1]
    assert [splits(128, 4096, 4096), splits(10000, 128, 4624), splits(8192, 768, 3072)] == [8, 3, 2]
    assert splits(128, 256, 192) == 3  # one tile, three K tiles: a K tile per split, no more


# Split-K on a GPU at each split count, even and uneven K ranges, twice in a row (the counters
# are zeroed before each launch): 9 K tiles, so 2 splits take 4 and 5, 5 take 1 or 2. The last
# size gives 150 units to 132 SMs or fewer: blocks that run a second unit, K ranges of 3, 3, 4.
@pytest.mark.parametrize(
    ("size", "splits"),
    [((256, 512, 576), s) for s in (1, 2, 3, 5, 9)] + [((128 * 50, 256, 640), 3)],
)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_split_k_adds_every_partial_once(size, splits, dtype):
    from ladder.core.rung import get_rung
    from ladder.gemm import r25_split_k as r25
    from ladder.gemm.hopper import split_k_launch

    why = get_rung("gemm", "split-k").unavailable_reason()
    if why:
        pytest.skip(why)
    cupy = pytest.importorskip("cupy")
    m, n, k = size
    a, b = PROBLEM.make_inputs(size, dtype, 5)
    ref = PROBLEM.reference((a, b))
    name = r25._KERNEL[dtype]
    tiles = (r25.BM, r25.BN, r25.BK)
    launch = split_k_launch(
        r25.SOURCE, name, m, n, k, dtype, tiles, r25.THREADS, r25.SMEM_BYTES, splits
    )
    da, db = to_device(a), to_device(b)
    c = cupy.empty((m, n), dtype=cupy.uint16)  # the 16-bit output's bits
    for _ in range(2):
        c.fill(0xFFFF)  # NaN in float16 and in bfloat16
        launch(da.__cuda_array_interface__["data"][0], db.__cuda_array_interface__["data"][0],
               c.data.ptr)  # fmt: skip
        cupy.cuda.runtime.deviceSynchronize()
        out = cupy.asnumpy(c).view(resolve(dtype))
        assert np.all(np.isfinite(out.astype(np.float32))), "a tile was never written"
        assert timing.relative_error(out, ref) <= PROBLEM.tolerance(dtype)
        counted = cupy.asnumpy(launch.counters)  # each tile's units, all counted once
        assert np.all(counted == (splits if splits > 1 else 0)), counted
    k_tiles = k // r25.BK
    with pytest.raises(ValueError, match=f"splits must be 1 to {k_tiles}"):
        split_k_launch(
            r25.SOURCE, name, m, n, k, dtype, tiles, r25.THREADS, r25.SMEM_BYTES, k_tiles + 1
        )
