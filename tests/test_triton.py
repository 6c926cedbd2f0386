"""The Triton peers: what is peculiar to them beside the registry-parametrized tests.

The registry's tests (test_fused, test_gemm, test_attention) run every peer that can run here
against float64: on a GPU compiled, in the simulator through Triton's interpreter. Here: the
reasons a peer gives when Triton or PyTorch is missing, that a peer is never the library a
ladder is measured against, that importing ladder imports neither Triton nor PyTorch, views
the problems accept (contiguous, not 16-byte aligned), more odd sizes (each kernel's other
paths: rows longer than a block, K past a tile, GQA, odd head dimensions), the docstrings, and
that every peer compiles for sm_90 (the interpreter never runs Triton's compiler), which needs
no GPU. On a GPU: each peer replays from a CUDA graph.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ON_GPU, clean_environment, gpu_only, launch_refuses, quick_unless

from ladder.core import derived, device, timing, triton_kernels
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import get_problem, get_rung, rungs

ROOT = Path(__file__).resolve().parent.parent
PEER_PROBLEMS = ("softmax", "layernorm", "elementwise", "gemm", "attention", "attention-causal")
PEERS = [get_rung(name, "triton") for name in PEER_PROBLEMS]
RUNNABLE = [r for r in PEERS if r.unavailable_reason() is None]
needs_triton = pytest.mark.skipif(
    not RUNNABLE, reason=PEERS[0].unavailable_reason() or "the Triton peers cannot run here"
)


def test_every_peer_is_registered_as_a_peer():
    found = {r.problem for r in rungs() if r.peer}
    assert found == set(PEER_PROBLEMS)
    for peer in PEERS:
        assert peer.peer and peer.reference and peer.number >= 90, peer.key
        assert peer.needs == frozenset({"triton"}), peer.key
    assert "float16" in get_rung("gemm", "triton").dtypes
    assert get_rung("layernorm", "triton").dtypes == ("float32",)


def _find_spec_without(missing: str):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == missing else real(name, *args, **kwargs)

    return find_spec


def test_without_triton_every_peer_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", _find_spec_without("triton"))
    for peer in PEERS:
        assert peer.unavailable_reason() == "needs Triton: pip install 'numba-ladder[triton]'"


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_without_pytorch_the_interpreter_says_it_needs_pytorch(monkeypatch):
    monkeypatch.setattr(device, "simulator", lambda: True)
    monkeypatch.setattr(importlib.util, "find_spec", _find_spec_without("torch"))
    for peer in PEERS:
        assert peer.unavailable_reason() == (
            "needs PyTorch (a CPU build is enough) for Triton's interpreter"
        )


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_on_a_gpu_without_pytorch_cuda_the_peers_say_so(monkeypatch):
    monkeypatch.setattr(device, "simulator", lambda: False)
    monkeypatch.setattr(device, "torch_cuda_available", lambda: False)
    for peer in PEERS:
        assert peer.unavailable_reason() == (
            "needs PyTorch with CUDA: pip install 'numba-ladder[triton]'"
        )


def test_the_triton_extra_brings_triton_and_pytorch():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(r.startswith("triton") for r in extras["triton"])
    assert any(r.startswith("torch") for r in extras["triton"])
    assert "| `triton` | Triton and PyTorch |" in (ROOT / "README.md").read_text()


def _run(peer: str, ms: float) -> dict:
    return {"problem": "gemm", "dtype": "float16", "shape": [64, 64, 64], "rung": peer,
            "number": 90, "reference": True, "peer": peer == "triton", "status": "ok",
            "median_ms": ms}  # fmt: skip


def test_a_peer_is_never_the_library():
    rung = {"problem": "gemm", "dtype": "float16", "shape": [64, 64, 64], "rung": "wgmma",
            "number": 16, "reference": False, "status": "ok", "median_ms": 2.0}  # fmt: skip
    faster_peer = [rung, _run("cublas", 1.0), _run("triton", 0.5)]
    assert derived.library(faster_peer)["rung"] == "cublas"
    assert derived.peer(faster_peer)["rung"] == "triton"
    assert derived.library([rung, _run("triton", 0.5)]) is None  # a peer alone: no library
    (best,) = derived.best_rows({"runs": faster_peer})
    assert (best["library"], best["peer"]) == ("cublas", "triton")


@needs_triton
def test_a_measured_peer_is_recorded_as_a_peer():
    problem = get_problem("softmax")
    case = timing.prepare(problem, (3, 65), "float32")
    run = timing.measure(case, get_rung("softmax", "triton"), repeats=1, warmup=0).to_dict()
    assert run["peer"] and run["reference"] and derived.passed(run)
    assert derived.library([run]) is None and derived.peer([run]) is run


def test_importing_ladder_imports_neither_triton_nor_pytorch():
    code = (
        "import sys, ladder\n"
        "from ladder.core.rung import rungs\n"
        "found = [r for r in rungs() if r.peer]\n"
        "assert found, 'no peers registered'\n"
        "print(sorted(m for m in ('triton', 'torch') if m in sys.modules))\n"
        "[r.unavailable_reason() for r in found]  # on a GPU this asks PyTorch about CUDA\n"
        "assert 'triton' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=clean_environment(),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_peers_docstrings_tell_their_story():
    for peer in PEERS:
        doc = peer.doc.strip("\n")
        lines = doc.splitlines()
        assert len(lines) <= 45, f"{peer.key}: {len(lines)} lines"
        assert re.search(r"r\d\d_\w+\.py", doc), f"{peer.key} names no Numba rung"
        for part in ("What the program does:", "What Triton did", "What Triton could not"):
            assert part in doc, f"{peer.key}: no {part!r}"
        assert "TODO" not in doc
        # a measured number comes with its GPU and its results file
        if re.search(r"\d\s*(ms|µs|TFLOP/s|TB/s)\b", doc):
            assert re.search(r"Measured \(NVIDIA \w+, ``results/[\w.-]+\.json``", doc), peer.key
            assert "The verdict" in doc, f"{peer.key}: a measurement without its verdict"


def test_next_power_of_2_is_tritons():
    assert [triton_kernels.next_power_of_2(n) for n in (1, 2, 3, 16, 17, 80)] == [
        1, 2, 4, 16, 32, 128,
    ]  # fmt: skip


# ---- more sizes, and views at an offset --------------------------------------------------------

# each kernel's other paths: rows longer than one block (softmax past 16384 columns, layer norm
# past 8192), K and N past a tile, GQA and MQA with odd head dimensions, causal or not
EXTRA = [
    ("softmax", "float32", (3, 16500)),
    ("softmax", "float16", (5, 999)),
    ("layernorm", "float32", (2, 8200)),
    ("layernorm", "float32", (7, 1025)),
    ("elementwise", "float16", (5, 1100)),
    ("elementwise", "float32", (300, 3)),
    ("gemm", "float32", (33, 65, 17)),
    ("gemm", "float16", (70, 40, 100)),
    ("gemm", "float32", (1, 130, 7)),
    ("attention", "float32", (1, 3, 1, 40, 80)),
    ("attention", "float16", (2, 4, 2, 33, 17)),
    ("attention-causal", "float16", (1, 2, 1, 50, 32)),
    ("attention-causal", "float32", (1, 4, 2, 40, 64)),
]
SLOW_EXTRA = {(3, 16500), (2, 8200), (1, 3, 1, 40, 80), (1, 4, 2, 40, 64)}


def _on_device(x: np.ndarray, offset: int) -> object:
    """``x`` on the device, ``offset`` elements past an allocation's start (0: aligned)."""
    if not offset:
        return to_device(x)
    flat = np.concatenate([np.zeros(offset, x.dtype), x.ravel()])
    return to_device(flat)[offset:].reshape(x.shape)


