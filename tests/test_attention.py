"""Every attention rung against float64, the clear errors, the memory accounting, and a lane-by-
lane NumPy model of the tensor-core kernel.

Parametrized over the registry of both problems (``attention`` and ``attention-causal``): a rung
added to ladder/attention is tested here without edits. On a GPU the shapes are the problem's
test sizes (N = 1, N = 17, d = 16/17/64/80/128, GQA and MQA, N past one tile); in the simulator,
which runs every thread of a block as a Python thread, one or two heads with N <= 17 and d = 16.
"""

import math

import numpy as np
import pytest
from conftest import (
    bad_input_cases,
    check_against_reference,
    gpu_only,
    launch_refuses,
    run_poisoned,
    twin_cases,
)

from ladder.attention import LADDER, lane_model, memory  # (registers the problems and rungs)
from ladder.attention.memory import AttentionMemoryError
from ladder.attention.problem import SIMULATOR_SIZES, attention_numpy
from ladder.core import timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import get_problem, get_rung, rungs

PROBLEMS = ("attention", "attention-causal")
RUNGS = [r for name in PROBLEMS for r in rungs(name) if r.unavailable_reason() is None]
DEVICE_RUNGS = [r for r in RUNGS if not r.reference]
pytestmark = pytest.mark.usefixtures("quick_thread_switches")  # the simulator's barriers


def _run(rung, inputs, dtype, **kwargs):
    return run_poisoned(rung, inputs, inputs[0].shape, dtype, **kwargs)


@pytest.mark.parametrize(
    ("rung", "dtype", "size"), list(twin_cases(RUNGS, PROBLEMS, SIMULATOR_SIZES))
)
def test_attention_rung_matches_float64_reference(rung, dtype, size):
    check_against_reference(rung, dtype, size, _run)


@pytest.mark.parametrize(
    "rung", [r for r in DEVICE_RUNGS if r.problem == PROBLEMS[0]], ids=lambda r: r.key
)
def test_large_scores_do_not_overflow(rung):
    """Scores of standard deviation 16: exp would overflow without the running max. (Not the
    libraries: the materialized one rounds such scores to float16, 1% errors by design.)"""
    dtype = rung.dtypes[-1]
    problem = get_problem(rung.problem)
    q, k, v = problem.make_inputs((1, 1, 1, 9, 16), dtype, seed=2)
    q = (q.astype(np.float32) * 16).astype(resolve(dtype))
    out = _run(rung, (q, k, v), dtype)
    assert np.all(np.isfinite(out))
    assert timing.relative_error(out, problem.reference((q, k, v))) <= problem.tolerance(dtype)


def test_flash_rescales_across_key_tiles():
    """Rung 3 at N = 65, d = 16, causal: two query tiles of 64 (the second launched first), two
    and three key tiles of 32 with the online rescale between them, the last cut by N and all
    crossing the diagonal."""
    rung = get_rung("attention-causal", "flash")
    problem = get_problem(rung.problem)
    inputs = problem.make_inputs((1, 1, 1, 65, 16), "float32", seed=5)
    out = _run(rung, inputs, "float32")
    assert timing.relative_error(out, problem.reference(inputs)) <= problem.tolerance("float32")


def test_reference_is_the_definition():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 4, 5, 3))
    k = rng.standard_normal((2, 2, 5, 3))
    v = rng.standard_normal((2, 2, 5, 3))
    for causal in (False, True):
        out = attention_numpy(q, k, v, causal=causal)
        b, h, i = 1, 3, 2  # query head 3 reads key/value head 1 (two query heads per group)
        s = np.array([q[b, h, i] @ k[b, 1, j] / math.sqrt(3) for j in range(5)])
        if causal:
            s[i + 1 :] = -np.inf
        p = np.exp(s - s.max())
        assert out[b, h, i] == pytest.approx((p / p.sum()) @ v[b, 1])


def test_problem_figures():
    full, causal = get_problem("attention"), get_problem("attention-causal")
    size = (4, 16, 16, 4096, 64)
    assert full.flops(size) == 4.0 * 4 * 16 * 4096**2 * 64 == 2 * causal.flops(size)
    assert full.min_bytes(size, "float16") == 4 * 4 * 16 * 4096 * 64 * 2
    assert full.min_bytes((4, 16, 1, 4096, 64), "float32") == (2 * 64 + 2 * 4) * 4096 * 64 * 4
    assert full.output_shape((2, 8, 2, 17, 64)) == (2, 8, 17, 64)
    assert (4, 16, 16, 4096, 64) in full.standard_sizes("float16")


