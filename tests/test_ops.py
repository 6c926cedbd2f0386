"""ladder.ops: the best rungs as PyTorch operators, their gradients, routes and fallbacks.

Every operator is checked against PyTorch in float64, forward and backward, on odd shapes; in
the simulator the rungs run on CPU tensors, on a GPU on CUDA tensors.
"""

import pytest

torch = pytest.importorskip("torch", reason="ladder.ops needs PyTorch: pip install '.[ops]'")

import torch.nn.functional as F  # noqa: E402

import ladder.ops as ops  # noqa: E402
from tests.conftest import ON_GPU, gpu_only, quick_unless  # noqa: E402

DEVICE = "cuda" if ON_GPU else "cpu"
TOLERANCE = {torch.float32: 2e-5, torch.float16: 3e-3}  # relative error of the norm


def _group(q, k):
    return q.shape[1] // k.shape[1]


def _sdpa(q, k, v, causal=False):
    g = _group(q, k)
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


# name: (ladder's function, PyTorch's, input shapes); every input is random normal
CASES = {
    "matmul": (ops.matmul, torch.matmul, [(5, 7), (7, 3)]),
    "matmul-1": (ops.matmul, torch.matmul, [(1, 1), (1, 1)]),
    "linear-gelu": (
        lambda x, w, b: ops.linear(x, w, b, "gelu"),
        lambda x, w, b: F.gelu(x @ w + b),
        [(2, 3, 9), (9, 5), (5,)],
    ),
    "linear-bias": (
        lambda x, w, b: ops.linear(x, w, b),
        lambda x, w, b: x @ w + b,
        [(4, 6), (6, 3), (3,)],
    ),
    "softmax": (ops.softmax, lambda x: torch.softmax(x, -1), [(3, 2, 11)]),
    "layer-norm": (
        ops.layer_norm,
        lambda x, g, b: F.layer_norm(x, x.shape[-1:], g, b),
        [(3, 13), (13,), (13,)],  # a block per row: three rows, each a slow one in the simulator
    ),
    "attention": (ops.attention, _sdpa, [(1, 2, 7, 8), (1, 2, 7, 8), (1, 2, 7, 8)]),
    "attention-gqa-causal": (
        lambda q, k, v: ops.attention(q, k, v, causal=True),
        lambda q, k, v: _sdpa(q, k, v, causal=True),
        [(2, 4, 5, 16), (2, 1, 5, 16), (2, 1, 5, 16)],
    ),
    "conv2d": (ops.conv2d, F.conv2d, [(2, 3, 9, 8), (4, 3, 3, 3)]),
    # odd H and W: the last row and column are dropped, and their gradient is 0
    "relu-max-pool": (ops.relu_max_pool2d, lambda x: F.max_pool2d(F.relu(x), 2), [(2, 3, 7, 9)]),
    "relu-max-pool-2x2": (
        ops.relu_max_pool2d,
        lambda x: F.max_pool2d(F.relu(x), 2),
        [(1, 1, 2, 2)],
    ),
}


def _inputs(shapes, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen).to(DEVICE, dtype) for s in shapes]


def _error(found, expected):
    found, expected = found.double(), expected.double()
    return ((found - expected).norm() / expected.norm().clamp_min(1e-30)).item()


# the fast path keeps every operator in float32 (GQA's causal case aside: attention is there)
# and one in float16; the rest are slow in the simulator
QUICK = {(c, "float32") for c in CASES if c != "attention-gqa-causal"} | {("matmul", "float16")}


@pytest.mark.parametrize(
    "case, dtype",
    [
        pytest.param(c, dtype, marks=quick_unless((c, name) not in QUICK), id=f"{c}-{name}")
        for c in CASES
        for name, dtype in (("float32", torch.float32), ("float16", torch.float16))
    ],
)
def test_forward_and_backward_match_float64(case, dtype):
    ours, theirs, shapes = CASES[case]
    inputs = [x.requires_grad_() for x in _inputs(shapes, dtype)]
    wide = [x.detach().double().requires_grad_() for x in inputs]
    with ops.routes() as ran:
        out = ours(*inputs)
        grad = torch.randn_like(out)
        out.backward(grad)
    expected = theirs(*wide)
    expected.backward(grad.double())
    assert out.dtype == dtype and out.shape == expected.shape
    assert _error(out, expected) < TOLERANCE[dtype], ran
    for i, (x, w) in enumerate(zip(inputs, wide, strict=True)):
        assert _error(x.grad, w.grad) < TOLERANCE[dtype], (i, ran)
    assert ran, "every call is recorded"
    if dtype == torch.float32 and not case.startswith("linear-bias"):
        # float32 has a rung in every problem, here and on every GPU: the first call ran one
        assert ran[0].rung, ran[0]