def _check(problem_name: str, dtype: str, size: tuple[int, ...], offset: int = 0) -> None:
    peer = get_rung(problem_name, "triton")
    problem = get_problem(problem_name)
    inputs = problem.make_inputs(size, dtype, seed=sum(size))
    ref = problem.reference(inputs)
    out = _on_device(np.full(ref.shape, np.nan, resolve(dtype)), offset)  # poisoned
    returned = peer.launch(*[_on_device(x, offset) for x in inputs], out)
    assert returned is out
    result = to_host(out)
    assert np.all(np.isfinite(result)), "an element was never written (still NaN)"
    assert timing.relative_error(result, ref) <= problem.tolerance(dtype)


@needs_triton
@pytest.mark.parametrize(
    ("problem", "dtype", "size"),
    [pytest.param(*case, marks=quick_unless(case[2] in SLOW_EXTRA)) for case in EXTRA],
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v,
)
def test_peer_matches_float64_at_more_sizes(problem, dtype, size):
    _check(problem, dtype, size)


@needs_triton
@pytest.mark.parametrize(
    ("problem", "dtype", "size"),
    [
        ("softmax", "float16", (3, 70)),
        ("layernorm", "float32", (3, 70)),
        ("elementwise", "float32", (3, 70)),
        ("gemm", "float16", (9, 10, 11)),
        ("attention", "float16", (1, 2, 1, 17, 16)),
    ],
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v,
)
def test_peer_takes_views_that_are_not_16_byte_aligned(problem, dtype, size):
    """Contiguous arrays one element past an allocation's start: every problem accepts them,
    and Triton compiles a kernel without its alignment assumptions for them."""
    _check(problem, dtype, size, offset=1)