# ---- clear errors ---------------------------------------------------------------------------


def _bad_inputs(rung):
    dtype = rung.dtypes[-1]
    problem = get_problem(rung.problem)
    q, k, v = problem.make_inputs((1, 4, 2, 8, 16), dtype, 0)
    yield "dtype", tuple(x.astype(np.float64) for x in (q, k, v)), TypeError, "q must be"
    yield "v dtype", (q, k, v.astype(np.float64)), TypeError, "v must be b?float"
    yield "3-D", (q[0], k, v), ValueError, "4-D"
    yield "k and v differ", (q, k, v[:, :1]), ValueError, "same shape"
    yield "N differs", (q, k[:, :, :5], v[:, :, :5]), ValueError, "batch, N and d"
    yield "d differs", (q, k[..., :8], v[..., :8]), ValueError, "batch, N and d"
    three = np.concatenate([k, k[:, :1]], axis=1)
    yield "heads not a multiple", (q, three, three), ValueError, "multiple of the key/value"


@pytest.mark.parametrize(
    ("rung", "arrays", "error", "message"),
    bad_input_cases([r for r in DEVICE_RUNGS if r.problem == PROBLEMS[0]], _bad_inputs),
)
def test_bad_input_raises_clear_error(rung, arrays, error, message):
    launch_refuses(rung, arrays, error, message)


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.key)
def test_host_array_and_bad_output_are_refused(rung):
    dtype = rung.dtypes[-1]
    q, k, v = get_problem(rung.problem).make_inputs((1, 2, 1, 4, 16), dtype, 0)
    with pytest.raises(TypeError, match="host array"):
        rung.launch(q, to_device(k), to_device(v))
    device = [to_device(x) for x in (q, k, v)]
    with pytest.raises(ValueError, match="out must have q's shape"):
        rung.launch(*device, to_device(np.zeros((1, 2, 4, 8), resolve(dtype))))
    with pytest.raises(TypeError, match="out must be"):
        rung.launch(*device, to_device(np.zeros(q.shape, np.float64)))


def test_float32_is_refused_by_the_half_precision_rungs():
    q, k, v = get_problem("attention").make_inputs((1, 1, 1, 4, 16), "float32", 0)
    for rung in DEVICE_RUNGS:
        if "float32" not in rung.dtypes:
            with pytest.raises(TypeError, match="q must be float16"):
                rung.launch(*[to_device(x) for x in (q, k, v)])


# ---- memory ---------------------------------------------------------------------------------


def test_naive_rung_names_the_memory_its_scores_need():
    rung = get_rung("attention", "naive")
    q, k, v = get_problem("attention").make_inputs((2, 3, 3, 64, 16), "float32", 0)
    args = [to_device(x) for x in (q, k, v)]
    out = to_device(np.empty(q.shape, np.float32))
    with memory.device_limit(memory.TRACKER.current + 50_000):
        with pytest.raises(AttentionMemoryError, match=r"needs 98.3 KB \(98,304 bytes\)") as err:
            rung.launch(*args, out)
    assert "score matrix (2 x 3 x 64 x 64 float32)" in str(err.value)
    assert err.value.needed == 2 * 3 * 64 * 64 * 4


def test_row_rung_refuses_rows_longer_than_shared_memory():
    from ladder.attention.r02_row_in_shared import MAX_N

    rung = get_rung("attention", "row-in-shared")
    q, k, v = get_problem("attention").make_inputs((1, 1, 1, MAX_N + 1, 1), "float32", 0)
    with pytest.raises(AttentionMemoryError, match="shared memory per block"):
        rung.launch(*[to_device(x) for x in (q, k, v)], to_device(q))


