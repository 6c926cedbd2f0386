"""One truth: a rung's identity is ``problem/name``, its number display order from its package's
declared ladder; the canonical results file per GPU is built up in pieces by ``ladder bench``,
holds every registered rung that can run on its GPU, and everything presented from it is
rendered (``ladder render``), never typed."""

from __future__ import annotations

import importlib
import re
import sys
import threading
from pathlib import Path

import pytest

from ladder import cli
from ladder.core import canonical, derived, render
from ladder.core.rung import Ladder, get_problem, ladders, parent_of, rung, rungs

ROOT = canonical.ROOT


def _run(problem: str, name: str, dtype: str = "float32", ms: float = 1.0, **extra) -> dict:
    row = {"problem": problem, "rung": name, "dtype": dtype, "shape": [8, 8, 8]}
    row |= {"reference": False, "peer": False, "status": "ok", "median_ms": ms, "number": 7}
    return row | extra


def _piece(gpu: str, runs: list[dict], date: str = "2026-11-28T10:00:00+0000") -> dict:
    record = canonical.piece_record(runs, [], None, None, {}, ["bench"], 1.0, date, "abc")
    return {"gpu": gpu, "date": date, "runs": canonical.stamp(runs, date, "abc"), "piece": record}


def test_every_rung_is_in_its_packages_ladder_in_order():
    for package, ladder in ladders().items():
        registered = [r for r in rungs(references=False) if r.package == package]
        assert registered, f"{package} declares a ladder but registers no rung"
        for r in registered:
            assert ladder.number(r.name) == r.number, r.key
            parent = parent_of(r)
            assert parent is None or parent.number < r.number, r.key


def test_a_rung_files_number_is_its_place_in_the_ladder():
    """File names sort in ladder order: ``rNN_`` is the rung's derived number."""
    for r in rungs(references=False):
        module = sys.modules[r.launch.__module__].__name__.rsplit(".", 1)[-1]
        assert module.startswith(f"r{r.number:02d}_"), f"{r.key} is rung {r.number}: {module}"


def test_numbers_come_from_the_declared_order():
    ladder = Ladder("pkg", ("a", "b", "c"), baseline="cpu")
    assert [ladder.number(n) for n in ("cpu", "a", "b", "c", "x")] == [0, 1, 2, 3, None]
    assert ladder.every == ("cpu", "a", "b", "c")


def test_a_rung_must_be_declared_with_a_parent_before_it():
    module = type(sys)("ladder.gemm.r99_try")
    module.__doc__ = "a story"
    sys.modules[module.__name__] = module

    def launch():
        return None

    launch.__module__ = module.__name__
    try:
        with pytest.raises(ValueError, match=r"not in ladder\.gemm's LADDER"):
            rung(name="try", title="t", parent="naive")(launch)
        with pytest.raises(ValueError, match="declare parent="):
            rung(name="coalesced", title="t")(launch)
        with pytest.raises(ValueError, match="parent 'tuned' must be a rung before it"):
            rung(name="coalesced", title="t", parent="tuned")(launch)
    finally:
        del sys.modules[module.__name__]
    assert "gemm/try" not in {r.key for r in rungs("gemm")}


def test_parents_follow_the_ladder_not_the_numbers():
    wide = next(r for r in rungs("attention") if r.name == "wide-keys-flash")
    assert parent_of(wide).name == "producer-flash"  # not rung 10, pingpong
    fp8 = next(r for r in rungs("gemm-fp8") if r.name == "fp8")
    assert parent_of(fp8).key == "gemm/persistent"  # another problem of the same package
    grouped = next(r for r in rungs("grouped-gemm") if r.name == "wgmma-grouped")
    assert parent_of(grouped).key == "grouped-gemm/grouped"


def test_a_results_row_shows_the_number_the_registry_gives_now():
    """Inserting a rung changes no data: a row written when naive was rung 7 shows it as 1."""
    assert derived.number(_run("gemm", "naive")) == 1
    assert derived.number(_run("gemm", "gone-rung")) == 7  # no longer registered: as written


def test_the_repr_of_a_rung_is_short():
    r = next(r for r in rungs("gemm") if r.name == "naive")
    assert repr(r) == "<Rung gemm/naive (rung 1)>"