# tiny shapes: every input element costs two launches of the forward (its finite
# difference), every output element one of the backward (in the simulator, slow ones)
GRADCHECK = {
    "matmul": [(2, 3), (3, 2)],
    "softmax": [(2, 3)],
    "layer-norm": [(1, 3), (3,), (3,)],
    "linear-gelu": [(1, 3), (3, 2), (2,)],
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=quick_unless(True)) for c in GRADCHECK])
def test_gradcheck(case):
    ours = CASES[case][0]
    inputs = [x.requires_grad_() for x in _inputs(GRADCHECK[case], torch.float32)]
    # float32 finite differences: a step of 1e-2 keeps rounding (1e-7 / 1e-2) and curvature
    # (1e-4) below the tolerance
    with pytest.warns(UserWarning, match="double precision"):
        assert torch.autograd.gradcheck(ours, inputs, eps=1e-2, atol=2e-2, rtol=2e-2)


def test_a_rung_writes_every_element():
    """A NaN-filled output buffer is never read: the result holds no NaN (the operators allocate
    their outputs, and a rung that skipped an element would leave garbage or NaN)."""
    a, b = _inputs([(33, 17), (17, 65)], torch.float32, seed=3)
    assert not torch.isnan(ops.matmul(a, b)).any()


def test_transposed_and_strided_inputs():
    a, b = _inputs([(7, 5), (3, 7)], torch.float32, seed=1)
    out = ops.matmul(a.t(), b.t())  # views, not contiguous: copied for the rungs
    assert _error(out, a.t().double() @ b.t().double()) < 2e-5


def test_layer_norm_with_another_eps_runs_pytorch_and_says_why():
    x, g, b = _inputs(CASES["layer-norm"][2], torch.float32)
    with ops.routes() as ran:
        out = ops.layer_norm(x, g, b, eps=1e-3)
    assert ran[0].path == "torch" and "eps=0.001" in ran[0].why
    assert _error(out, F.layer_norm(x.double(), (13,), g.double(), b.double(), 1e-3)) < 2e-5


def test_a_dtype_without_rung_runs_pytorch_and_says_why():
    x = _inputs([(4, 6)], torch.float32)[0].to(torch.float64)
    with ops.routes() as ran:
        out = ops.softmax(x)
    assert ran[0].path == "torch"
    assert "no softmax rung supports float64" in ran[0].why
    assert torch.allclose(out, torch.softmax(x, -1))


def test_routes_record_calls_from_other_threads():
    """On a GPU autograd runs the backward in threads of its own: the record sees them."""
    import threading

    x = _inputs([(3, 5)], torch.float32)[0]
    with ops.routes() as ran:
        worker = threading.Thread(target=ops.softmax, args=(x,))
        worker.start()
        worker.join()
    assert len(ran) == 1 and ran[0].op == "ladder::softmax"