def test_memory_grows_as_n_squared_for_naive_and_linearly_for_flash():
    naive = memory.memory_vs_n(get_rung("attention", "naive"), [4, 8, 16], d=16, dtype="float32")
    flash = memory.memory_vs_n(get_rung("attention", "flash"), [8, 16], d=16, dtype="float32")
    for row in naive + flash:
        assert row["error"] is None, row["error"]
        assert row["io_bytes"] == 4 * row["n"] * 16 * 4  # q, k, v and out, float32
    assert [r["workspace_bytes"] for r in naive] == [4 * n * n for n in (4, 8, 16)]
    assert [r["workspace_bytes"] for r in flash] == [0, 0]
    assert flash[1]["peak_bytes"] == 2 * flash[0]["peak_bytes"]


def test_memory_table_records_where_a_rung_stops():
    rung = get_rung("attention", "naive")
    with memory.device_limit(memory.TRACKER.current + 40_000):
        rows = memory.memory_vs_n(rung, [2, 128], d=16, dtype="float16")
    assert rows[0]["error"] is None and rows[0]["peak_bytes"] > 0
    assert "AttentionMemoryError" in rows[1]["error"] and rows[1]["peak_bytes"] is None


# ---- the tensor-core kernel, lane by lane ----------------------------------------------------

MODEL_CASES = [
    # size, (warps, m16 tiles per warp), packed, causal, landing
    ((1, 2, 2, 17, 64), (4, 2), False, False, "late"),
    ((1, 1, 1, 1, 64), (4, 2), False, True, "early"),
    ((1, 2, 1, 130, 64), (4, 2), False, True, "late"),
    ((1, 2, 1, 130, 64), (4, 1), False, False, "early"),
    ((2, 1, 1, 70, 64), (8, 1), False, True, "early"),
    ((1, 2, 2, 80, 128), (4, 1), False, True, "late"),
    ((1, 4, 1, 33, 64), (4, 2), True, True, "late"),
    ((1, 4, 2, 70, 128), (8, 1), True, False, "early"),
]


@pytest.mark.parametrize(("size", "config", "packed", "causal", "landing"), MODEL_CASES, ids=str)
def test_tensor_core_kernel_model_matches_reference(size, config, packed, causal, landing):
    """The kernel's index arithmetic, executed in NumPy: right, and free of bank conflicts."""
    q, k, v = get_problem("attention").make_inputs(size, "float16", seed=sum(size))
    lane_model.BANK_CONFLICTS[0] = 0
    out = lane_model.attention(
        q, k, v, causal=causal, warps=config[0], mi=config[1], packed=packed, landing=landing
    )
    assert np.all(np.isfinite(out))
    assert timing.relative_error(out, attention_numpy(q, k, v, causal=causal)) <= 2e-3
    assert lane_model.BANK_CONFLICTS[0] == 0


def test_every_configuration_has_a_kernel():
    from ladder.attention import r05_tensor_core_flash as r05

    text = r05.SOURCE.text()
    for d, configs in r05.CONFIGS.items():
        assert r05.TUNED[d] in configs
        for warps, mi in configs:
            assert r05.shared_bytes(d, warps, mi) <= 227 * 1024
            for packed in (False, True):
                name = r05.kernel_name(d, warps, mi, packed)
                assert f"FLASH_ENTRY({name}, {d}, {warps}, {mi}, {str(packed).lower()}," in text
    assert [r05.kernel_d(d, "r") for d in (1, 16, 64, 65, 128)] == [64, 64, 64, 128, 128]
    with pytest.raises(ValueError, match="up to 128"):
        r05.kernel_d(129, "rung 5")


# ---- on a GPU ---------------------------------------------------------------------------------

LONG = (1, 1, 1, 32768, 64)


@pytest.fixture(scope="module")
def long_case():
    problem = get_problem("attention-causal")
    inputs = problem.make_inputs(LONG, "float16", seed=7)
    return inputs, problem.reference(inputs)


@gpu_only
@pytest.mark.parametrize("name", LADDER[LADDER.index("flash") :])  # every rung from flash on
def test_flash_rungs_run_at_n_32768(name, long_case):
    rung = get_rung("attention-causal", name)
    if rung.unavailable_reason():
        pytest.skip(rung.unavailable_reason())
    inputs, ref = long_case
    out = _run(rung, inputs, "float16")
    assert timing.relative_error(out, ref) <= get_problem(rung.problem).tolerance("float16")


