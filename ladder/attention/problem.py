"""Attention: O = softmax(Q·Kᵀ/√d)·V for batch × heads × N × d, with an optional causal mask.

Two problems share this definition, ``attention`` and ``attention-causal`` (key j is seen by
query i only when j <= i, the top-left convention of PyTorch's ``is_causal``). They are two
problems rather than a flag because the harness hands a launcher its arrays and nothing else:
every rung registers a launcher for each, from one geometry (``attention_rung``); a library row
registers one launcher that takes ``causal=`` (``attention_library``).

A size is the tuple (B, H, HKV, N, d): batch, query heads, key/value heads, sequence length
(queries and keys alike) and head dimension. HKV divides H: HKV = H is ordinary multi-head
attention, 1 < HKV < H grouped-query attention (GQA), HKV = 1 multi-query attention (MQA);
query head h reads key/value head h // (H / HKV). Inputs are C-contiguous device arrays
q (B, H, N, d) and k, v (B, HKV, N, d) in float32, float16 or bfloat16 (the wgmma rungs and
the libraries); the output has q's shape and dtype. Every rung accumulates in float32. The
float64 reference works on the rounded inputs, so only a kernel's own rounding is measured.

Work: QKᵀ and PV are 2·N²·d operations each per head, 4·B·H·N²·d in all. Causal attention
skips about half of the (query, key) pairs and is counted as half of that, 2·B·H·N²·d: the
convention of the FlashAttention papers and of PyTorch's benchmarks, so TFLOP/s compare.
Fewest bytes: read q, k and v once and write the output once. At the SDPA shape (B = 4,
H = 16, N = 4096, d = 64, float16) that is 275 GFLOP over 134 MB, 2048 FLOP per byte: bound
by arithmetic, and the figure that leads is TFLOP/s.

``operands`` validates a launcher's arrays the same way for every rung. Launchers keep what they
decide per signature of their arrays (``ladder.core.fastcall``: a plan), as ``Masks``: the
launch without the causal mask and the one with it, which ``IS_CAUSAL`` marks in a geometry.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ladder.attention import memory
from ladder.core import derived, device
from ladder.core.dtypes import resolve
from ladder.core.fastcall import (
    PLANS_PER_CACHE,
    NumbaLaunch,
    Operand,
    PlanCache,
    intake,
    numba_array,
    output,
)
from ladder.core.geometry import rung_launcher, steps
from ladder.core.rung import Launcher, Problem, register_problem, rung, rung_per_problem

LOG2E = math.log2(math.e)
SDPA_SHAPE = (4, 16, 16, 4096, 64)  # the comparison point against SDPA
# odd shapes for the GPU tests: N = 1, N = 17, d = 16/17/64/80/128, GQA and MQA, N past a tile
TEST_SIZES = [
    (1, 1, 1, 1, 16),
    (1, 1, 1, 1, 64),
    (1, 2, 2, 17, 16),
    (2, 2, 1, 17, 64),
    (1, 2, 2, 17, 128),
    (1, 2, 1, 33, 17),
    (1, 1, 1, 64, 64),
    (1, 4, 2, 130, 64),
    (2, 2, 2, 200, 80),
    (1, 4, 1, 257, 128),
    (1, 2, 2, 1000, 64),
]
# the simulator runs every thread of a block as a Python thread: one or two heads, N <= 17
SIMULATOR_SIZES = [(1, 1, 1, 1, 16), (1, 2, 1, 17, 16)]
MAX_GRID_YZ = 65535  # kernels put heads in gridDim.y and the batch in gridDim.z
REFERENCE_CHUNK = 1 << 22  # float64 scores per reference step (32 MB), whatever N is
# scores (B·H·N·N) from which the reference runs in float64 on the GPU when PyTorch can (the
# SDPA shape at N = 4096 is 2^30): float64 is exact enough on either side (core/float64.py),
# and the CPU takes tens of seconds a case there, per case of a bench and per test worker
GPU_REFERENCE_FROM = 1 << 30


class Shape(NamedTuple):
    """The dimensions of one attention call, as read from its arrays."""

    batch: int
    heads: int
    kv_heads: int
    n: int
    d: int

    @property
    def group(self) -> int:
        """Query heads per key/value head (1: multi-head, H: multi-query)."""
        return self.heads // self.kv_heads

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.d)


class AttentionProblem(Problem):
    """softmax(Q·Kᵀ/√d)·V, causal or not; sizes (B, H, HKV, N, d)."""

    bound = "compute"
    dtypes = ("float32", "float16", "bfloat16")
    size_names = ("B", "H", "HKV", "N", "d")
    size_help = "B H HKV N d: batch, query heads, key/value heads (H a multiple), length, head dim"

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        """Odd N at both kernel head dimensions; the last two walk enough 64-key tiles (5 and
        10) that the TMA rungs reuse every stage and wait on its "empty" barrier's second
        phase, with grouped heads."""
        return [(1, 2, 1, 17, 64), (1, 4, 2, 130, 128), (1, 4, 2, 300, 64), (1, 4, 2, 600, 128)]

    def __init__(self, name: str, causal: bool) -> None:
        self.name = name
        self.causal = causal

    def standard_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        batch, heads, _, n, d = SDPA_SHAPE
        return [SDPA_SHAPE, (batch, heads, heads // 4, n, d)]  # MHA, and GQA with 4 groups

    def simulator_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return [SIMULATOR_SIZES[-1]]

    def test_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return list(TEST_SIZES)

    def parse_size(self, values: list[int]) -> tuple[int, ...]:
        size = super().parse_size(values)
        batch, heads, kv_heads, _, _ = size
        if heads % kv_heads != 0:
            raise ValueError(
                f"--size for {self.name}: H must be a multiple of HKV (each key/value head "
                f"serves H / HKV query heads), got H={heads} HKV={kv_heads}"
            )
        if max(batch, heads) > MAX_GRID_YZ:
            raise ValueError(
                f"--size for {self.name}: B and H can be at most {MAX_GRID_YZ} (grid limit), "
                f"got B={batch} H={heads}"
            )
        return size

    def make_inputs(
        self, size: tuple[int, ...], dtype: str = "float16", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        batch, heads, kv_heads, n, d = size
        rng = np.random.default_rng(seed)
        # standard normal q and k give scores of standard deviation 1 after the 1/√d scale:
        # a softmax that is neither flat nor one-hot, so its errors show
        q = rng.standard_normal((batch, heads, n, d), dtype=np.float32).astype(resolve(dtype))
        k = rng.standard_normal((batch, kv_heads, n, d), dtype=np.float32).astype(resolve(dtype))
        v = rng.standard_normal((batch, kv_heads, n, d), dtype=np.float32).astype(resolve(dtype))
        return q, k, v

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        batch, heads, n, _ = inputs[0].shape
        if batch * heads * n * n >= GPU_REFERENCE_FROM and device.torch_cuda_available():
            return attention_float64_gpu(*inputs, causal=self.causal)
        return attention_numpy(*inputs, causal=self.causal)

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        batch, heads, _, n, d = size
        return (batch, heads, n, d)

    def flops(self, size: tuple[int, ...]) -> float:
        batch, heads, _, n, d = size
        full = 4.0 * batch * heads * n * n * d
        return full / 2 if self.causal else full

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        batch, heads, kv_heads, n, d = size
        return float((2 * batch * heads + 2 * batch * kv_heads) * n * d * resolve(dtype).itemsize)

    def tolerance(self, dtype: str) -> float:
        # float16: the output's own rounding is ~3e-4 relative, P rounded to half for the
        # tensor cores adds about as much; bfloat16 keeps 8 significant bits against float16's
        # 11, so both roundings are 8 times as large, and so is its bound
        return {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]

    def ceiling_key(self, dtype: str) -> str:
        return {"float32": "cublas_fp32_tflops"}.get(dtype, "cublas_fp16_tflops")

    def readme_summary(self, runs: list[dict[str, Any]], ceilings: dict[str, Any]) -> str:
        """For the results page: per dtype and size, from runs measured together, the Numba
        flash rung's speed over the Numba naive rung's, and the fastest tensor-core rung
        against the fastest SDPA call, with the verdict the spread of their repeats allows
        (``derived.verdict``)."""
        passed = [r for r in runs if derived.passed(r) and r.get("median_ms")]
        cases = list(dict.fromkeys((r["dtype"], tuple(r["shape"])) for r in passed))
        lines = []
        for dtype, shape in cases:
            here = [r for r in passed if (r["dtype"], tuple(r["shape"])) == (dtype, shape)]
            ms = {r["rung"]: r["median_ms"] for r in here}
            naive, flash = ms.get("naive"), ms.get("flash")
            over = f"{naive / flash:.2f}" if naive and flash else "—"
            tensor = [r for r in here if r["rung"] in on_tensor_cores(self.name, dtype)]
            sdpa = [r for r in here if r["rung"].startswith("sdpa")]
            if tensor and sdpa:
                best = min(tensor, key=lambda r: r["median_ms"])
                lib = min(sdpa, key=lambda r: r["median_ms"])
                against = (
                    f"`{best['rung']}` | {lib['median_ms'] / best['median_ms']:.2f}× "
                    f"`{lib['rung']}` | {derived.verdict(best, lib)}"
                )
            else:
                against = "— | — | —"
            lines.append(f"| {dtype} | {' × '.join(map(str, shape))} | {over} | {against} |")
        if not lines:
            return ""
        head = (
            "From runs measured together: the Numba flash rung's speed over the Numba naive "
            "rung's, and the fastest tensor-core rung against the fastest SDPA call (SDPA's "
            "time over the rung's). The rung is ahead only where its 90th-percentile time beats "
            "the library's 10th-percentile time, behind only the reverse; otherwise it is "
            "parity.\n\n"
            "| dtype | B × H × HKV × N × d | flash over naive | fastest tensor-core rung | "
            "× fastest SDPA | verdict |\n"
            "|---|---|---:|---|---:|---|\n"
        )
        return head + "\n".join(lines) + "\n"


def on_tensor_cores(problem: str, dtype: str) -> set[str]:
    """The names of ``problem``'s rungs (not libraries) that run ``dtype`` on tensor cores."""
    from ladder.core.rung import rungs

    return {
        r.name
        for r in rungs(problem, references=False)
        if dtype in r.dtypes and r.units_for(dtype) == "tensor"
    }


