"""Mixture of experts: y = Σ over a token's top-k experts of gate · W2ₑ·silu(W1ₑ·x).

Tokens x (T × d) and their router logits (T × E) come in; each token picks the k experts with
the largest logits, its gates are the softmax of those k logits, and each expert e is an MLP
d → f → d, ``silu(x @ w1[e]) @ w2[e]``, with w1 (E × d × f) and w2 (E × f × d). The output is
the gate-weighted sum over the token's k experts. The router's own matrix (d × E) is a dense
GEMM of the model, as in vLLM's ``fused_moe``, which also takes the logits: routing starts here.

Two problems share this definition, ``moe-top2`` (Mixtral: E = 8, k = 2) and ``moe-top8``
(fine-grained experts, OLMoE: E = 64, k = 8). They are two problems rather than an argument
because the harness hands a launcher its arrays and nothing else; every rung registers a
launcher for each from one layer function (``moe_rung``), whose ``k=`` defaults to the
problem's; a library row registers one launcher that takes ``k=`` (``moe_library``).

A size is (T, d, f, E, hot): tokens, model width, expert width, experts, and the routing: hot
= 0 routes every token to k experts drawn uniformly (balanced on average), hot = p routes p% of
the tokens to expert 0 (skewed: hot = 50 is "one expert takes half the tokens"; hot = 100 sends
every token there). ``make_inputs`` draws logits whose k-th and (k+1)-th largest are at least 1
apart, so no rounding of the logits can change which experts a token picks: a kernel that picks
another expert is wrong, not unlucky.

Work: two GEMMs per (token, expert) pair, 2·d·f FLOPs each: 4·T·k·d·f in all (routing, the
softmax and the sums are O(T·(E + k·d)), negligible). Fewest bytes: read x, the logits and
every expert's weights once, write y. At the Mixtral-like size (T = 8192, d = 4096, f = 14336,
E = 8, k = 2) that is 3.85 TFLOP over 2.0 GB: bound by arithmetic, like a large GEMM.

The third problem, ``grouped-gemm``, is the expert GEMM alone: rows a (M × K) already sorted by
expert, w (E × K × N), offsets (E + 1, int32: expert e owns rows offsets[e] .. offsets[e+1]);
out = a_rows(e) @ w[e] per expert. It is what ``torch._grouped_mm`` computes, so the grouped
kernels are compared with it there. Its size is (M, K, N, E, hot), hot as above for rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from ladder.core import float64
from ladder.core.dtypes import resolve
from ladder.core.fastcall import (
    PLANS_PER_CACHE,
    Operand,
    PlanCache,
    current_stream,
    intake,
    output,
    refuse_capture,
)
from ladder.core.geometry import rung_launcher
from ladder.core.rung import Launcher, Problem, register_problem, rung, rung_per_problem

MIXTRAL = (8192, 4096, 14336, 8)  # T, d, f, E of the benchmark, k = 2 (moe-top2)
OLMOE = (8192, 2048, 1024, 64)  # T, d, f, E of the fine-grained benchmark, k = 8 (moe-top8)
SKEWED = 50  # hot: the skewed benchmark routes half the tokens to expert 0
MARGIN = 1.0  # the least gap between a token's k-th and (k+1)-th logits


class Shape(NamedTuple):
    """The dimensions of one mixture-of-experts call, as read from its arrays."""

    tokens: int
    d: int
    f: int
    experts: int
    k: int

    @property
    def slots(self) -> int:
        """(token, expert) pairs: the rows the expert GEMMs compute, T·k."""
        return self.tokens * self.k


def route_logits(
    tokens: int, experts: int, k: int, hot: int, rng: np.random.Generator
) -> np.ndarray:
    """Float32 logits (T × E) whose top k per token are drawn uniformly (hot = 0) or include
    expert 0 for ``hot``% of the tokens (and exclude it for the rest, when k < E); the chosen
    logits lie in [1, 3], the others in [-3, -1]: the top k are MARGIN or more above the rest."""
    pick = rng.random((tokens, experts))
    if hot:
        chosen = rng.permutation(tokens)[: round(tokens * hot / 100)]
        pick[:, 0] = -1.0  # never picked by the tokens that are not hot (unless k = E)
        pick[chosen, 0] = 2.0  # always picked by the hot ones
    order = np.argsort(-pick, axis=1, kind="stable")
    logits = rng.uniform(-1 - 2 * MARGIN, -MARGIN, (tokens, experts))
    rows = np.arange(tokens)[:, None]
    logits[rows, order[:, :k]] = rng.uniform(MARGIN, 1 + 2 * MARGIN, (tokens, k))
    return logits.astype(np.float32)


def group_sizes(rows: int, groups: int, hot: int, rng: np.random.Generator) -> np.ndarray:
    """Rows per group (int64, summing to ``rows``): hot% to group 0 and the rest uniformly at
    random over the others (over all groups when hot = 0)."""
    if hot == 0 or groups == 1:
        return rng.multinomial(rows, [1 / groups] * groups)
    first = round(rows * hot / 100)
    return np.concatenate(
        [[first], rng.multinomial(rows - first, [1 / (groups - 1)] * (groups - 1))]
    )


def route_numpy(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The float64 routing: each token's k largest logits (ties to the lower expert) and their
    softmax, (ids, gates), both T × k."""
    scores = logits.astype(np.float64)
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(scores, ids, axis=1)
    gates = np.exp(top - top[:, :1])
    return ids, gates / gates.sum(axis=1, keepdims=True)