@gpu_only
def test_naive_rung_at_n_32768_says_what_it_needed():
    rung = get_rung("attention", "naive")
    q, k, v = get_problem("attention").make_inputs((4, 16, 16, 32768, 64), "float16", 0)
    needed = 4 * 16 * 32768 * 32768 * 4
    with pytest.raises(AttentionMemoryError, match=f"needs 275 GB \\({needed:,} bytes\\)"):
        rung.launch(*[to_device(x) for x in (q, k, v)])


def test_results_summary_names_the_fastest_tensor_core_rung_and_its_verdict():
    shape = [4, 16, 16, 4096, 64]

    def run(rung, ms, dtype="float16", spread=0.0):
        row = {"rung": rung, "dtype": dtype, "shape": shape, "ok": True, "median_ms": ms}
        return row | {"min_ms": ms - spread, "max_ms": ms + spread}

    runs = [run("naive", 300.0), run("flash", 30.0), run("tensor-core-flash", 1.0)]
    runs += [run("wide-keys-flash", 0.5, spread=0.01), run("sdpa-cudnn", 0.6, spread=0.01)]
    runs += [run("sdpa", 0.61), run("naive", 300.0, "float32"), run("flash", 25.0, "float32")]
    runs += [run("wide-keys-flash", 0.59, "bfloat16", 0.02), run("sdpa", 0.6, "bfloat16", 0.02)]
    text = get_problem("attention").readme_summary(runs, {})
    assert "| float16 | 4 × 16 × 16 × 4096 × 64 | 10.00 | `wide-keys-flash` | 1.20× " in text
    assert "`sdpa-cudnn` | ahead |" in text
    assert "| float32 | 4 × 16 × 16 × 4096 × 64 | 12.00 | — | — | — |" in text
    assert (
        "| bfloat16 | 4 × 16 × 16 × 4096 × 64 | — | `wide-keys-flash` | 1.02× `sdpa` | parity |"
        in text
    )
    assert get_problem("attention").readme_summary([], {}) == ""


def test_one_slow_repeat_does_not_turn_a_loss_into_parity():
    from ladder.core.derived import verdict

    rung = {"median_ms": 0.51, "samples_ms": [0.50 + 0.001 * i for i in range(20)]}
    library = {"median_ms": 0.36, "samples_ms": [0.36] * 19 + [0.94]}
    assert verdict(rung, library) == "behind"
    assert verdict(library, rung) == "ahead"
    assert verdict(rung, rung) == "parity"


@gpu_only
@pytest.mark.parametrize(
    ("name", "dtype"),
    [("tensor-core-flash", "float16"), ("gqa-packed", "float16"), ("wgmma-flash", "float16"),
     ("wgmma-flash", "bfloat16"), ("overlap-flash", "float16"), ("overlap-flash", "bfloat16"),
     ("producer-flash", "float16"), ("producer-flash", "bfloat16"),
     ("pingpong-flash", "float16"), ("pingpong-flash", "bfloat16"),
     ("wide-keys-flash", "float16"), ("wide-keys-flash", "bfloat16")],
)  # fmt: skip
def test_tensor_core_rungs_take_misaligned_operands(name, dtype):
    """q starting 2 bytes into its buffer (not 16-byte aligned, as cp.async needs): the plan
    copies it into an aligned workspace, and the answer is the same."""
    rung = get_rung("attention", name)
    if rung.unavailable_reason():
        pytest.skip(rung.unavailable_reason())
    problem = get_problem("attention")
    q, k, v = problem.make_inputs((1, 4, 2, 70, 64), dtype, seed=3)
    flat = to_device(np.concatenate([np.zeros(1, q.dtype), q.ravel()]))
    shifted = flat[1:].reshape(q.shape)  # 2 bytes past a 16-byte boundary
    out = to_device(np.full(q.shape, np.nan, q.dtype))
    rung.launch(shifted, to_device(k), to_device(v), out)
    ref = problem.reference((q, k, v))
    assert timing.relative_error(to_host(out), ref) <= problem.tolerance(dtype)