def test_routes_are_chosen_once_per_signature():
    x = _inputs([(3, 5)], torch.float32)[0]
    ops.forget_routes()
    with ops.routes() as ran:
        ops.softmax(x)
        ops.softmax(x + 1)
    assert ran[0] == ran[1]
    assert str(ran[0]).startswith("ladder::softmax: softmax/")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ops.matmul(torch.ones(2, 3), torch.ones(4, 2)), "inner dimensions differ"),
        (lambda: ops.matmul(torch.ones(2, 3), torch.ones(3)), "b must be 2-D"),
        (lambda: ops.matmul(torch.ones(2, 3), torch.ones(3, 2).half()), "b must be torch.float32"),
        (lambda: ops.matmul(torch.ones(2, 3).long(), torch.ones(3, 2)), "a must be a floating"),
        (lambda: ops.matmul([[1.0]], torch.ones(1, 1)), "a must be a torch.Tensor"),
        (lambda: ops.linear(torch.ones(2, 3), torch.ones(3, 4), torch.ones(3)), "bias must have"),
        (lambda: ops.linear(torch.ones(2, 3), torch.ones(3, 4), None, "relu"), "activation"),
        (lambda: ops.linear(torch.ones(2, 5), torch.ones(3, 4)), "x's last dimension"),
        (lambda: ops.softmax(torch.ones(2, 3), dim=0), "dim must be the last"),
        (lambda: ops.layer_norm(torch.ones(2, 3), torch.ones(2), torch.ones(3)), "weight must"),
        (
            lambda: ops.attention(
                torch.ones(1, 3, 4, 8), torch.ones(1, 2, 4, 8), torch.ones(1, 2, 4, 8)
            ),
            "multiple of k's 2",
        ),
        (
            lambda: ops.attention(
                torch.ones(1, 2, 4, 8), torch.ones(1, 2, 5, 8), torch.ones(1, 2, 5, 8)
            ),
            "q's batch, N and d",
        ),
        (
            lambda: ops.attention(torch.ones(2, 4, 8), torch.ones(2, 4, 8), torch.ones(2, 4, 8)),
            "q must be 4-D",
        ),
        (lambda: ops.conv2d(torch.ones(1, 2, 5, 5), torch.ones(3, 1, 3, 3)), "input channels"),
        (lambda: ops.conv2d(torch.ones(1, 1, 5, 5), torch.ones(3, 1, 6, 6)), "does not fit"),
        (lambda: ops.conv2d(torch.ones(1, 1, 5, 5), torch.ones(3, 1, 3, 2)), "square"),
        (lambda: ops.relu_max_pool2d(torch.ones(3, 4, 4)), "x must be 4-D"),
        (lambda: ops.relu_max_pool2d(torch.ones(1, 1, 1, 4)), "at least 2 x 2"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call()


OPCHECK = {
    "matmul": (torch.ops.ladder.matmul, [(3, 5), (5, 2)], ()),
    "linear_gelu": (torch.ops.ladder.linear_gelu, [(3, 5), (5, 2), (2,)], ()),
    "softmax": (torch.ops.ladder.softmax, [(3, 5)], ()),
    "layer_norm": (torch.ops.ladder.layer_norm, [(3, 5), (5,), (5,)], (1e-5,)),
    "attention": (torch.ops.ladder.attention, [(1, 2, 3, 8)] * 3, (True,)),
    # q as the GPT block makes it, a transposed view: the fake's strides must be the real ones'
    "attention-strided": (torch.ops.ladder.attention, [(1, 3, 2, 8), (1, 2, 3, 8)], (True,)),
    "conv2d": (torch.ops.ladder.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3)], ()),
    "relu_max_pool2d": (torch.ops.ladder.relu_max_pool2d, [(2, 3, 5, 6)], ()),
}


# the fast path keeps the two cheapest in the simulator; each of the others runs its
# operator a dozen times
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=quick_unless(n not in ("conv2d", "relu_max_pool2d"))) for n in OPCHECK],
)
def test_opcheck(name):
    """PyTorch's own check of a custom operator: its schema, its fake implementation against
    the real one, its autograd registration, and the operator under AOT dispatch."""
    op, shapes, extra = OPCHECK[name]
    inputs = [x.requires_grad_() for x in _inputs(shapes, torch.float32)]
    if name == "attention-strided":
        q, kv = inputs
        inputs = [q.transpose(1, 2), kv, kv]
    torch.library.opcheck(op, (*inputs, *extra))


def test_torch_compile_traces_the_operators():
    """The fake implementations let Dynamo trace through the operators in one graph
    (``fullgraph``), forward and backward (AOT autograd; the eager backend, so no C
    compiler is needed here)."""
    x, w, b, g, beta = _inputs([(4, 6), (6, 6), (6,), (6,), (6,)], torch.float32)
    w.requires_grad_()

    def block(x):
        return ops.softmax(ops.linear(ops.layer_norm(x, g, beta), w, b, "gelu"))

    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    out = compiled(x)
    out.sum().backward()
    expected = block(x)
    assert torch.allclose(out, expected, atol=1e-6)
    assert w.grad is not None and torch.isfinite(w.grad).all()


@gpu_only
def test_the_best_rung_runs_on_a_gpu():
    """On a GPU the top rung that supports the GPU runs: for FP16 GEMM on Hopper, `split-k`
    (`persistent`'s kernel, its K loop split where the tiles are few), elsewhere mma.sync
    (`warp-tile-64`)."""
    a, b = _inputs([(256, 128), (128, 64)], torch.float16)
    with ops.routes() as ran:
        ops.matmul(a, b)
    major, _ = torch.cuda.get_device_capability()
    assert ran[0].path == ("gemm/split-k" if major == 9 else "gemm/warp-tile-64"), ran