def silu(z: np.ndarray) -> np.ndarray:
    """z · sigmoid(z), with the sigmoid written through tanh so no exponential overflows."""
    return z * 0.5 * (1.0 + np.tanh(0.5 * z))


def moe_numpy(
    x: np.ndarray, logits: np.ndarray, w1: np.ndarray, w2: np.ndarray, k: int
) -> np.ndarray:
    """The float64 definition, one expert at a time (each expert sees a token at most once)."""
    ids, gates = route_numpy(logits, k)
    y = np.zeros((x.shape[0], w2.shape[2]), np.float64)
    for e in range(w1.shape[0]):
        tokens, slots = np.nonzero(ids == e)
        if tokens.size:
            h = silu(float64.matmul(x[tokens], w1[e]))
            y[tokens] += gates[tokens, slots, None] * float64.matmul(h, w2[e])
    return y


def _parse(name: str, names: tuple[str, ...], values: list[int]) -> tuple[int, ...]:
    """--size for a problem of this module: the count, positive dimensions, hot in 0..100."""
    if len(values) != len(names):
        raise ValueError(
            f"--size for {name} takes {len(names)} values {' '.join(names)}, got {len(values)}"
        )
    small = [f"{n}={v}" for n, v in zip(names[:-1], values, strict=False) if v < 1]
    if small:
        raise ValueError(
            f"--size for {name}: dimensions must be at least 1, got {', '.join(small)}"
        )
    if not 0 <= values[-1] <= 100:
        raise ValueError(f"--size for {name}: hot is a percentage, 0 to 100, got {values[-1]}")
    return tuple(int(v) for v in values)