@gpu_only
@pytest.mark.parametrize("causal", [False, True])
def test_the_gpu_reference_is_the_cpu_reference(causal):
    """From GPU_REFERENCE_FROM scores the float64 reference runs on the GPU (PyTorch): it must
    be the CPU's definition, to float64 rounding, at odd sizes and with GQA."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch with CUDA")
    from ladder.attention.problem import attention_float64_gpu, attention_numpy

    q, k, v = get_problem("attention").make_inputs((2, 4, 2, 77, 40), "float16", seed=5)
    gpu = attention_float64_gpu(q, k, v, causal=causal)
    cpu = attention_numpy(q, k, v, causal=causal)
    assert np.max(np.abs(gpu - cpu)) <= 1e-12 * np.max(np.abs(cpu))


def test_producer_rungs_register_split_is_the_launchs():
    """Rungs 9, 10 and 11 raise each consumer thread to the registers ``consumer_registers``
    works out (what the launch allocated, less the producer's), and their entry points say so:
    a setmaxnreg.inc above the pool would hang (it waits for registers that never come free),
    one below would waste registers."""
    import re
    from pathlib import Path

    from ladder.attention import r09_producer_flash as r09
    from ladder.attention import r11_wide_keys_flash as r11
    from ladder.attention import warp_specialized as ws

    for stem, module in (("r09_producer_flash", r09), ("r10_pingpong_flash", r09),
                         ("r11_wide_keys_flash", r11)):  # fmt: skip
        text = (Path(r09.__file__).parent / f"{stem}.cu").read_text()
        entries = re.findall(r"FLASH_ENTRY\(\w+_d(\d+)\w*, [\w:]+, \d+, (\d+), (\d+), 1\)", text)
        assert len(entries) == 4, stem
        for d, consumers, regs in entries:
            assert int(consumers) == module.CONSUMERS[int(d)], (stem, d)
            assert int(regs) == ws.consumer_registers(int(consumers)), (stem, d)
        assert f"setmaxnreg_dec<{ws.PRODUCER_REGS}>();" in text
        assert f"constexpr int BKV = {module.BKV};" in text, stem
    split = {d: ws.consumer_registers(r09.CONSUMERS[d]) for d in (64, 128)}
    assert split == {64: 112, 128: 240}
    assert {d: ws.consumer_registers(r11.CONSUMERS[d]) for d in (64, 128)} == {64: 160, 128: 240}


def test_rung_11_is_rung_9_with_wider_key_tiles():
    """Rung 11's .cu is rung 9's with BKV = 128, its idle consumer warpgroups sent home (192
    rows a block at d = 64 divide few N) and its own entry points: the diff is the lesson, so
    any other line that differs (outside the header comment) fails here."""
    import difflib
    from pathlib import Path

    from ladder.attention import r09_producer_flash as r09

    here = Path(r09.__file__).parent

    def body(stem: str) -> list[str]:
        text = (here / f"{stem}.cu").read_text()
        text = text[text.index("#include <cuda_bf16.h>") :]
        return [line for line in text.splitlines() if not line.startswith("FLASH_ENTRY(")]

    diff = difflib.unified_diff(body("r09_producer_flash"), body("r11_wide_keys_flash"), n=0)
    changed = [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == [
        "-constexpr int BKV = 64;  // keys per tile",
        "+constexpr int BKV = 128;  // keys per tile",
        "+  const int active = min(CONSUMERS, (N - row0 + 63) / 64);  // warpgroups with a row"
        " below N",
        "-      mbar_init(smem_addr(&empty_k[s]), CONSUMERS * 128);  // every consumer thread",
        "-      mbar_init(smem_addr(&empty_v[s]), CONSUMERS * 128);",
        "+      mbar_init(smem_addr(&empty_k[s]), active * 128);  // every consumer thread that"
        " stays",
        "+      mbar_init(smem_addr(&empty_v[s]), active * 128);",
        "+  if (wg >= active) return;  // every row past N: nothing to compute or release",
    ]


def test_the_wgmma_rungs_take_s_as_wide_as_the_key_tile():
    """Rungs 7 to 11 write S = Q·Kᵀ's width as ``BKV``, never as a literal: with a literal 64,
    a try that widened the key tile computed half of S (docs/notes/attention.md, rung 11)."""
    from pathlib import Path

    folder = Path(__file__).parents[1] / "ladder" / "attention"
    for stem in ("r07_wgmma_flash", "r08_overlap_flash", "r09_producer_flash",
                 "r10_pingpong_flash", "r11_wide_keys_flash"):  # fmt: skip
        text = (folder / f"{stem}.cu").read_text()
        assert "wgmma_ss<BKV, T," in text and "wgmma_ss<64" not in text, stem
