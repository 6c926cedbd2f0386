"""The GEMM shape benchmark: the shapes models call, its section of the canonical file, and the
summary it renders (geometric mean and worst case against the fastest library)."""

from __future__ import annotations

import math

import pytest

from ladder import cli
from ladder.core import canonical, report
from ladder.gemm import shapes


def test_at_least_twenty_shapes_from_the_models_the_issue_names():
    assert len(shapes.SHAPES) >= 20
    labels = " ".join(label for label, _ in shapes.SHAPES)
    for model in ("GPT-2 small", "GPT-2 medium", "Llama-3-8B", "Mixtral", "decode", "LeNet"):
        assert model in labels
    rows = sorted(m for label, (m, _, _) in shapes.SHAPES if label.startswith("decode"))
    assert rows[0] == 1 and rows[-1] == 128
    odd = [size for label, size in shapes.SHAPES if label.startswith("off every tile")]
    assert odd and all(any(x % 64 for x in size) for size in odd)
    assert len({size for _, size in shapes.SHAPES}) == len(shapes.SHAPES)


def _run(rung, label, ms, dtype="float16", spread=0.0):
    shape = dict(shapes.SHAPES)[label]
    row = {"rung": rung, "label": label, "dtype": dtype, "shape": list(shape), "status": "ok"}
    return row | {"median_ms": ms, "min_ms": ms - spread, "max_ms": ms + spread}


def test_the_page_gives_each_shape_the_fastest_rung_and_the_geometric_mean():
    a, b = shapes.SHAPES[0][0], shapes.SHAPES[14][0]
    runs = [
        _run("wgmma", a, 1.0), _run("persistent", a, 0.8), _run("torch-matmul", a, 0.9),
        _run("cublas", a, 0.95), _run("triton", a, 1.2),
        _run("persistent", b, 0.5), _run("cublas", b, 0.2),
    ]  # fmt: skip
    text = shapes.markdown({"runs": runs}, [])
    assert f"| {a} | 8192 × 2304 × 768 | `persistent` | 0.8000 | `torch-matmul` | 0.9000 " in text
    assert "| 1.12 | ahead | 0.75 |" in text
    assert "| 0.40 | behind | — |" in text
    mean = math.sqrt(0.9 / 0.8 * 0.2 / 0.5)
    assert f"geometric mean {mean:.2f}× the fastest library; the worst 0.40× ({b})" in text


def test_the_figure_names_the_gpu_and_draws_each_shape(tmp_path):
    a = shapes.SHAPES[0][0]
    doc = {"gpu": "NVIDIA H200", "runs": [_run("persistent", a, 0.8), _run("cublas", a, 0.9)]}
    (path,) = shapes.figures(doc, tmp_path, "g")
    assert path.name == "g-ratios.png" and path.stat().st_size > 0
    assert shapes.figures({"gpu": "G", "runs": [_run("cublas", a, 0.9)]}, tmp_path, "h") == []


def test_a_bench_of_one_dtype_keeps_the_sections_runs_of_the_other():
    def piece(dtype, ms):
        section = {"runs": [_run("persistent", shapes.SHAPES[0][0], ms, dtype)]}
        section["runs_by_dtype"] = True
        record = canonical.piece_record([], ["gemm-shapes"], None, None, {}, ["b"], 1.0, "d", "c")
        return {"gpu": "G", "runs": [], "sections": {"gemm-shapes": section}, "piece": record}

    doc = canonical.merged(canonical.merged(None, piece("float16", 1.0)), piece("bfloat16", 2.0))
    assert {r["dtype"] for r in doc["sections"]["gemm-shapes"]["runs"]} == {"float16", "bfloat16"}
    doc = canonical.merged(doc, piece("float16", 3.0))
    got = {r["dtype"]: r["median_ms"] for r in doc["sections"]["gemm-shapes"]["runs"]}
    assert got == {"float16": 3.0, "bfloat16": 2.0}


def test_ladder_bench_writes_the_section(tmp_path, capsys, monkeypatch):
    """The whole path of ``ladder bench --problems gemm-shapes``, at the simulator's tiny shape
    on a GPU too (the 24 shapes are the bench's to measure: five minutes on an H200)."""
    monkeypatch.setattr(shapes, "SHAPES", shapes.SIMULATOR_SHAPES)
    out = tmp_path / "g.json"
    assert cli.main(["bench", "--problems", "gemm-shapes", "--out", str(out)]) == 0
    assert ": gemm-shapes measured in" in " ".join(capsys.readouterr().out.split())
    section = report.read_results(out)["sections"]["gemm-shapes"]
    assert {r["dtype"] for r in section["runs"]} == set(shapes.DTYPES)
    assert {r["label"] for r in section["runs"]} == {label for label, _ in shapes.shapes()}
    with pytest.raises(ValueError, match="--dtypes float32: gemm-shapes takes"):
        shapes.checked(("float32",))