class MoEProblem(Problem):
    """A mixture-of-experts layer with top-k routing; sizes (T, d, f, E, hot)."""

    bound = "compute"
    dtypes = ("float32", "float16", "bfloat16")
    size_names = ("T", "d", "f", "E", "hot")
    size_help = (
        "T d f E hot: tokens, model width, expert width, experts, percent of tokens sent to "
        "expert 0 (0: uniform routing)"
    )

    def __init__(self, name: str, k: int, benchmark: tuple[int, int, int, int]) -> None:
        self.name = name
        self.k = k
        self.benchmark = benchmark

    def parse_size(self, values: list[int]) -> tuple[int, ...]:
        size = _parse(self.name, self.size_names, values)
        if size[3] < self.k:
            raise ValueError(
                f"--size for {self.name}: E must be at least k = {self.k}, got {size[3]}"
            )
        return size

    def standard_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        if dtype == "float32":  # CUDA cores only: a quarter of each width, balanced
            tokens, d, f, experts = self.benchmark
            return [(tokens // 4, d // 4, f // 4, experts, 0)]
        return [(*self.benchmark, 0), (*self.benchmark, SKEWED)]

    def simulator_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return [(5, 16, 24, self.k + 1, 0)]

    def test_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        k = self.k
        return [
            (1, 64, 128, 8, 0),  # one token: most experts get none
            (1, 16, 24, k, 0),  # k = E: every token goes to every expert
            (37, 17, 33, k + 2, 0),  # widths that are no multiple of 8 (padded on tensor cores)
            (64, 64, 96, 8, 100),  # every token to expert 0
            (300, 136, 264, 8, 50),  # past one 128-row and one 256-column tile
            (513, 256, 512, 64, 0),  # many experts, some with no token or one
        ]

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        # odd widths; then past one 128-row and one 256-column tensor-core tile, d kept small
        return [(37, 17, 33, self.k + 2, 0), (130, 16, 264, self.k + 2, 50)]

    def make_inputs(
        self, size: tuple[int, ...], dtype: str = "float16", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        tokens, d, f, experts, hot = size
        rng = np.random.default_rng(seed)
        t = resolve(dtype)
        # unit-variance x; weights scaled by 1/sqrt(fan-in): h and y of order 1, as in a model
        x = rng.standard_normal((tokens, d), dtype=np.float32).astype(t)
        w1 = (rng.standard_normal((experts, d, f), dtype=np.float32) / np.sqrt(d)).astype(t)
        w2 = (rng.standard_normal((experts, f, d), dtype=np.float32) / np.sqrt(f)).astype(t)
        logits = route_logits(tokens, experts, self.k, hot, rng).astype(t)
        return x, logits, w1, w2

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return moe_numpy(*inputs, k=self.k)

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        return (size[0], size[1])

    def flops(self, size: tuple[int, ...]) -> float:
        tokens, d, f, _, _ = size
        return 4.0 * tokens * self.k * d * f

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        tokens, d, f, experts, _ = size
        return float(
            (2 * tokens * d + tokens * experts + 2 * experts * d * f) * resolve(dtype).itemsize
        )

    def tolerance(self, dtype: str) -> float:
        # float16: h and each expert's output are rounded to half (~5e-4 relative each)
        return {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.5e-2}[dtype]

    def ceiling_key(self, dtype: str) -> str:
        return {"float32": "cublas_fp32_tflops"}.get(dtype, "cublas_fp16_tflops")


class GroupedGemmProblem(Problem):
    """The expert GEMM alone: out[rows of e] = a[rows of e] @ w[e]; sizes (M, K, N, E, hot)."""

    name = "grouped-gemm"
    bound = "compute"
    dtypes = ("float32", "float16", "bfloat16")
    size_names = ("M", "K", "N", "E", "hot")
    size_help = (
        "M K N E hot: rows, inner size, columns, groups, percent of rows in group 0 (0: uniform)"
    )

    def parse_size(self, values: list[int]) -> tuple[int, ...]:
        return _parse(self.name, self.size_names, values)

    def standard_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        # the first expert GEMM of moe-top2 and moe-top8 at their benchmark sizes
        (t2, d2, f2, e2), (t8, d8, f8, e8) = MIXTRAL, OLMOE
        sizes = [(t2 * 2, d2, f2, e2), (t8 * 8, d8, f8, e8)]
        if dtype == "float32":  # CUDA cores only: a quarter of each dimension, balanced
            return [(m // 4, k // 4, n // 4, e, 0) for m, k, n, e in sizes]
        return [(*s, hot) for s in sizes for hot in (0, SKEWED)]

    def simulator_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return [(9, 16, 24, 3, 0)]

    def test_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return [
            (1, 64, 256, 4, 0),
            (37, 17, 33, 3, 0),
            (300, 136, 264, 8, 50),
            (513, 256, 512, 64, 0),
        ]

    def sanitize_sizes(self) -> list[tuple[int, ...]]:
        return [(37, 17, 33, 3, 0), (300, 136, 264, 8, 50)]

    def make_inputs(
        self, size: tuple[int, ...], dtype: str = "float16", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        rows, inner, cols, groups, hot = size
        rng = np.random.default_rng(seed)
        t = resolve(dtype)
        a = rng.standard_normal((rows, inner), dtype=np.float32).astype(t)
        w = (rng.standard_normal((groups, inner, cols), dtype=np.float32) / np.sqrt(inner)).astype(
            t
        )
        offsets = np.concatenate([[0], np.cumsum(group_sizes(rows, groups, hot, rng))])
        return a, w, offsets.astype(np.int32)

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        a, w, offsets = inputs
        out = np.empty((a.shape[0], w.shape[2]), np.float64)
        for e in range(w.shape[0]):
            lo, hi = offsets[e], offsets[e + 1]
            out[lo:hi] = float64.matmul(a[lo:hi], w[e])
        return out

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        return (size[0], size[2])

    def flops(self, size: tuple[int, ...]) -> float:
        rows, inner, cols, _, _ = size
        return 2.0 * rows * inner * cols

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        rows, inner, cols, groups, _ = size
        return float((rows * inner + groups * inner * cols + rows * cols) * resolve(dtype).itemsize)

    def tolerance(self, dtype: str) -> float:
        return {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[dtype]

    def ceiling_key(self, dtype: str) -> str:
        return {"float32": "cublas_fp32_tflops"}.get(dtype, "cublas_fp16_tflops")


TOP2 = register_problem(MoEProblem("moe-top2", 2, MIXTRAL))
TOP8 = register_problem(MoEProblem("moe-top8", 8, OLMOE))
GROUPED = register_problem(GroupedGemmProblem())
MOE_PROBLEMS = (TOP2, TOP8)


def moe_library(**options: Any) -> Callable[[Launcher], Launcher]:
    """Register a library's ``launch(x, logits, w1, w2, out=None, k=2)`` for both
    mixture-of-experts problems, ``k`` bound to each problem's, with ``rung``'s options (dtypes
    float32 and float16 unless given)."""
    options.setdefault("dtypes", ("float32", "float16"))
    return rung_per_problem([(p.name, f"_top{p.k}", {"k": p.k}) for p in MOE_PROBLEMS], **options)


Layer = Callable[..., None]


def stream_of(handle: int) -> Any:
    """The stream for ``kernel[grid, block, stream]``: 0 (the default) or an external one."""
    return cuda.external_stream(handle) if handle else 0


def _no_plan(*operands: Any) -> None:
    return None


def _layer_launcher(
    layer: Layer, plans: Any, dtypes: tuple[str, ...], top: int, refusal: str | None
) -> Launcher:
    """One problem's launcher of a layer: validate, refuse capture where the layer reads the
    GPU's results on the host, find the plan, run the layer on the current stream."""
    if refusal is None:

        def launch(x: Any, logits: Any, w1: Any, w2: Any, out: Any = None, k: int = top) -> Any:
            xs, lg, w1s, w2s, y, shape = operands(x, logits, w1, w2, out, k, dtypes)
            if 0 in y.shape:
                return y.obj
            stream = stream_of(current_stream())
            layer(plans(xs, w1s, w2s, k), xs, lg, w1s, w2s, y, shape, stream)
            return y.obj

    else:

        def launch(x: Any, logits: Any, w1: Any, w2: Any, out: Any = None, k: int = top) -> Any:
            xs, lg, w1s, w2s, y, shape = operands(x, logits, w1, w2, out, k, dtypes)
            if 0 in y.shape:
                return y.obj
            refuse_capture(refusal)
            stream = stream_of(current_stream())
            layer(plans(xs, w1s, w2s, k), xs, lg, w1s, w2s, y, shape, stream)
            return y.obj

    return launch


def moe_rung(
    *,
    dtypes: Sequence[str] = ("float32", "float16"),
    plan: Callable[..., Any] | None = None,
    not_in_a_graph: str | None = None,
    plans_kept: int = PLANS_PER_CACHE,
    **options: Any,
) -> Callable[[Layer], Layer]:
    """Register a mixture-of-experts rung of both problems from its layer, with ``rung``'s
    options (name, parent, title, needs, units, min_cc, ...); return the layer as it is.

    ``layer(p, x, logits, w1, w2, y, shape, stream)`` launches the layer's kernels on the
    validated operands: ``p`` is ``plan(x, w1, w2, k)``, what the rung keeps per signature of
    them (its buffers and launches), None without ``plan``; ``shape`` the problem's ``Shape``;
    ``stream`` the Numba stream to launch on (the current one, ``fastcall.current_stream``).
    ``not_in_a_graph``: why a call cannot be captured into a CUDA graph (it reads the GPU's
    results on the host), for a layer that cannot. Each problem's launcher,
    ``launch(x, logits, w1, w2, out=None, k=<the problem's>)``, validates (``operands``), finds
    the plan (``launch.plans``) and runs the layer."""
    dtypes = tuple(dtypes)

    def decorate(layer: Layer) -> Layer:
        plans = _no_plan if plan is None else PlanCache(plan, size=plans_kept)
        for problem in MOE_PROBLEMS:
            launch = _layer_launcher(layer, plans, dtypes, problem.k, not_in_a_graph)
            launch.__name__ = launch.__qualname__ = f"launch_top{problem.k}"
            registered = rung_launcher(launch, layer, plans)
            rung(problem=problem.name, dtypes=dtypes, **options)(registered)
        return layer

    return decorate


GroupedGemm = Callable[..., None]


def grouped_rung(
    *,
    plan: Callable[..., Any],
    offsets_check: Any,
    dtypes: Sequence[str] = ("float32", "float16"),
    **options: Any,
) -> Callable[[GroupedGemm], GroupedGemm]:
    """Register a rung of ``grouped-gemm`` from its ``gemm(p, a, w, offsets, out, stream)``,
    which launches the grouped GEMM on the validated operands (``p``: ``plan(a, w, offsets,
    out)``, kept per signature); return the function as it is. The launcher registered,
    ``launch(a, w, offsets, out=None)``, first raises what ``offsets_check`` (a
    ``common.OffsetsCheck``, whose status the gemm's check kernel writes) has found of an
    earlier call, then validates (``grouped_operands``), finds the plan and runs the gemm on
    the current stream."""
    dtypes = tuple(dtypes)

    def decorate(gemm: GroupedGemm) -> GroupedGemm:
        plans = PlanCache(plan)

        def launch(a: Any, w: Any, offsets: Any, out: Any = None) -> Any:
            offsets_check.raise_if_bad()
            a, w, offs, c = grouped_operands(a, w, offsets, out, dtypes)
            if 0 in c.shape:
                return c.obj
            gemm(plans(a, w, offs, c), a, w, offs, c, stream_of(current_stream()))
            return c.obj

        launch.__name__ = launch.__qualname__ = "launch_grouped_gemm"
        registered = rung_launcher(launch, gemm, plans)
        rung(problem="grouped-gemm", dtypes=dtypes, **options)(registered)
        return gemm

    return decorate


def _checked(found: tuple[Operand, ...], names: tuple[str, ...], dims: tuple[int, ...],
             dtypes: tuple[str, ...]) -> str:  # fmt: skip
    """The common dtype of ``found``, each checked for rank, contiguity and dtype."""
    dtype = found[0].dtype
    if dtype not in dtypes:
        raise TypeError(f"{names[0]} must be {' or '.join(dtypes)} for this rung, got {dtype}")
    for arr, name, ndim in zip(found, names, dims, strict=True):
        if arr.dtype != dtype:
            raise TypeError(f"{name} must be {dtype} like {names[0]}, got {arr.dtype}")
        if arr.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
        if not arr.contiguous:
            raise ValueError(f"{name} must be C-contiguous; copy it first")
    return dtype


def operands(
    x: Any, logits: Any, w1: Any, w2: Any, out: Any, k: int, dtypes: tuple[str, ...]
) -> tuple[Operand, Operand, Operand, Operand, Operand, Shape]:
    """Validate a launcher's arrays and k; allocate the output if it is None. Every rung calls
    this, so every rung refuses bad input with the same messages."""
    names = ("x", "logits", "w1", "w2")
    found = tuple(intake(a, n) for a, n in zip((x, logits, w1, w2), names, strict=True))
    dtype = _checked(found, names, (2, 2, 3, 3), dtypes)
    x, logits, w1, w2 = found
    tokens, d = x.shape
    experts, d1, f = w1.shape
    if logits.shape != (tokens, experts):
        raise ValueError(f"logits must be (T, E) = {(tokens, experts)} for x {x.shape} and "
                         f"w1 {w1.shape}, got {logits.shape}")  # fmt: skip
    if d1 != d:
        raise ValueError(f"w1 must be (E, d, f) with d = {d} (x's width), got {w1.shape}")
    if w2.shape != (experts, f, d):
        raise ValueError(f"w2 must be (E, f, d) = {(experts, f, d)}, got {w2.shape}")
    if not 1 <= k <= min(experts, K_MAX):
        raise ValueError(f"k must be 1 to min(E, {K_MAX}) = {min(experts, K_MAX)}, got {k}")
    if tokens * k > MAX_ROWS:
        raise ValueError(f"x: T·k = {tokens * k} rows, at most {MAX_ROWS} (the grid's y limit); "
                         f"split the tokens into calls")  # fmt: skip
    result = output(out, (tokens, d), dtype, shape_text="x's shape")
    return x, logits, w1, w2, result, Shape(tokens, d, f, experts, k)


def grouped_operands(
    a: Any, w: Any, offsets: Any, out: Any, dtypes: tuple[str, ...]
) -> tuple[Operand, Operand, Operand, Operand]:
    """Validate a grouped GEMM's arrays (offsets int32, E + 1 of them, read on the device: a
    launcher never copies them to the host); allocate the output if it is None."""
    a, w, offs = intake(a, "a"), intake(w, "w"), intake(offsets, "offsets")
    _checked((a, w), ("a", "w"), (2, 3), dtypes)
    if w.shape[1] != a.shape[1]:
        raise ValueError(f"w must be (E, K, N) with K = {a.shape[1]} (a's width), got {w.shape}")
    if a.shape[0] > MAX_ROWS:
        raise ValueError(f"a: {a.shape[0]} rows, at most {MAX_ROWS} (the grid's y limit)")
    if offs.dtype != "int32" or offs.shape != (w.shape[0] + 1,):
        raise ValueError(f"offsets must be int32 of shape ({w.shape[0] + 1},), got {offs.dtype} "
                         f"{offs.shape}")  # fmt: skip
    result = output(out, (a.shape[0], w.shape[2]), a.dtype)
    return a, w, offs, result


K_MAX = 8  # the most experts per token the routing kernels keep (registers: one slot each)
# the most (token, expert) rows: the copy kernels put 8 rows per block along the grid's y
# dimension, which allows 65,535 blocks (common.ELEMENTWISE)
MAX_ROWS = 65_535 * 8