def attention_numpy(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False
) -> np.ndarray:
    """The float64 definition, a block of query rows at a time (N x N never held at once)."""
    batch, heads, n, d = q.shape
    group = heads // k.shape[1]
    out = np.empty(q.shape, np.float64)
    rows = max(1, REFERENCE_CHUNK // max(n, 1))
    keys = np.arange(n)
    for b in range(batch):
        for h in range(heads):
            kh = k[b, h // group].astype(np.float64)
            vh = v[b, h // group].astype(np.float64)
            for i0 in range(0, n, rows):
                s = q[b, h, i0 : i0 + rows].astype(np.float64) @ kh.T / math.sqrt(d)
                if causal:
                    s[keys[None, :] > np.arange(i0, i0 + s.shape[0])[:, None]] = -np.inf
                s -= s.max(axis=1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(axis=1, keepdims=True)
                out[b, h, i0 : i0 + s.shape[0]] = s @ vh
    return out


def attention_float64_gpu(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False
) -> np.ndarray:
    """``attention_numpy``'s float64 definition, block for block, computed by PyTorch on the
    GPU (float64 throughout: cuBLAS DGEMM and float64 exponentials). At N = 16384 the CPU takes
    minutes for the 2.2 TFLOP of a case at the SDPA shape; the GPU's FP64 units take seconds."""
    import torch

    batch, heads, n, d = q.shape
    group = heads // k.shape[1]
    out = np.empty(q.shape, np.float64)
    rows = max(1, REFERENCE_CHUNK // max(n, 1))
    keys = torch.arange(n, device="cuda")
    with torch.no_grad():
        for b in range(batch):
            for h in range(heads):
                kh = torch.from_numpy(k[b, h // group].astype(np.float64)).cuda()
                vh = torch.from_numpy(v[b, h // group].astype(np.float64)).cuda()
                qh = torch.from_numpy(q[b, h].astype(np.float64)).cuda()
                for i0 in range(0, n, rows):
                    s = qh[i0 : i0 + rows] @ kh.T / math.sqrt(d)
                    if causal:
                        rows_i = torch.arange(i0, i0 + s.shape[0], device="cuda")
                        s[keys[None, :] > rows_i[:, None]] = -math.inf
                    s -= s.max(dim=1, keepdim=True).values
                    s.exp_()
                    s /= s.sum(dim=1, keepdim=True)
                    out[b, h, i0 : i0 + s.shape[0]] = (s @ vh).cpu().numpy()
    return out


ATTENTION = register_problem(AttentionProblem("attention", causal=False))
CAUSAL = register_problem(AttentionProblem("attention-causal", causal=True))
PROBLEMS = (ATTENTION, CAUSAL)


def get_problem_for(causal: bool) -> AttentionProblem:
    return CAUSAL if causal else ATTENTION


def attention_library(**options: Any) -> Callable[[Launcher], Launcher]:
    """Register a library's (or a peer's) ``launch(q, k, v, out=None, causal=False)`` for both
    problems, with ``rung``'s options (dtypes float32 and float16 unless given).
    ``describe(args, out, causal=...)``, where given, says the configuration a call ran in
    (``Rung.describe``)."""
    options.setdefault("dtypes", ("float32", "float16"))
    variants = [(p.name, "_causal" if p.causal else "", {"causal": p.causal}) for p in PROBLEMS]
    return rung_per_problem(variants, **options)


class _IsCausal:
    def __repr__(self) -> str:
        return "IS_CAUSAL"


# In a geometry's scalars: the causal flag, False in the plan's launch without the mask and
# True in the one with it (``masks``)
IS_CAUSAL: Any = _IsCausal()


def _fill(args: Sequence[Any], causal: bool) -> tuple[Any, ...]:
    return tuple(causal if a is IS_CAUSAL else a for a in args)


def masks(found: Any, operands: Sequence[Operand]) -> Masks:
    """The plan an attention geometry describes for ``operands``, without and with the mask:
    ``(kernel, grid, block, shared_mem, scalars)`` is one launch of the kernel on the operands
    then the scalars, ``IS_CAUSAL`` among them the flag; a list of steps (``geometry.steps``)
    runs them in order, a step that takes ``IS_CAUSAL`` built twice, the others shared; a
    ``Masks`` (``tensor_core.plan``) is the plan already."""
    if isinstance(found, Masks):
        return found
    if isinstance(found, tuple):
        kernel, grid, block, smem, scalars = found
        return Masks(
            NumbaLaunch(kernel, grid, block, smem, _fill(scalars, False)),
            NumbaLaunch(kernel, grid, block, smem, _fill(scalars, True)),
        )
    shared: dict[Any, NumbaLaunch] = {}
    plain, causal = (
        steps([(*part[:3], _fill(part[3], c), *part[4:]) for part in found], operands,
              launches=shared)
        for c in (False, True)
    )  # fmt: skip
    return Masks(plain, causal)


Geometry = Callable[..., Any]


def masked_rung(
    problems: Sequence[Any],
    launcher: Callable[[PlanCache, tuple[str, ...], bool], Launcher],
    dtypes: Sequence[str],
    plans_kept: int,
    describe: Callable[..., str] | None,
    options: dict[str, Any],
) -> Callable[[Geometry], Geometry]:
    """Register a geometry as a rung of each of ``problems`` (one without the mask, one with):
    one ``PlanCache`` of ``Masks`` for both, and for each problem ``launcher(plans, dtypes,
    causal)``, whose ``causal`` keyword defaults to the problem's, named ``launch`` or
    ``launch_causal``, with ``rung``'s ``options``; ``describe`` is given ``causal`` too.
    Returns the geometry as it is (attention's and the backward's)."""
    dtypes = tuple(dtypes)

    def decorate(geometry: Geometry) -> Geometry:
        def plan(*ops: Operand) -> Masks:
            return masks(geometry(*ops), ops)

        plans = PlanCache(plan, size=plans_kept)
        for problem in problems:
            launch = launcher(plans, dtypes, problem.causal)
            launch.__name__ = launch.__qualname__ = "launch_causal" if problem.causal else "launch"
            told = None if describe is None else functools.partial(describe, causal=problem.causal)
            registered = rung_launcher(launch, geometry, plans)
            rung(problem=problem.name, dtypes=dtypes, describe=told, **options)(registered)
        return geometry

    return decorate


def _launcher(plans: PlanCache, dtypes: tuple[str, ...], masked: bool) -> Launcher:
    def launch(q: Any, k: Any, v: Any, out: Any = None, causal: bool = masked) -> Any:
        q, k, v, out, _ = operands(q, k, v, out, dtypes)
        if 0 not in out.shape:
            plans(q, k, v, out)[bool(causal)](q, k, v, out)
        return out.obj

    return launch


def attention_rung(
    *,
    dtypes: Sequence[str] = ("float32", "float16"),
    plans_kept: int = PLANS_PER_CACHE,
    describe: Callable[..., str] | None = None,
    **options: Any,
) -> Callable[[Geometry], Geometry]:
    """Register an attention rung, from its launch geometry, as a rung of both problems, with
    ``rung``'s options (name, parent, title, needs, units, min_cc, ...); return the geometry as
    it is.

    ``geometry(q, k, v, out)`` takes the validated operands, once per signature of them (q
    empty: never), and returns ``(kernel, grid, block, shared_mem, scalars)`` (the kernel on
    q, k, v, out, then the scalars, ``IS_CAUSAL`` the mask's flag), a list of steps
    (``geometry.steps``; ``IS_CAUSAL`` in the arguments of those that take the mask), or a
    ``Masks`` (the tensor-core rungs' ``tensor_core.plan``); it may raise ValueError (or
    ``AttentionMemoryError``) for sizes the rung does not take. ``plans_kept``: how many
    signatures' plans to keep (1 where a plan holds an N x N buffer). Each problem's launcher,
    ``launch(q, k, v, out=None, causal=<the problem's>)``, validates (``operands``), finds the
    plan and runs its launch without or with the mask."""
    return masked_rung(PROBLEMS, _launcher, dtypes, plans_kept, describe, options)


_NAMES = ("q", "k", "v")


def operands(
    q: Any, k: Any, v: Any, out: Any, dtypes: tuple[str, ...]
) -> tuple[Operand, Operand, Operand, Operand, Shape]:
    """Validate a launcher's arrays; allocate the output if it is None.

    Returns q, k, v and the output as ``Operand`` records (``ladder.core.fastcall``), and the
    shape. Every rung calls this, so every rung refuses bad input with the same messages.
    """
    q, k, v = (intake(x, name) for x, name in zip((q, k, v), _NAMES, strict=True))
    dtype = same_dtype_4d((q, k, v), dtypes)
    shape = shape_of(q, k, v)

    def allocate(shape: tuple[int, ...], dtype: str) -> Any:
        return memory.empty(shape, resolve(dtype), "the output")

    result = output(out, q.shape, dtype, layout="", allocate=allocate, shape_text="q's shape")
    return q, k, v, result, shape


def same_dtype_4d(arrays: tuple[Operand, ...], dtypes: tuple[str, ...]) -> str:
    """The dtype of q (the first of ``arrays``), one of ``dtypes``, after checking that every
    array has it, four dimensions and C order; errors name the array."""
    dtype = arrays[0].dtype
    if dtype not in dtypes:
        raise TypeError(f"q must be {' or '.join(dtypes)} for this rung, got {dtype}")
    for arr in arrays:
        if arr.dtype != dtype:
            raise TypeError(f"{arr.name} must be {dtype} like q, got {arr.dtype}")
        if arr.ndim != 4:
            what = "kv_heads" if arr.name in ("k", "v") else "heads"
            raise ValueError(f"{arr.name} must be 4-D (batch, {what}, N, d), got shape {arr.shape}")
        if not arr.contiguous:
            raise ValueError(f"{arr.name} must be C-contiguous; copy it first")
    return dtype


def shape_of(q: Operand, k: Operand, v: Operand) -> Shape:
    """The ``Shape`` of q (B, H, N, d) and k, v (B, HKV, N, d), after checking that they agree
    and that H is a multiple of HKV within the grid's limits."""
    batch, heads, n, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {k.shape} and {v.shape}")
    kv_batch, kv_heads, kv_n, kv_d = k.shape
    if (kv_batch, kv_n, kv_d) != (batch, n, d):
        raise ValueError(f"k and v must have q's batch, N and d: q is {q.shape}, k is {k.shape}")
    if kv_heads == 0 or heads % kv_heads != 0:
        raise ValueError(
            f"the query heads ({heads}) must be a multiple of the key/value heads ({kv_heads})"
        )
    if max(batch, heads) > MAX_GRID_YZ:
        raise ValueError(f"at most {MAX_GRID_YZ} batches and heads (grid limit), got "
                         f"{batch} x {heads}")  # fmt: skip
    return Shape(batch, heads, kv_heads, n, d)


def check_arrays(
    q: Any, k: Any, v: Any, out: Any, dtypes: tuple[str, ...]
) -> tuple[Any, Any, Any, Any, Shape]:
    """``operands``, returning Numba device arrays (the caller's own when they are): for the
    launchers that hand their arrays to a library."""
    q, k, v, out, shape = operands(q, k, v, out, dtypes)
    return numba_array(q), numba_array(k), numba_array(v), numba_array(out), shape


def workspace(shape: tuple[int, ...], name: str, what: str) -> Operand:
    """A float32 device array that a plan owns, as an ``Operand`` called ``name``; ``what``
    names it in the error raised when it cannot fit (``memory.empty``)."""
    return intake(memory.empty(shape, np.float32, what), name)


class Masks(NamedTuple):
    """A plan of an attention rung, for one signature of q, k, v and out: its launch without
    the causal mask and its launch with it, built together and picked per call by
    ``plan[causal]`` (``causal`` is a kernel argument: one compiled kernel serves both)."""

    plain: Callable[..., None]
    causal: Callable[..., None]

    @property
    def mode(self) -> str:
        """The launch path of each (``NumbaLaunch.mode``, ``Steps.mode``), for reports."""
        plain, causal = (getattr(x, "mode", type(x).__name__) for x in self)
        if causal in ("new", plain):  # "new": not launched yet
            return plain
        return f"causal: {causal}" if plain == "new" else f"{plain}; causal: {causal}"
