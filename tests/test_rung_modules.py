"""A rung module is its lesson: docstring, constants, kernel(s) and the launch geometry.

The plan cache, the argument reading and the fast launch belong to the harness: each problem's
registration (``gemm_rung``, ``fused_rung``, ``conv_rung``, ``attention_rung``,
``backward_rung``, ``moe_rung``, ``grouped_rung``) builds them from the geometry a rung
declares. So no rung module names them: none imports the harness's types and launch functions
from ``ladder.core.fastcall`` or ``ladder.core.geometry`` (array views, ``numba_array`` and the
like, stay allowed), none names the libraries' launch machinery, and none holds one of the
harness's objects at module level. The registered launcher is named as its module's own and
keeps its plans (``launch.plans``) and the geometry it was built from (``launch.geometry``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from ladder.core import fastcall
from ladder.core.diff import code, module_file
from ladder.core.rung import rungs

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ("ladder.core.fastcall", "ladder.core.geometry")
VIEWS = {"numba_array", "numba_bits", "bits_view"}  # arrays over an operand's memory
# the harness's names, wherever they are defined (fastcall, geometry, the problems' libraries)
PLUMBING = {
    "NumbaLaunch",
    "PackedLaunch",
    "PlanCache",
    "Steps",
    "Operand",
    "Masks",
    "TiledLauncher",
    "TensorMapLaunch",
    "Fp8Launcher",
    "cupy_launch",
    "POINTER",
    "intake",
    "output",
    "current_stream",
    "launch_stream",
    "on_stream",
    "refuse_capture",
    "launch_planned",
    "plan_of",
    "rung_launcher",
    "rung_per_problem",
    "PLANS",
    "LAUNCHER",
}
HARNESS_TYPES = tuple(
    getattr(fastcall, name)
    for name in ("NumbaLaunch", "PackedLaunch", "PlanCache", "Steps", "Operand")
)
RUNGS = [r for r in rungs() if not (r.reference or r.peer or r.on_cpu)]
MODULES = sorted({r.launch.__module__ for r in RUNGS})


def _tree(module: str) -> ast.Module:
    return ast.parse(Path(sys.modules[module].__file__ or "").read_text())


@pytest.mark.parametrize("module", MODULES)
def test_a_rung_module_imports_no_plumbing(module):
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ImportFrom) and node.module in HARNESS:
            names = {alias.name for alias in node.names} - VIEWS
            assert not names, f"{module} imports {sorted(names)} from {node.module}"
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names if a.name in HARNESS]
            assert not found, f"{module} imports {found}"
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ladder"):
            names = {alias.name for alias in node.names} & PLUMBING
            assert not names, f"{module} imports the harness's {sorted(names)}"
        if isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            assert name not in PLUMBING, f"{module} names the harness's {name} (line {node.lineno})"


@pytest.mark.parametrize("module", MODULES)
def test_a_rung_module_holds_no_plans_or_launches(module):
    for name, value in vars(sys.modules[module]).items():
        assert not isinstance(value, HARNESS_TYPES), f"{module}.{name} is a {type(value).__name__}"


@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.key)
def test_the_registered_launcher_is_built_from_the_geometry(rung):
    """The launcher is the registration's: named as the rung module's, its plans kept on it,
    built from a function of the module (its ``geometry``; a mixture-of-experts rung's
    ``layer``, a grouped GEMM's ``grouped_gemm``)."""
    launch = rung.launch
    module = sys.modules[launch.__module__]
    assert launch.__module__.startswith("ladder.") and module_file(rung).is_file()
    assert isinstance(launch.plans, fastcall.PlanCache) or callable(launch.plans)
    made_from = launch.geometry
    assert vars(module).get(made_from.__name__) is made_from, (rung.key, made_from.__name__)
    assert made_from.__name__ in ("geometry", "layer", "grouped_gemm")


def test_the_naive_gemm_is_forty_lines_at_most():
    path = ROOT / "ladder" / "gemm" / "r01_naive.py"
    lines = path.read_text().splitlines()
    assert len(lines) <= 40, f"{path.name} is {len(lines)} lines"
    body = code(path)
    assert "def kernel(" in body and "def geometry(" in body


@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.key)
def test_a_rung_docstring_names_rungs_not_numbers(rung):
    """The first line says what the rung does, not its number (the harness shows that), and
    other rungs are named by name: numbers change when a rung is inserted."""
    lines = rung.doc.strip().splitlines()
    assert not lines[0].startswith("Rung "), f"{rung.key}: {lines[0]}"
    for line in lines:
        words = line.replace(",", " ").split()
        for i, word in enumerate(words[:-1]):
            nxt = words[i + 1].rstrip(".;:)'s")
            if word.lower() in ("rung", "rungs") and nxt.isdigit():
                pytest.fail(f"{rung.key} refers to rung {nxt} by number: {line.strip()}")
