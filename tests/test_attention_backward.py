"""The attention backward ladder: every rung and library against float64 gradients, the
reference against finite differences, the clear errors, and the tensor-core rung's workspaces.

Parametrized over the registry of both problems (``attention-backward`` and its causal twin): a
rung added to ladder/attention/backward is tested here without edits. On a GPU the shapes are
the forward's test sizes (N = 1, N = 17, d = 16/17/64/80/128, GQA and MQA, N past a tile); in
the simulator one or two heads with N <= 17 and d = 16.
"""

import math

import numpy as np
import pytest
from conftest import (
    ON_GPU,
    bad_input_cases,
    check_against_reference,
    gpu_only,
    launch_refuses,
    run_poisoned,
    twin_cases,
)

import ladder.attention  # noqa: F401  (registers the problems and rungs)
from ladder.attention.backward.problem import (
    SIMULATOR_SIZES,
    forward_float64,
    gradients_float64,
    pack,
    split,
)
from ladder.attention.problem import attention_numpy
from ladder.core import timing
from ladder.core.dtypes import resolve, to_device, to_host
from ladder.core.rung import NotApplicable, get_problem, get_rung, rungs

PROBLEMS = ("attention-backward", "attention-backward-causal")
RUNGS = [r for name in PROBLEMS for r in rungs(name) if r.unavailable_reason() is None]
DEVICE_RUNGS = [r for r in RUNGS if not r.reference]
pytestmark = pytest.mark.usefixtures("quick_thread_switches")  # the simulator's barriers


def _run(rung, inputs, dtype, **kwargs):
    batch, heads, n, d = inputs[0].shape
    size = (batch, heads, inputs[1].shape[1], n, d)
    return run_poisoned(rung, inputs, get_problem(rung.problem).output_shape(size), dtype, **kwargs)


@pytest.mark.parametrize(
    ("rung", "dtype", "size"), list(twin_cases(RUNGS, PROBLEMS, SIMULATOR_SIZES))
)
def test_backward_rung_matches_float64_gradients(rung, dtype, size):
    check_against_reference(rung, dtype, size, _run)


@pytest.mark.parametrize("causal", [False, True])
def test_reference_is_the_gradient_by_finite_differences(causal):
    """dq, dk, dv of sum(attention(q, k, v) * do), each element by a central difference of the
    forward's float64 definition, with grouped-query heads (dk and dv sum over a group)."""
    rng = np.random.default_rng(1)
    q, do = rng.standard_normal((2, 1, 4, 6, 3))
    k, v = rng.standard_normal((2, 1, 2, 6, 3))
    grads = gradients_float64(q, k, v, do, causal)
    eps = 1e-6
    for which, x in enumerate((q, k, v)):
        found = np.empty_like(x)
        for index in np.ndindex(x.shape):
            sides = []
            for step in (eps, -eps):
                moved = [q.copy(), k.copy(), v.copy()]
                moved[which][index] += step
                sides.append(np.sum(attention_numpy(*moved, causal=causal) * do))
            found[index] = (sides[0] - sides[1]) / (2 * eps)
        assert np.max(np.abs(found - grads[which])) < 1e-7 * max(1.0, np.max(np.abs(found)))