def test_a_piece_replaces_only_the_pairs_it_measured():
    first = canonical.merged(None, _piece("G", [_run("gemm", "naive"), _run("conv", "naive")]))
    assert len(first["pieces"]) == 1 and len(first["runs"]) == 2
    again = _piece("G", [_run("gemm", "naive", ms=2.0)], date="2026-11-29T10:00:00+0000")
    doc = canonical.merged(first, again)
    kept = {(r["problem"], r["median_ms"], r["date"][:10]) for r in doc["runs"]}
    assert kept == {("conv", 1.0, "2026-11-28"), ("gemm", 2.0, "2026-11-29")}
    assert [p["measured"] for p in doc["pieces"]] == [["conv/float32"], ["gemm/float32"]]
    assert all(r["commit"] == "abc" for r in doc["runs"])
    with pytest.raises(ValueError, match="measured on H"):
        canonical.merged(doc, _piece("H", [_run("gemm", "naive")]))


def test_a_file_measured_elsewhere_merges_piece_by_piece(tmp_path, capsys):
    """``ladder bench --merge``: what a GPU machine wrote with ``--out`` joins the checkout's
    file; its pieces keep their records, and newer pieces win their pairs."""
    from ladder.core import report

    here = tmp_path / "here.json"
    report.write_results(
        canonical.merged(None, _piece("G", [_run("gemm", "naive"), _run("conv", "naive")])),
        here,
    )
    there = canonical.merged(None, _piece("G", [_run("gemm", "naive", ms=3.0)], "2026-11-29"))
    there = canonical.merged(there, _piece("G", [_run("moe", "x")], "2026-11-30"))
    away = tmp_path / "away.json"
    report.write_results(there, away)
    assert cli.main(["bench", "--merge", str(away), "--out", str(here)]) == 0
    doc = report.read_results(here)
    assert {(r["problem"], r["median_ms"]) for r in doc["runs"]} == {
        ("gemm", 3.0), ("conv", 1.0), ("moe", 1.0),
    }  # fmt: skip
    assert [p["measured"] for p in doc["pieces"]] == [
        ["conv/float32"], ["gemm/float32"], ["moe/float32"],
    ]  # fmt: skip
    assert cli.main(["bench", "--merge", str(tmp_path / "none.json")]) != 0
    assert "--merge" in capsys.readouterr().err