@needs_triton
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gemm_peer_allocates_c_and_records_its_configuration(dtype):
    peer = get_rung("gemm", "triton")
    problem = get_problem("gemm")
    a, b = problem.make_inputs((9, 10, 11), dtype, 1)
    args = (to_device(a), to_device(b))
    c = peer.launch(*args)
    assert c.dtype == resolve(dtype)
    assert timing.relative_error(to_host(c), problem.reference((a, b))) <= 2e-3
    config = peer.describe(args, c)
    assert "BLOCK_M=" in config and "num_warps=" in config
    assert ("autotuned" in config) == ON_GPU


@needs_triton
def test_attention_peer_refuses_bad_input_as_the_rungs_do():
    from test_attention import _bad_inputs  # the rungs' cases (peers are not among them there)

    peer = get_rung("attention", "triton")
    for _, arrays, error, message in _bad_inputs(peer):
        launch_refuses(peer, arrays, error, message)


@needs_triton
def test_attention_peer_refuses_head_dimensions_past_its_block():
    peer = get_rung("attention", "triton")
    q, k, v = get_problem("attention").make_inputs((1, 1, 1, 2, 257), "float16", 0)
    with pytest.raises(ValueError, match="head dimensions up to 256"):
        peer.launch(*[to_device(x) for x in (q, k, v)])


# ---- compiled for a GPU, without one -----------------------------------------------------------

# The interpreter runs the kernels' Python, not Triton's compiler: this compiles each peer for
# sm_90 as Triton does for a launch (triton.compile for a GPUTarget needs no GPU, only its
# bundled ptxas), in a process of its own with TRITON_INTERPRET=0, at a configuration of each
# path, on aligned arguments and on ints of 1 (which Triton turns into constants).
COMPILE = r"""
import ladder
from ladder.attention import triton_peer as attention
from ladder.core import device
from ladder.fused.elementwise import triton_peer as elementwise
from ladder.fused.layernorm import triton_peer as layernorm
from ladder.fused.softmax import triton_peer as softmax
from ladder.gemm import triton_peer as gemm

device.simulator = lambda: False  # the compiled kernels, not the interpreter's
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

MAX_SHARED = 227 * 1024  # shared memory per block on an H100


def build(fn, args, constants, warps, stages=3):
    signature = dict(args) | {name: "constexpr" for name in constants}
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]]
             for name, kind in args.items() if kind.startswith("*") or kind == "i32"}
    source = ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs)
    options = {"num_warps": warps, "num_stages": stages}
    done = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    assert done.metadata.shared <= MAX_SHARED, (fn.__name__, constants, done.metadata.shared)
    return done.asm["ptx"]


def ones(args, names):
    return {k: v for k, v in args.items() if k not in names}, {k: 1 for k in names}


for ty in ("fp32", "fp16"):
    args = {"x_ptr": f"*{ty}", "y_ptr": f"*{ty}", "cols": "i32"}
    for cols in (8192, 50000):
        block, one, warps = softmax.block_for(cols)
        build(softmax._kernel(), args, {"BLOCK": block, "ONE_BLOCK": one}, warps)
    sig, one = ones(args, ["cols"])
    build(softmax._kernel(), sig, one | {"BLOCK": 16, "ONE_BLOCK": True}, 1)
    args = {f"{n}_ptr": f"*{ty}" for n in "xaby"} | {"rows": "i32", "cols": "i32"}
    block_r, block_c = elementwise.tile_for(8192)
    build(elementwise._kernel(), args, {"BLOCK_R": block_r, "BLOCK_C": block_c}, 8)
    sig, one = ones(args, ["rows", "cols"])
    build(elementwise._kernel(), sig, one | {"BLOCK_R": 256, "BLOCK_C": 16}, 8)
args = {"x_ptr": "*fp32", "gamma_ptr": "*fp32", "beta_ptr": "*fp32", "y_ptr": "*fp32",
        "cols": "i32", "eps": "fp32"}
for cols in (8192, 50000):
    block, one, warps = layernorm.block_for(cols)
    build(layernorm._kernel(), args, {"BLOCK": block, "ONE_BLOCK": one}, warps)
for fp32, table in ((True, gemm.FP32_CONFIGS), (False, gemm.HALF_CONFIGS)):
    ty = "fp32" if fp32 else "fp16"
    fn = gemm._kernels()[fp32].kernel.fn
    args = {"a_ptr": f"*{ty}", "b_ptr": f"*{ty}", "c_ptr": f"*{ty}",
            "M": "i32", "N": "i32", "K": "i32"}
    for bm, bn, bk, warps, stages in (table[0], table[-1]):
        tile = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gemm.GROUP_M}
        ptx = build(fn, args, tile, warps, stages)
        assert fp32 == ("mma" not in ptx), "float32 must be FMAs (IEEE), not tensor cores"
    sig, one = ones(args, ["M", "N", "K"])
    build(fn, sig, one | tile, warps, stages)
for fp32, table in ((True, attention.FP32_CONFIGS), (False, attention.HALF_CONFIGS)):
    ty = "fp32" if fp32 else "fp16"
    fn = attention._kernels()[fp32].kernel.fn
    args = {f"{n}_ptr": f"*{ty}" for n in "qkvo"} | {n: "i32" for n in ("H", "HKV", "N", "D")}
    args["scale_log2"] = "fp32"
    bm, bn, warps, stages = table[0]
    for d_pad, causal in ((64, False), (128, True)):
        tile = {"BLOCK_M": bm, "BLOCK_N": bn, "D_PAD": d_pad, "CAUSAL": causal}
        ptx = build(fn, args, tile, warps, stages)
        assert fp32 == ("mma" not in ptx), "float32 must be FMAs (IEEE), not tensor cores"
    sig, one = ones(args, ["H", "HKV", "N", "D"])
    build(fn, sig, one | {"BLOCK_M": bm, "BLOCK_N": bn, "D_PAD": 16, "CAUSAL": True}, warps)
print("compiled")
"""


