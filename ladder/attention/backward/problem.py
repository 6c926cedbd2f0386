"""Attention backward: dQ, dK, dV of O = softmax(Q·Kᵀ/√d)·V, given dO and the forward's saved
output O and log-sum-exp L.

Two problems, ``attention-backward`` and ``attention-backward-causal``, as in the forward
(``ladder.attention.problem``): same sizes (B, H, HKV, N, d), same grouped-query rule (query
head h reads key/value head h // (H / HKV)), same causal convention. With P = softmax(S) and
S = Q·Kᵀ/√d the chain rule gives, per head,

    dV = Pᵀ·dO        dP = dO·Vᵀ        dS = P ∘ (dP − D),  D_i = Σ_c dO_ic·O_ic
    dQ = dS·K / √d    dK = dSᵀ·Q / √d

where P is recomputed from the saved L (P_ij = exp(S_ij − L_i), no second softmax) and D is
rowsum(dP ∘ P) rewritten with O = P·V. Under grouped-query attention dK and dV of a key/value
head sum over the query heads that read it.

Inputs: q (B, H, N, d), k and v (B, HKV, N, d), o and do like q, all float32, float16 or
bfloat16 (rung 4 and the libraries) and C-contiguous, and lse (B, H, N) float32, natural
log, as PyTorch's and FlashAttention's kernels save it. ``make_inputs`` makes o and lse with
the float64 forward, rounded as a forward kernel would store them. The output is the three
gradients in one array, (B, H + 2·HKV, N, d) in the
input dtype: heads [0, H) are dQ, [H, H + HKV) dK, [H + HKV, H + 2·HKV) dV (``split`` gives the
three views). The reference is the float64 gradient at the rounded q, k, v and do, with its own
float64 P and O: a kernel's rounding of P, dS and the saved O and L is measured, not forgiven.

Work: five N x N x d products per head (S, dP, dV, dQ, dK), 10·B·H·N²·d operations, 2.5 times
the forward: the FlashAttention papers' count, so TFLOP/s compare with PyTorch's benchmarks (a
kernel that recomputes S and dP twice does more, and is still credited with these). Causal:
half. Fewest bytes: read q, k, v, o, do and lse, write dq, dk and dv.

The ladder's target (issue 33): its best rung at least 0.6 times the fastest SDPA backward
measured in the same run, at head dimensions 64 and 128.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ladder.attention import memory
from ladder.attention.problem import (
    REFERENCE_CHUNK,
    TEST_SIZES,
    AttentionProblem,
    Geometry,
    masked_rung,
    same_dtype_4d,
    shape_of,
)
from ladder.core import device
from ladder.core.dtypes import resolve
from ladder.core.fastcall import PLANS_PER_CACHE, Operand, PlanCache, intake, output
from ladder.core.rung import Launcher, register_problem, rung_per_problem

# B·H·N² past which the float64 reference runs on the GPU through PyTorch where it can
GPU_REFERENCE_FROM = 1 << 26
SIMULATOR_SIZES = [(1, 1, 1, 1, 16), (1, 2, 1, 17, 16)]


class BackwardProblem(AttentionProblem):
    """dQ, dK, dV of softmax(Q·Kᵀ/√d)·V from dO, O and the log-sum-exp; sizes (B, H, HKV, N, d)."""

    dtypes = ("float32", "float16", "bfloat16")

    def standard_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return [(4, 16, 16, 4096, 64), (4, 16, 16, 4096, 128)]

    def simulator_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return [SIMULATOR_SIZES[-1]]

    def test_sizes(self, dtype: str = "float16") -> list[tuple[int, ...]]:
        return list(TEST_SIZES)

    def make_inputs(
        self, size: tuple[int, ...], dtype: str = "float16", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        batch, heads, kv_heads, n, d = size
        rng = np.random.default_rng(seed)
        q, k, v, do = (
            rng.standard_normal(shape, dtype=np.float32).astype(resolve(dtype))
            for shape in ((batch, heads, n, d), (batch, kv_heads, n, d),
                          (batch, kv_heads, n, d), (batch, heads, n, d))
        )  # fmt: skip
        o, lse = forward_float64(q, k, v, self.causal)
        return q, k, v, o.astype(resolve(dtype)), do, lse.astype(np.float32)

    def reference(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        q, k, v, _, do, _ = inputs
        return pack(*gradients_float64(q, k, v, do, self.causal))

    def output_shape(self, size: tuple[int, ...]) -> tuple[int, ...]:
        batch, heads, kv_heads, n, d = size
        return (batch, heads + 2 * kv_heads, n, d)

    def flops(self, size: tuple[int, ...]) -> float:
        batch, heads, _, n, d = size
        full = 10.0 * batch * heads * n * n * d
        return full / 2 if self.causal else full

    def min_bytes(self, size: tuple[int, ...], dtype: str) -> float:
        batch, heads, kv_heads, n, d = size
        arrays = (4 * batch * heads + 4 * batch * kv_heads) * n * d * resolve(dtype).itemsize
        return float(arrays + batch * heads * n * 4)  # and lse, float32

    def tolerance(self, dtype: str) -> float:
        # float16: P and dS are rounded to half for the tensor cores, and dS = P (dP - D) loses
        # digits where dP and D are close; measured errors are 1e-3 or less. bfloat16: 8 times
        # the rounding (8 significant bits against 11), and 8 times the bound
        return {"float32": 1e-5, "float16": 5e-3, "bfloat16": 4e-2}[dtype]

    def readme_summary(self, runs: list[dict[str, Any]], ceilings: dict[str, Any]) -> str:
        return ""


def pack(dq: np.ndarray, dk: np.ndarray, dv: np.ndarray) -> np.ndarray:
    """The three gradients in the problem's output layout, heads [dQ | dK | dV]."""
    return np.concatenate([dq, dk, dv], axis=1)