def test_pieces_measured_at_once_merge_under_a_lock(tmp_path):
    """Benches of several problems on several GPUs of one machine write one file."""
    path = tmp_path / "g.json"
    names = [f"p{i}" for i in range(8)]
    threads = [
        threading.Thread(target=canonical.merge_into, args=(path, _piece("G", [_run(n, "x")])))
        for n in names
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    from ladder.core import report

    written = report.read_results(path)
    assert sorted(r["problem"] for r in written["runs"]) == names
    assert len(written["pieces"]) == len(names)


def test_missing_names_each_rung_a_file_lacks():
    doc = {"runs": [_run("layernorm", "two-pass")], "device": {"compute_capability": [7, 5]}}
    lacking = canonical.missing(doc, rungs("layernorm"))
    assert "layernorm/two-pass float32" not in lacking
    assert "layernorm/welford float32" in lacking


UNMEASURED = Path(__file__).parent / "unmeasured"


def _debt(slug: str) -> list[str]:
    """The rungs the canonical file of ``slug`` is known to lack, one per line: a debt that
    can only shrink (``tests/unmeasured/<slug>.txt``; # starts a comment)."""
    path = UNMEASURED / f"{slug}.txt"
    if not path.is_file():
        return []
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_the_readme_reports_a_canonical_file_that_lacks_no_new_rung():
    """A new rung cannot land unmeasured: the canonical file of the GPU the README reports has
    a run of every registered rung, library and peer that can run on that GPU, in each of its
    dtypes, except those written down as not yet measured, and none of its runs failed. The
    list written down only shrinks: a rung measured since must leave it."""
    slug = render.readme_gpu()
    assert slug, "the README names the GPU it reports: <!-- results:start <gpu-slug> -->"
    path = canonical.path_for(slug, canonical.RESULTS)
    assert path.is_file(), f"ladder bench on that GPU writes {path.relative_to(ROOT)}"
    doc = render.load()[slug]
    lacking = canonical.missing(doc)
    owed = _debt(slug)
    new = [m for m in lacking if m not in owed]
    assert not new, f"measure them: ladder bench --problems ... ({', '.join(new[:12])})"
    paid = [m for m in owed if m not in lacking]
    assert not paid, f"measured now, so take them out of tests/unmeasured/{slug}.txt: {paid}"
    failed = [f"{r['problem']}/{r['rung']} {r['dtype']}" for r in doc["runs"]]
    failed = [f for f, r in zip(failed, doc["runs"], strict=True) if r["status"] == "failed"]
    assert not failed, f"runs that failed in the canonical file: {failed}"


def test_results_holds_only_canonical_files_their_figures_and_an_index():
    slugs = {p.stem for p in canonical.files()}
    for path in (ROOT / "results").iterdir():
        if path.suffix == ".json":
            continue
        if path.name in ("README.md",) or path.name.endswith(".lock"):
            continue
        assert path.suffix == ".png", f"results/{path.name}: the lab keeps everything else"
        assert any(path.stem == s or path.stem.startswith(s + "-") for s in slugs), path.name


def test_what_is_rendered_is_current():
    """The README's table, docs/results/ and the lab's index say what the canonical files and
    the registry say now: ``ladder render`` rewrites what differs."""
    stale = [str(p.relative_to(ROOT)) for p in render.stale()]
    assert not stale, f"run: ladder render ({', '.join(stale)})"


def test_render_check_says_what_is_stale(tmp_path, capsys, monkeypatch):
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(render, "ROOT", tmp_path)
    monkeypatch.setattr(render, "stale", lambda: [tmp_path / "docs" / "results" / "gemm.md"])
    assert cli.main(["render", "--check"]) == 1
    assert "stale: docs/results/gemm.md" in capsys.readouterr().out


def test_a_problem_page_names_its_rungs_by_number_and_name():
    page = render.problem_page("gemm", {})
    assert "1 `naive`" in page and "24 `persistent`" in page
    assert "Not measured yet" in page


def test_the_headline_has_a_row_per_problem_and_dtype():
    doc = {"gpu": "G", "runs": [_run("layernorm", "welford", ms=1.0, shape=[8192, 8192])]}
    doc["runs"].append(_run("layernorm", "torch-layer-norm", ms=2.0, reference=True,
                            shape=[8192, 8192]))  # fmt: skip
    text = render.headline_markdown(doc, "g")
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    wanted = sum(len(p.dtypes) for p in (get_problem(n) for n in render.problems()))
    assert len(rows) == wanted
    line = next(line for line in rows if "[layernorm]" in line)
    assert re.search(r"2 `welford` \| 2.00 \| torch-layer-norm", line), line


def test_every_ladder_module_is_imported_once():
    for package in ladders():
        assert importlib.import_module(package).LADDER


def test_sm90a_stands_for_compute_capability_9_0_exactly():
    """``sm90a=`` names the arch-specific instructions; the registry keeps the range and the
    reason ``ladder list --gpus`` gives elsewhere."""
    from ladder.core.rung import get_rung

    r = get_rung("gemm", "wgmma")
    assert (r.min_cc, r.max_cc) == ((9, 0), (9, 0))
    assert r.cc_needs == "wgmma and setmaxnreg, sm_90a-only instructions"
    assert get_rung("conv", "wgmma").cc_needs == "wgmma, an sm_90a-only instruction"
    with pytest.raises(ValueError, match="sm90a= sets min_cc"):
        rung(name="x", title="x", sm90a="wgmma", min_cc=(8, 0))


def test_a_piece_says_how_long_it_took_for_a_bench_with_a_deadline(tmp_path):
    from ladder.core import report

    path = tmp_path / "g.json"
    assert canonical.piece_seconds(path, "gemm") is None
    doc = canonical.merged(None, _piece("G", [_run("gemm", "naive")]))
    report.write_results(doc, path)
    assert canonical.piece_seconds(path, "gemm") == 1.0
    assert canonical.piece_seconds(path, "conv") is None


def test_the_gpu_script_skips_a_piece_that_cannot_finish_before_its_deadline(tmp_path):
    """.ci/gpu bench with DEADLINE_S: a piece that would be killed part-way is not started."""
    import os
    import subprocess

    env = os.environ | {"DEADLINE_S": "0", "LOG": str(tmp_path), "BENCH_OUT": str(tmp_path / "o")}
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "gpu"), "bench", "gemm"], env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    assert "bench-gemm skipped" in (tmp_path / "status").read_text()
    assert not (tmp_path / "o").exists()
