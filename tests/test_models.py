"""ladder.models: the course's LeNet and a GPT-2 block on the ladder's operators give what the
same models give on PyTorch's, forward and backward; ``ladder models`` writes its results.

In the simulator the models run at small sizes (LeNet on 22 x 22 images, a block 32 wide);
on a GPU at the course's image size and a wider block.
"""

import json

import pytest

torch = pytest.importorskip("torch", reason="ladder.models needs PyTorch: pip install '.[ops]'")

from ladder.models import bench  # noqa: E402
from ladder.models.gpt import Block, Width  # noqa: E402
from ladder.models.lenet import IMAGE, LeNet, flat_features  # noqa: E402
from tests.conftest import ON_GPU, quick_unless  # noqa: E402

DEVICE = "cuda" if ON_GPU else "cpu"
SIDE = IMAGE if ON_GPU else 22
WIDTH = Width(channels=128, heads=2) if ON_GPU else Width(channels=32, heads=2)


def _error(found, expected):
    found, expected = found.double(), expected.double()
    return ((found - expected).norm() / expected.norm()).item()


def test_flat_features_follow_the_layers():
    assert flat_features(IMAGE) == 16 * 17 * 17
    assert flat_features(22) == 16
    with pytest.raises(ValueError, match="image must be at least 22"):
        flat_features(21)


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, pytest.param(torch.float16, marks=quick_unless(True))],
    ids=["float32", "float16"],
)
def test_lenet_on_the_ladder_predicts_as_pytorch(dtype):
    x = torch.randn(3, 1, SIDE, SIDE, generator=torch.Generator().manual_seed(0)).to(DEVICE, dtype)
    ours = LeNet(ops="ladder", dtype=dtype, device=DEVICE, image=SIDE)
    theirs = LeNet(ops="torch", dtype=torch.float64, device=DEVICE, image=SIDE)
    with torch.no_grad():
        found, expected = ours(x), theirs(x.double())
    assert found.shape == (3, 10) and found.dtype == dtype
    assert _error(found, expected) < (1e-5 if dtype == torch.float32 else 3e-3)
    assert torch.equal(found.argmax(-1), expected.argmax(-1))
    assert next(name for name, _ in ours.layers()) == "conv1"


def test_lenet_refuses_other_images():
    with pytest.raises(ValueError, match=r"x must be \(B, 1, 22, 22\)"):
        LeNet(image=22)(torch.ones(1, 1, 23, 23))


@pytest.mark.parametrize(
    "dtype, tolerance",
    # in the simulator a forward and backward of the block launches some thirty kernels,
    # about a minute: the fast path has each operator's own test (tests/test_ops.py)
    [
        pytest.param(torch.float32, 2e-5, marks=quick_unless(True)),
        pytest.param(torch.float16, 5e-3, marks=quick_unless(True)),
    ],
    ids=["float32", "float16"],
)
def test_block_on_the_ladder_matches_pytorch_forward_and_backward(dtype, tolerance):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, WIDTH.channels, generator=gen).to(DEVICE, dtype)
    grad = torch.randn(2, 5, WIDTH.channels, generator=gen).to(DEVICE, dtype)
    ours = Block(WIDTH, ops="ladder", dtype=dtype, device=DEVICE)
    wide = Block(WIDTH, ops="torch", dtype=torch.float64, device=DEVICE)
    out, expected = ours(x), wide(x.double())
    out.backward(grad)
    expected.backward(grad.double())
    assert _error(out, expected) < tolerance
    for (name, p), w in zip(ours.named_parameters(), wide.parameters(), strict=True):
        assert _error(p.grad, w.grad) < tolerance, name


def test_block_refuses_a_wrong_width():
    with pytest.raises(ValueError, match="must be a multiple of heads"):
        Block(Width(channels=30, heads=4))
    with pytest.raises(ValueError, match=r"x must be \(batch, sequence, 32\)"):
        Block(Width(32, 2))(torch.ones(1, 2, 16))


def test_operators_are_named():
    with pytest.raises(ValueError, match="ops must be one of ladder, torch"):
        LeNet(ops="cudnn")