def split(grads: Any, heads: int) -> tuple[Any, Any, Any]:
    """dQ, dK and dV as views of an output of the problem's layout, given H (the query heads)."""
    kv_heads = (grads.shape[1] - heads) // 2
    return grads[:, :heads], grads[:, heads : heads + kv_heads], grads[:, heads + kv_heads :]


def _passes(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray | None, causal: bool
) -> tuple[np.ndarray, ...]:
    """The float64 definition, a block of query rows at a time (N x N never held at once):
    o and lse, and dq, dk, dv when ``do`` is given. On the GPU through PyTorch (float64
    throughout) past GPU_REFERENCE_FROM scores, where PyTorch has CUDA; NumPy otherwise."""
    batch, heads, n, d = q.shape
    kv_heads = k.shape[1]
    group, scale = heads // kv_heads, 1.0 / math.sqrt(d)
    on_gpu = batch * heads * n * n > GPU_REFERENCE_FROM and device.torch_cuda_available()
    if on_gpu:
        import torch

        def load(x: np.ndarray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(x, np.float64)).cuda()

        def host(x: Any) -> np.ndarray:
            return x.cpu().numpy()

        exp, log, arange = torch.exp, torch.log, lambda m: torch.arange(m, device="cuda")

        def rowmax(x: Any) -> Any:
            return x.amax(dim=1, keepdim=True)

        def rowsum(x: Any) -> Any:
            return x.sum(dim=1, keepdim=True)
    else:

        def load(x: np.ndarray) -> np.ndarray:
            return x.astype(np.float64)

        def host(x: np.ndarray) -> np.ndarray:
            return x

        exp, log, arange = np.exp, np.log, np.arange

        def rowmax(x: np.ndarray) -> np.ndarray:
            return x.max(axis=1, keepdims=True)

        def rowsum(x: np.ndarray) -> np.ndarray:
            return x.sum(axis=1, keepdims=True)

    o = np.empty(q.shape, np.float64)
    lse = np.empty(q.shape[:3], np.float64)
    grads = do is not None
    if grads:
        dq, dk, dv = np.empty(q.shape), np.empty(k.shape), np.empty(v.shape)
    rows = max(1, REFERENCE_CHUNK // max(n, 1))
    keys = arange(n)
    for b in range(batch):
        for kv in range(kv_heads):
            kh, vh = load(k[b, kv]), load(v[b, kv])
            dkh, dvh = kh * 0, vh * 0
            for h in range(kv * group, (kv + 1) * group):
                qh = load(q[b, h])
                doh = load(do[b, h]) if grads else None
                for i0 in range(0, n, rows):
                    qc = qh[i0 : i0 + rows]
                    s = qc @ kh.T * scale
                    if causal:
                        s[keys[None, :] > arange(n)[i0 : i0 + s.shape[0], None]] = -math.inf
                    m = rowmax(s)
                    p = exp(s - m)
                    total = rowsum(p)
                    p /= total
                    oc = p @ vh
                    o[b, h, i0 : i0 + s.shape[0]] = host(oc)
                    lse[b, h, i0 : i0 + s.shape[0]] = host(m + log(total))[:, 0]
                    if grads:
                        doc = doh[i0 : i0 + rows]
                        delta = rowsum(doc * oc)
                        dvh += p.T @ doc
                        ds = p * (doc @ vh.T - delta)
                        dq[b, h, i0 : i0 + s.shape[0]] = host(ds @ kh * scale)
                        dkh += ds.T @ qc * scale
            if grads:
                dk[b, kv], dv[b, kv] = host(dkh), host(dvh)
    return (o, lse, dq, dk, dv) if grads else (o, lse)


def forward_float64(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The forward's output and log-sum-exp (natural log, per query row), in float64."""
    return _passes(q, k, v, None, causal)


def gradients_float64(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray, causal: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dq, dk and dv in float64 (the definition in this module's docstring)."""
    return _passes(q, k, v, do, causal)[2:]


BACKWARD = register_problem(BackwardProblem("attention-backward", causal=False))
BACKWARD_CAUSAL = register_problem(BackwardProblem("attention-backward-causal", causal=True))
PROBLEMS = (BACKWARD, BACKWARD_CAUSAL)


def get_problem_for(causal: bool) -> BackwardProblem:
    return BACKWARD_CAUSAL if causal else BACKWARD


def backward_library(**options: Any) -> Any:
    """Register a library's ``launch(q, k, v, o, do, lse, out=None, causal=False)`` for both
    problems (``ladder.attention.problem.attention_library``, for the backward)."""
    options.setdefault("dtypes", ("float32", "float16"))
    variants = [(p.name, "_causal" if p.causal else "", {"causal": p.causal}) for p in PROBLEMS]
    return rung_per_problem(variants, **options)


def _launcher(plans: PlanCache, dtypes: tuple[str, ...], masked: bool) -> Launcher:
    def launch(
        q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any = None, causal: bool = masked
    ) -> Any:
        q, k, v, o, do, lse, out, _ = operands(q, k, v, o, do, lse, out, dtypes)
        if 0 not in out.shape:
            plans(q, k, v, o, do, lse, out)[bool(causal)](q, k, v, o, do, lse, out)
        return out.obj

    return launch


def backward_rung(
    *,
    dtypes: Sequence[str] = ("float32", "float16"),
    plans_kept: int = PLANS_PER_CACHE,
    describe: Callable[..., str] | None = None,
    **options: Any,
) -> Callable[[Geometry], Geometry]:
    """Register a backward rung, from its launch geometry, as a rung of both problems
    (``ladder.attention.problem.attention_rung``, for the backward): ``geometry(q, k, v, o,
    do, lse, out)``, once per signature of them, returns a list of steps (``IS_CAUSAL`` in the
    arguments of those that take the mask) or a ``Masks`` (``tensor_core.plan``). Each
    problem's launcher, ``launch(q, k, v, o, do, lse, out=None, causal=<the problem's>)``,
    validates (``operands``), finds the plan and runs its launch without or with the mask."""
    return masked_rung(PROBLEMS, _launcher, dtypes, plans_kept, describe, options)


def operands(
    q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, out: Any, dtypes: tuple[str, ...]
) -> tuple[Operand, ...]:
    """Validate a launcher's arrays; allocate the output if it is None. Returns q, k, v, o,
    do, lse and the output as ``Operand`` records and the ``Shape``."""
    names = ("q", "k", "v", "o", "do")
    found = [intake(x, name) for x, name in zip((q, k, v, o, do), names, strict=True)]
    dtype = same_dtype_4d(tuple(found), dtypes)
    q, k, v, o, do = found
    for arr in (o, do):
        if arr.shape != q.shape:
            raise ValueError(f"{arr.name} must have q's shape {q.shape}, got {arr.shape}")
    shape = shape_of(q, k, v)
    batch, heads, kv_heads, n, d = shape
    lse = intake(lse, "lse")
    if lse.dtype != "float32":
        raise TypeError(f"lse must be float32 (the forward's log-sum-exp), got {lse.dtype}")
    if lse.shape != (batch, heads, n):
        raise ValueError(f"lse must have shape (batch, heads, N) = {(batch, heads, n)}, "
                         f"got {lse.shape}")  # fmt: skip
    if not lse.contiguous:
        raise ValueError("lse must be C-contiguous; copy it first")

    def allocate(shape: tuple[int, ...], dtype: str) -> Any:
        return memory.empty(shape, resolve(dtype), "the gradients")

    grads = (batch, heads + 2 * kv_heads, n, d)
    result = output(out, grads, dtype, layout="", allocate=allocate,
                    shape_text="shape (B, H + 2·HKV, N, d)")  # fmt: skip
    return q, k, v, o, do, lse, result, shape