@pytest.mark.slow  # some 10 s of Triton's compiler on 2 cores
@needs_triton
def test_peers_compile_for_sm_90_without_a_gpu():
    env = clean_environment()
    # compiled, whatever the session runs: without a GPU `import ladder` turns the interpreter
    # on unless the environment says otherwise
    env["TRITON_INTERPRET"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", COMPILE], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("compiled")


# ---- on a GPU ----------------------------------------------------------------------------------


@gpu_only
@pytest.mark.parametrize("peer", PEERS, ids=lambda r: r.key)
def test_peer_replays_from_a_graph(peer):
    """Triton launches on PyTorch's current stream, which graph capture points at the capture
    stream: one call captured (after its warm-up, which autotunes), replayed, right again."""
    from numba import cuda

    from ladder.core import graphs

    if peer.unavailable_reason():
        pytest.skip(peer.unavailable_reason())
    problem = get_problem(peer.problem)
    dtype = peer.dtypes[-1]
    size = problem.test_sizes(dtype)[2]
    case = timing.prepare(problem, size, dtype)
    args = case.device_inputs()
    out = cuda.device_array(problem.output_shape(size), dtype=resolve(dtype))
    with graphs.capture_call(functools.partial(peer.launch, *args, out)) as graph:
        for _ in range(2):
            timing.poison(out)
            cuda.synchronize()
            graph.replay()
            cuda.synchronize()
            result = out.copy_to_host()
            assert timing.relative_error(result, case.ref) <= problem.tolerance(dtype)


@needs_triton
def test_the_interpreter_survives_pytorch_importing_triton_first():
    """``torch.profiler`` (and ``torch.compile``) import ``triton.language`` unasked; in the
    simulator that must still give interpreted kernels, or the peers' ``tl.sum`` fails inside
    them ("Cannot call @triton.jit'd outside of the scope of a kernel"). Run in the simulator
    on any machine, with the profiler on the CPU only: on a GPU the question does not arise,
    and there the profiler's CUDA activity and a Triton launch have ended this script in a
    double free at exit, inside PyTorch."""
    env = {**clean_environment(), "NUMBA_ENABLE_CUDASIM": "1"}
    env.pop("TRITON_INTERPRET", None)  # ladder must choose the interpreter itself
    code = (
        "import ladder, torch\n"
        "from torch.profiler import ProfilerActivity, profile\n"
        "with profile(activities=[ProfilerActivity.CPU]):\n"
        "    torch.ones(2) + 1\n"
        "from ladder.core import timing\n"
        "from ladder.core.rung import get_problem, get_rung\n"
        "case = timing.prepare(get_problem('softmax'), (3, 65))\n"
        "m = timing.measure(case, get_rung('softmax', 'triton'))\n"
        "print(m.status, m.error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1].startswith("ok"), done.stdout