@pytest.mark.slow
def test_ladder_models_writes_its_results(tmp_path):
    """``ladder models`` end to end: every contender, the checks, the routes and the profile in
    the file (in the simulator at tiny sizes; on a GPU at the benchmark's, which takes minutes:
    the bench itself is run there, not this test)."""
    if ON_GPU:
        pytest.skip("on a GPU `ladder models` is the benchmark itself; run it, not this test")
    from ladder.cli import main

    out = tmp_path / "models.json"
    argv = ["models", "--parts", "lenet", "block", "--dtypes", "float32", "float16"]
    assert main([*argv, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "models" and doc["simulated"] and "host" not in doc
    assert set(doc["lenet"]) == {"float32", "float16"} and set(doc["block"]) == {"float16"}
    for case in doc["lenet"].values():
        assert set(case["contenders"]) == {"ladder", "torch"}  # no torch.compile in the simulator
        assert set(case["contenders"]["ladder"]["layers"]) >= {"conv1", "conv2", "softmax"}
        assert any("conv/" in route for route in case["routes"])
    block = doc["block"]["float16"]
    assert block["contenders"]["ladder"]["rel_err_vs_float32"] < 1e-2
    assert set(block["profile"]) == {"torch", "ladder"} and block["profile"]["ladder"]
    assert doc["checks"]["lenet classes identical to PyTorch's but at near-ties (float32)"]["met"]
    assert doc["checks"]["lenet forward, x PyTorch eager (float32)"]["met"] is None
    figures = {p.name for p in tmp_path.glob("*.png")}
    assert figures == {
        "models-lenet.png",
        "models-block.png",
        "models-block-routes.png",
        "models-block-profile-float16.png",
    }


def test_ladder_models_names_a_bad_part(capsys):
    from ladder.cli import main

    assert main(["models", "--parts", "resnet"]) == 2
    assert "--parts" in capsys.readouterr().err
    assert bench.PARTS == ("lenet", "block", "host")


@pytest.mark.slow  # `ladder models` end to end: each call runs a rung in the simulator
def test_ladder_models_measures_the_host_time_of_the_operators(tmp_path, monkeypatch):
    """``--parts host``: each operator's route and the host µs per call of ladder.ops (with and
    without gradients), the route's rung called directly and PyTorch's operator, in the file,
    the printed table and the README block, with the target's check (not judged in the
    simulator). Two operators here: in the simulator every call runs a rung in Python."""
    from ladder.cli import main
    from ladder.models import bench, host

    monkeypatch.setattr(host, "OPERATORS", {k: host.OPERATORS[k] for k in ("matmul", "linear")})
    out = tmp_path / "models.json"
    code = main(["models", "--parts", "host", "--out", str(out)])
    doc = json.loads(out.read_text())
    # the exit code says whether every target was met (in the simulator none is judged)
    assert code == (not all(c["met"] is not False for c in doc["checks"].values()))
    case = doc["host"]["float32"]
    assert set(case) == {"matmul", "linear"}
    assert case["matmul"]["route"].startswith("gemm/")
    assert case["linear"]["route"].startswith("gemm-epilogue/")
    for entry in case.values():
        assert all(entry[c] > 0 for c in host.CONTENDERS)
    checks = [c for name, c in doc["checks"].items() if name.startswith("ladder.ops host")]
    assert len(checks) == len(doc["host"])  # one per dtype measured
    for check in checks:
        assert check["target"] == host.TARGET_US and check["at_most"]
        assert check["met"] is None if doc["simulated"] else isinstance(check["met"], bool)
    text = bench.markdown(doc, [], "models.json")
    assert "| matmul | float32 | gemm/" in text and "(target at most 20)" in text


def test_ladder_models_redraws_a_results_file_and_writes_the_readme_block(tmp_path):
    """``--from-results`` measures nothing: it reads a file (here the committed H100 run, a lab
    file), draws its figures beside it and, with ``--readme``, writes the README's models block
    from it; the exit code says whether every target was met."""
    import shutil

    from ladder.cli import main
    from ladder.core import lab
    from ladder.models import bench

    committed = lab.resolve(bench.COMMITTED)
    results = tmp_path / committed.name
    shutil.copy(committed, results)
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{bench.README_START}\nold\n{bench.README_END}\nbottom\n")
    doc = json.loads(results.read_text())
    met = all(c["met"] is not False for c in doc["checks"].values())
    assert main(["models", "--from-results", str(results), "--readme", str(readme)]) == (not met)
    text = readme.read_text()
    assert text.startswith("top\n") and text.endswith("bottom\n") and "old" not in text
    assert f"Measured on {doc['gpu']}" in text
    assert "| LeNet, batch 10000 | float16 | ladder |" in text
    for figure in ("lenet", "block", "block-routes"):
        path = tmp_path / f"{results.stem}-{figure}.png"
        assert path.is_file() and f"]({path.as_posix()})" in text