@gpu_only
def test_cuda_graph_replays_the_operators():
    """After a warm-up (compiling each kernel, choosing each route), a CUDA graph captured
    through torch.cuda.graph holds the rungs' launches, on PyTorch's capture stream."""
    x, w, b, g, beta = _inputs([(64, 96), (96, 96), (96,), (96,), (96,)], torch.float32)

    def block(x):
        return ops.softmax(ops.linear(ops.layer_norm(x, g, beta), w, b, "gelu"))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        block(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = block(x)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert _error(out, block(x)) < 1e-6
    with pytest.raises(RuntimeError, match="call it once before capturing"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            ops.softmax(x[:7])  # a signature never called: no route yet


def test_bfloat16_gradients_fall_back_to_pytorch_and_say_why():
    """The backward kernels are Numba's, which has no bfloat16: PyTorch computes those."""
    x, w, b = (
        t.to(torch.bfloat16).requires_grad_()
        for t in _inputs([(3, 4), (4, 2), (2,)], torch.float32)
    )
    with ops.routes() as ran:
        ops.linear(x, w, b, "gelu").sum().backward()
    gelu = [r for r in ran if r.op == "ladder::gelu_backward"]
    assert gelu and gelu[0].path == "torch" and "not bfloat16" in gelu[0].why
    expected = torch.autograd.grad(
        torch.nn.functional.gelu(x.double() @ w.double() + b.double()).sum(), x
    )[0]
    assert _error(x.grad, expected) < 2e-2


def test_a_rung_skipped_for_an_input_says_why(monkeypatch):
    """An operator may pass over a rung that takes the input where a lower one is faster
    (attention's rung 6 without grouped heads); the reason is kept like any other."""
    from ladder.core.rung import rungs as get_rungs
    from ladder.ops import library

    operator = library.SOFTMAX
    top = operator.candidates("float32")[0].name
    monkeypatch.setitem(operator.skip, top, lambda x: "a test's reason")
    operator.forget()
    x = _inputs([(3, 5)], torch.float32)[0]
    try:
        with ops.routes() as ran:
            ops.softmax(x)
        assert ran[0].rung and not ran[0].path.endswith(top)
    finally:
        operator.forget()
    assert "gqa-packed" in library.ATTENTION.skip
    q = torch.ones(1, 4, 2, 8)
    assert library._no_groups(q, q, q) and library._no_groups(q, q[:, :2], q[:, :2]) is None
    for operator in (library.ATTENTION, library.ATTENTION_CAUSAL):  # rung 10 no faster than 9
        assert "rung 9" in operator.skip["pingpong-flash"](q, q, q)
        names = [r.name for r in get_rungs(operator.problem)]
        assert names.index("pingpong-flash") == names.index("producer-flash") + 1


def test_meta_tensors_give_shapes_without_running_anything():
    """The fake implementations serve meta tensors too: shapes and dtypes, no kernel."""
    meta = {"device": "meta", "dtype": torch.float16}
    assert ops.matmul(torch.empty(5, 7, **meta), torch.empty(7, 3, **meta)).shape == (5, 3)
    x = torch.empty(2, 3, 9, **meta)
    assert ops.linear(x, torch.empty(9, 4, **meta), torch.empty(4, **meta), "gelu").shape == (
        2,
        3,
        4,
    )
    assert ops.softmax(x).shape == x.shape
    q = torch.empty(1, 4, 6, 8, **meta)
    kv = torch.empty(1, 2, 6, 8, **meta)
    assert ops.attention(q, kv, kv, causal=True).shape == q.shape
    out = ops.conv2d(torch.empty(2, 3, 9, 8, **meta), torch.empty(4, 3, 3, 3, **meta))
    assert out.shape == (2, 4, 7, 6) and out.device.type == "meta"


def test_relu_max_pool_sends_the_gradient_to_the_first_maximum_above_zero():
    """Ties and non-positive windows, where a pool's gradient has a choice to make: PyTorch's
    (the first maximum in the window, nothing where the maximum is 0 or below)."""
    x = torch.tensor([[[[1.0, 1.0], [0.5, 1.0]], [[-1.0, -2.0], [0.0, -3.0]]]], device=DEVICE)
    x = x.repeat(1, 1, 1, 2).requires_grad_()  # windows (1, 1 | 0.5, 1) and (-1, -2 | 0, -3)
    wide = x.detach().double().requires_grad_()
    with ops.routes() as ran:
        ops.relu_max_pool2d(x).sum().backward()
    F.max_pool2d(F.relu(wide), 2).sum().backward()
    assert torch.equal(x.grad.double(), wide.grad), ran
    assert [r.path for r in ran] == ["ops/relu-max-pool", "ops/relu-max-pool-backward"]


def test_benchmark_keeps_the_fastest_rung_and_says_by_how_much(monkeypatch):
    """``ops.benchmark()`` times every rung that takes a signature and keeps the fastest;
    here the times are a test's own (the lowest rung made the fastest), so the choice and
    the answer it leaves in the output are checked without a GPU."""
    import importlib

    from ladder.ops import library

    routes = importlib.import_module("ladder.ops.routes")  # ladder.ops.routes is the function
    names = [r.name for r in library.SOFTMAX.candidates("float32")]
    fake = iter(range(len(names), 0, -1))  # the top rung slowest, the last timed fastest
    monkeypatch.setattr(routes, "time_rung", lambda run: (run(), float(next(fake)))[1])
    x = _inputs([(3, 5)], torch.float32)[0]
    previous = ops.benchmark(True)
    try:
        with ops.routes() as ran:
            y = ops.softmax(x)
            ops.softmax(x)  # the chosen route is kept: no second timing
    finally:
        assert ops.benchmark(previous) is True
    assert ran[0] == ran[1] and ran[0].path == f"softmax/{names[-1]}"
    assert f"fastest of {len(names)} timed: 1 ms; {names[0]} {len(names)} ms" == ran[0].why
    assert _error(y, torch.softmax(x.double(), -1)) < TOLERANCE[torch.float32]
    with ops.routes() as ran:  # benchmark(previous) forgot the routes: top-down again
        ops.softmax(x)
    assert ran[0].path == f"softmax/{names[0]}" and not ran[0].why


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["tn", "nt"])
def test_wgmma_reads_a_transposed_operand_in_place(layout, dtype):
    """`gemm/wgmma`'s transposed entry points against float64, at tile multiples with more
    than one tile each way (Hopper only: elsewhere the rung is unavailable)."""
    from ladder.core.rung import get_rung

    wgmma = get_rung("gemm", "wgmma")
    why = wgmma.unavailable_reason()
    if why:
        pytest.skip(why)
    m, n, k = 256, 512, 192
    given = {"tn": [(k, m), (k, n)], "nt": [(m, k), (n, k)]}[layout]
    x, y = _inputs(given, dtype, seed=5)
    out = torch.full((m, n), float("nan"), device=DEVICE, dtype=dtype)
    wgmma.transposed(x, y, out, layout)
    expected = x.double().t() @ y.double() if layout == "tn" else x.double() @ y.double().t()
    assert _error(out, expected) < 1e-2
    off = x[:, :-8] if layout == "tn" else x[:-8]  # M = 248: not a multiple of 128
    with pytest.raises(ValueError, match="multiples"):
        wgmma.transposed(off.contiguous(), y, out[:-8], layout)
    empty = {"tn": [(0, m), (0, n)], "nt": [(m, 0), (n, 0)]}[layout]  # K = 0: refused too
    x0, y0 = _inputs(empty, dtype, seed=6)
    with pytest.raises(ValueError, match="multiples"):
        wgmma.transposed(x0, y0, out, layout)


@gpu_only
def test_the_gemm_backward_reads_transposed_operands_in_place_on_hopper():
    """At tile multiples on Hopper the two GEMMs of the backward read Bᵀ and Aᵀ where they lie
    (the route says so); the gradients are checked against float64 either way."""
    a, b = (t.requires_grad_() for t in _inputs([(128, 256), (256, 256)], torch.float16))
    wide = [t.detach().double().requires_grad_() for t in (a, b)]
    with ops.routes() as ran:
        out = ops.matmul(a, b)
        grad = torch.randn_like(out)
        out.backward(grad)
    (wide[0] @ wide[1]).backward(grad.double())
    assert _error(a.grad, wide[0].grad) < 3e-3 and _error(b.grad, wide[1].grad) < 3e-3
    in_place = {r.why for r in ran if "read in place" in r.why}
    major, _ = torch.cuda.get_device_capability()
    assert in_place == ({"Aᵀ read in place", "Bᵀ read in place"} if major == 9 else set()), ran


def test_the_gemm_backward_asks_the_registry_for_a_transposed_entry(monkeypatch):
    """The backward reads Aᵀ and Bᵀ in place through the highest rung that offers
    ``Rung.transposed`` and takes the sizes (here a stand-in rung, so the path runs without
    Hopper); one that refuses (ValueError) leaves the copy path, and the route says which."""
    from types import SimpleNamespace

    from ladder.ops import library

    refuse = False

    def transposed(a, b, c, layout):  # on what a launcher gets: simulator arrays, or tensors
        if refuse:
            raise ValueError("not these sizes")
        a, b = (x.copy_to_host() if hasattr(x, "copy_to_host") else x for x in (a, b))
        c[:] = a.T @ b if layout == "tn" else a @ b.T

    fake = SimpleNamespace(key="gemm/fake", transposed=transposed, unavailable_reason=lambda: None)
    monkeypatch.setattr(library, "_transposed_rungs", lambda dtype: [fake])
    a, b, grad = _inputs([(5, 7), (7, 3), (5, 3)], torch.float32)
    for refuse in (False, True):
        with ops.routes() as ran:
            grad_a, grad_b = library._gemm_grads(a, b, grad, (True, True))
        assert _error(grad_a, grad.double() @ b.double().t()) < 2e-5
        assert _error(grad_b, a.double().t() @ grad.double()) < 2e-5
        in_place = sorted(r.why for r in ran if r.path == "gemm/fake")
        assert in_place == ([] if refuse else ["Aᵀ read in place", "Bᵀ read in place"]), ran
        assert refuse == any(r.op == "ladder::matmul" and r.path != "gemm/fake" for r in ran)


def _fresh(*shapes, grad=False):
    """float64: no rung takes it, so both paths run PyTorch's operators (bit for bit the same,
    and quick in the simulator); the other tests here take the eager path through the rungs."""
    gen = torch.Generator().manual_seed(3)
    made = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
    return [t.to(DEVICE).requires_grad_(grad) for t in made]


def test_the_eager_path_gives_the_operators_answers_and_gradients():
    """A call nothing watches skips torch.ops' dispatch (``library.eager``): without gradients
    the operator's body runs alone, with them an ``autograd.Function`` around it. Same values,
    same gradients as the dispatched operator, bit for bit."""
    from ladder.ops import library

    a, b = _fresh((5, 7), (7, 3))
    assert ops.matmul(a, b).grad_fn is None
    fast = _fresh((5, 7), (7, 3), grad=True)
    slow = _fresh((5, 7), (7, 3), grad=True)
    y_fast, y_slow = ops.matmul(*fast), library.matmul_op(*slow)
    assert type(y_fast.grad_fn).__name__ == "MatmulBackward"  # ours, not the operator's node
    assert torch.equal(y_fast, y_slow)
    y_fast.square().sum().backward()
    y_slow.square().sum().backward()
    assert all(torch.equal(f.grad, s.grad) for f, s in zip(fast, slow, strict=True))
    x, g, beta = _fresh((3, 13), (13,), (13,), grad=True)
    ops.layer_norm(x, g, beta).sum().backward()  # an operator with a non-tensor argument
    assert x.grad is not None and g.grad is not None and beta.grad is not None


def test_what_watches_a_call_sees_the_operator():
    """The profiler, fake tensors and meta tensors (as torch.compile's tracing does) get the
    dispatched ``torch.ops.ladder.*``, so each sees the operator by name."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.profiler import ProfilerActivity, profile

    from ladder.ops import library

    a, b = _fresh((5, 7), (7, 3))
    assert not library.watched((a, b))
    assert not library.watched((a, torch.nn.Parameter(b)))  # a model's weight: still eager
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        ops.matmul(a, b)
    assert "ladder::matmul" in {e.key for e in prof.key_averages()}
    with FakeTensorMode():
        fake = torch.empty(5, 7), torch.empty(7, 3)
        assert library.watched(fake)
        assert tuple(ops.matmul(*fake).shape) == (5, 3)
    meta = torch.empty(5, 7, device="meta"), torch.empty(7, 3, device="meta")
    assert library.watched(meta) and ops.matmul(*meta).device.type == "meta"