def test_forward_outputs_are_the_forward_reference():
    """make_inputs' o is the forward problem's definition, and lse its log-sum-exp."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 4, 9, 5))
    k, v = rng.standard_normal((2, 1, 2, 9, 5))
    for causal in (False, True):
        o, lse = forward_float64(q, k, v, causal)
        assert np.max(np.abs(o - attention_numpy(q, k, v, causal=causal))) < 1e-12
        s = q[0, 3] @ k[0, 1].T / math.sqrt(5)  # head 3 reads key/value head 1
        if causal:
            s[np.triu_indices(9, 1)] = -np.inf
        assert lse[0, 3] == pytest.approx(np.log(np.exp(s).sum(axis=1)))


def test_problem_figures_and_layout():
    full, causal = (get_problem(name) for name in PROBLEMS)
    size = (4, 16, 4, 4096, 64)
    assert full.flops(size) == 10.0 * 4 * 16 * 4096**2 * 64 == 2 * causal.flops(size)
    assert full.min_bytes(size, "float16") == ((4 * 4 * 16 + 4 * 4 * 4) * 4096 * 64 * 2
                                               + 4 * 16 * 4096 * 4)  # fmt: skip
    assert full.output_shape((2, 8, 2, 17, 64)) == (2, 12, 17, 64)
    q, k, v, o, do, lse = full.make_inputs((2, 4, 2, 5, 8), "float16", seed=0)
    assert (o.dtype, do.shape, lse.dtype, lse.shape) == (np.float16, q.shape, np.float32, (2, 4, 5))
    dq, dk, dv = (np.full(shape, i, float) for i, shape in enumerate((q.shape, k.shape, v.shape)))
    assert [x.tolist() for x in split(pack(dq, dk, dv), heads=4)] == [
        dq.tolist(), dk.tolist(), dv.tolist()
    ]  # fmt: skip


# ---- clear errors ---------------------------------------------------------------------------


def _bad_inputs(rung):
    dtype = rung.dtypes[-1]
    q, k, v, o, do, lse = get_problem(rung.problem).make_inputs((1, 4, 2, 8, 16), dtype, 0)
    yield "dtype", (q.astype(np.float64), k, v, o, do, lse), TypeError, "q must be"
    yield "do dtype", (q, k, v, o, do.astype(np.float64), lse), TypeError, "do must be b?float"
    yield "o shape", (q, k, v, o[:, :2], do, lse), ValueError, "o must have q's shape"
    yield "lse dtype", (q, k, v, o, do, lse.astype(np.float64)), TypeError, "lse must be float32"
    yield "lse shape", (q, k, v, o, do, lse[..., :4]), ValueError, r"lse must have shape"
    yield "N differs", (q, k[:, :, :5], v[:, :, :5], o, do, lse), ValueError, "batch, N and d"
    three = np.concatenate([k, k[:, :1]], axis=1)
    yield "heads", (q, three, three, o, do, lse), ValueError, "multiple of the key/value"


@pytest.mark.parametrize(
    ("rung", "arrays", "error", "message"),
    bad_input_cases([r for r in DEVICE_RUNGS if r.problem == PROBLEMS[0]], _bad_inputs),
)
def test_bad_input_raises_clear_error(rung, arrays, error, message):
    launch_refuses(rung, arrays, error, message)


@pytest.mark.parametrize("rung", DEVICE_RUNGS, ids=lambda r: r.key)
def test_a_wrong_output_is_refused(rung):
    dtype = rung.dtypes[-1]
    arrays = [to_device(x) for x in get_problem(rung.problem).make_inputs((1, 2, 1, 4, 16), dtype)]
    with pytest.raises(ValueError, match=r"out must have shape \(B, H \+ 2·HKV, N, d\)"):
        rung.launch(*arrays, to_device(np.zeros((1, 2, 4, 16), resolve(dtype))))
    with pytest.raises(TypeError, match="out must be"):
        rung.launch(*arrays, to_device(np.zeros((1, 4, 4, 16), np.float64)))


# ---- on the GPU -----------------------------------------------------------------------------


@gpu_only
@pytest.mark.parametrize("name", PROBLEMS)
def test_large_scores_do_not_overflow(name):
    """Scores of standard deviation 16: P = exp(S - lse) stays at most 1 for every rung."""
    problem = get_problem(name)
    for rung in (r for r in DEVICE_RUNGS if r.problem == name):
        dtype = rung.dtypes[-1]
        q, k, v, _, do, _ = problem.make_inputs((1, 2, 1, 70, 64), dtype, seed=2)
        q = (q.astype(np.float32) * 16).astype(resolve(dtype))
        o, lse = forward_float64(q, k, v, problem.causal)
        inputs = (q, k, v, o.astype(q.dtype), do, lse.astype(np.float32))
        out = _run(rung, inputs, dtype)
        error = timing.relative_error(out, problem.reference(inputs))
        assert np.all(np.isfinite(out)) and error <= problem.tolerance(dtype), rung.key


@gpu_only
@pytest.mark.parametrize(
    ("name", "dtype"), [("tensor-core", "float16"), ("wgmma", "float16"), ("wgmma", "bfloat16")]
)
def test_cuda_cpp_rungs_take_misaligned_operands(name, dtype):
    """q starting 2 bytes into its buffer (not 16-byte aligned, as cp.async needs): the plan
    copies every operand into aligned workspaces, and the answer is the same."""
    rung = get_rung("attention-backward", name)
    if rung.unavailable_reason():
        pytest.skip(rung.unavailable_reason())
    problem = get_problem("attention-backward")
    inputs = problem.make_inputs((1, 4, 2, 70, 64), dtype, seed=3)
    q = inputs[0]
    flat = to_device(np.concatenate([np.zeros(1, q.dtype), q.ravel()]))
    shifted = flat[1:].reshape(q.shape)  # 2 bytes past a 16-byte boundary
    out = to_device(np.full(problem.output_shape((1, 4, 2, 70, 64)), np.nan, q.dtype))
    rung.launch(shifted, *[to_device(x) for x in inputs[1:]], out)
    ref = problem.reference(inputs)
    assert timing.relative_error(to_host(out), ref) <= problem.tolerance(dtype)


@gpu_only
@pytest.mark.parametrize("causal", [False, True])
def test_the_gpu_reference_is_the_cpu_reference(causal, monkeypatch):
    """Past GPU_REFERENCE_FROM scores the float64 gradients run on the GPU (PyTorch): the same
    definition as NumPy's, to float64 rounding, at odd sizes with GQA."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch with CUDA")
    from ladder.attention.backward import problem as backward

    rng = np.random.default_rng(5)
    q, do = rng.standard_normal((2, 2, 4, 77, 40))
    k, v = rng.standard_normal((2, 2, 2, 77, 40))
    monkeypatch.setattr(backward, "GPU_REFERENCE_FROM", 0)
    gpu = gradients_float64(q, k, v, do, causal)
    monkeypatch.setattr(backward, "GPU_REFERENCE_FROM", 1 << 62)
    cpu = gradients_float64(q, k, v, do, causal)
    for a, b in zip(gpu, cpu, strict=True):
        assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backward_rows_are_the_gradients(causal):
    """The libraries' machinery (``Forward``: SDPA's forward once, then autograd's backward,
    copied into the problem's layout) on whatever device PyTorch has, CPU in CI: the float64
    gradients with GQA, the second call the same as the first, and a backend that refuses the
    input reported as not applicable."""
    pytest.importorskip("torch", reason="the SDPA rows need PyTorch")
    from ladder.attention.backward.references import Forward, _copy

    problem = get_problem(PROBLEMS[causal])
    size = (1, 4, 2, 9, 8)
    inputs = problem.make_inputs(size, "float32", seed=1)
    forward = Forward(tuple(to_device(x) for x in inputs), "MATH")
    first, second = forward.grads(causal), forward.grads(causal)
    assert all(bool((a == b).all()) for a, b in zip(first, second, strict=True))
    out = to_device(np.full(problem.output_shape(size), np.nan, np.float32))
    _copy(first, out, heads=4)
    assert timing.relative_error(to_host(out), problem.reference(inputs)) <= 1e-5
    if not ON_GPU:  # cuDNN has no CPU kernel
        with pytest.raises(NotApplicable, match="SDPA cuDNN refuses this input"):
            Forward(tuple(to_device(x) for x in inputs), "CUDNN_ATTENTION").grads(causal)
