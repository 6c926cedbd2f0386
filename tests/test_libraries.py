"""The library rows in each configuration: registry facts, the torch.compile cache, the SDPA
backend names and refusals, the prepared cuDNN rows (the holder, its poisoning), and the conv
summary's best-library column.

Without a GPU the PyTorch rows cannot be measured (they need CUDA), but their launchers run on
CPU tensors over the simulator's memory when called directly, so most of this runs anywhere;
``torch.compile`` there uses the "eager" backend (Dynamo's graph, no Inductor), which tests the
cache, not the generated code. On a GPU the compiled rows run through Inductor at a few odd
sizes (the registry-parametrized tests leave them out of their sweeps: ``conftest.swept``).
"""

import numpy as np
import pytest
from conftest import ON_GPU

from ladder.core import compiled, timing
from ladder.core.dtypes import to_device, to_host
from ladder.core.rung import Holder, Prepared, Rung, get_problem
from ladder.core.torch_views import read_back

torch = pytest.importorskip("torch", reason="the library rows need PyTorch")

# ---- a library's output kept in a Holder --------------------------------------------------------


def test_poison_empties_a_holder_and_an_empty_one_reads_back_nan():
    held = Holder()
    held.value = torch.ones(3)
    timing.poison(held)
    assert held.value is None
    out = to_device(np.zeros(3, np.float32))
    copy = read_back(held, out)
    copy()
    assert np.all(np.isnan(to_host(out)))
    held.value = torch.full((3,), 2.0)
    copy()
    assert np.all(to_host(out) == 2.0)


def _stale_holder_rung(store_once: bool) -> Rung:
    """A gemm 'library' whose result lives in a Holder: it stores a right answer on every call,
    or (``store_once``) on the first call only, after which a stale result must not pass."""
    calls = []

    def prepare(args, out):
        held = Holder()
        return Prepared(args, held, read_back(held, out))

    def launch(a, b, held):
        calls.append(1)
        if len(calls) == 1 or not store_once:
            host = [to_host(x).astype(np.float64) for x in (a, b)]
            held.value = torch.from_numpy((host[0] @ host[1]).astype(np.float32))

    return Rung("gemm", 97, "held", "t", ("float32",), launch, doc="t", prepare=prepare)


@pytest.mark.skipif(ON_GPU, reason="the simulator's path: a GPU run checks a fresh call anyway")
def test_a_holder_left_stale_fails_the_check_after_timing():
    case = timing.prepare(get_problem("gemm"), (5, 6, 7))
    assert timing.measure(case, _stale_holder_rung(store_once=False)).ok
    m = timing.measure(case, _stale_holder_rung(store_once=True))
    assert m.status is timing.Status.FAILED and "after timing" in m.error


# ---- the torch.compile cache --------------------------------------------------------------------


@pytest.fixture
def eager(monkeypatch):
    """torch.compile with Dynamo's "eager" backend and an empty cache, restored after."""
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    monkeypatch.setattr(compiled, "_COMPILED", {})


def _double(x, out):
    out.copy_(x * 2)


def test_compile_cache_is_keyed_by_shape_strides_dtype_and_alignment(monkeypatch):
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(tuple(t.shape for t in example_inputs))
        return gm.forward

    monkeypatch.setattr(compiled, "BACKEND", counting)
    monkeypatch.setattr(compiled, "_COMPILED", {})

    def run(x):
        out = torch.full(x.shape, float("nan"), dtype=x.dtype)
        compiled.run(_double, x, out)
        assert torch.equal(out, x * 2)

    run(torch.ones(4, 5))
    run(torch.ones(4, 5))  # same signature: no new compile
    assert len(graphs) == compiled.cached() == 1
    run(torch.ones(5, 4).t())  # other strides
    run(torch.ones(4, 5, dtype=torch.float16))  # other dtype
    run(torch.ones(21)[1:])  # the same shape as below, 4 bytes off alignment
    run(torch.ones(20))
    assert len(graphs) == compiled.cached() == 5
    # many shapes, past Dynamo's recompile_limit (8 per code object): every one compiled
    for n in range(1, 13):
        run(torch.ones(n, 3))
    assert len(graphs) == compiled.cached() == 17
