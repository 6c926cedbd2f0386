"""ladder check, profile and sanitize: the parts that run without a GPU.

The compile report runs for real (Numba's compile_ptx and NVRTC need no GPU). Nsight Compute
and compute-sanitizer need a GPU; their output formats are tested here on samples copied from
a run on an H200, and the commands themselves were run there (lab/gemm/2026-11-22-profiles/,
lab/tools/2026-11-22-sanitize/ and the other profile and sanitize entries of lab/README.md).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ladder import cli
from ladder.core import check, cuda_cpp, report, tools
from ladder.core.rung import GENERATIONS, Rung, get_rung, rung, rungs
from tests.conftest import quick_unless

NVRTC_LOG = """\
ptxas info    : 72 bytes gmem
ptxas info    : Compiling entry function 'mma_sync_gemm' for 'sm_90'
ptxas info    : Function properties for mma_sync_gemm
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 236 registers, used 1 barriers
ptxas info    : Compiling entry function 'wmma_naive' for 'sm_90'
ptxas info    : Function properties for wmma_naive
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 63 registers, used 0 barriers, 4096 bytes smem
"""
NVJITLINK_LOG = """\
ptxas info    : Function properties for _ZN6ladder4gemm5k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 127 registers, used 1 barriers
info    : Function properties for '_ZN6ladder4gemm5k':
info    : used 127 registers, used 1 barriers, 0 stack, 9472 bytes smem, 0 bytes lmem
"""


def test_parse_ptxas_reads_registers_spills_and_shared_memory():
    found = check.parse_ptxas(NVRTC_LOG)
    assert found["mma_sync_gemm"] == {
        "stack_bytes": 0, "spill_stores": 0, "spill_loads": 0, "registers": 236, "smem_bytes": 0,
    }  # fmt: skip
    assert found["wmma_naive"]["smem_bytes"] == 4096
    assert found["wmma_naive"]["spill_stores"] == 8 and found["wmma_naive"]["stack_bytes"] == 16
    linked = check.parse_ptxas(NVJITLINK_LOG)
    assert list(linked) == ["_ZN6ladder4gemm5k"] and linked["_ZN6ladder4gemm5k"]["registers"] == 127


def test_static_shared_memory_is_read_from_numba_ptx():
    ptx = (
        ".visible .shared .align 2 .b8 _cudapy_smem_1[4352];\n"
        ".shared .align 4 .b8 _cudapy_smem_2[4096];\n"
        ".extern .shared .align 16 .b8 dynamic[];\n"
        "\tst.shared.u16 [%rd13], %rs115;\n"
    )
    assert check.ptx_static_smem(ptx) == 8448


def test_ladder_check_compiles_numba_and_cuda_rungs(tmp_path):
    out = tmp_path / "check.json"
    rungs = ["transposed-tiles", "wmma"]
    assert cli.main(["check", "gemm", "--rungs", *rungs, "--json", str(out)]) == 0
    reports = json.loads(out.read_text())
    numba = [r for r in reports if r["rung"] == "transposed-tiles"]
    assert {r["arch"] for r in numba} == {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"}
    assert all(r["registers"] and r["spill_stores"] == 0 and not r["error"] for r in numba)
    assert all(r["smem_bytes"] == 8 * (132 + 128) * 4 for r in numba)  # its two tiles
    wmma = [r for r in reports if r["rung"] == "wmma"]
    assert wmma and all(r["kernel"] == "wmma_naive" and r["registers"] for r in wmma)


def test_a_source_that_does_not_compile_is_reported(tmp_path):
    broken = tmp_path / "r98_broken.cu"
    broken.write_text('extern "C" __global__ void k() { undefined_name(); }\n')
    source = cuda_cpp.CudaSource(broken, ("sm_80",))
    fake = Rung("gemm", 98, "broken", "test double", ("float16",), lambda *a: None, doc="x")
    (report,) = check.check_cuda(fake, source)
    assert report.error and "undefined_name" in report.error


def test_rungs_say_which_gpu_generations_they_run_on_and_why():
    assert [g.arch for g in GENERATIONS] == list(check.ARCHS)
    wgmma = get_rung("gemm", "wgmma")
    assert wgmma.cc_reason() == (
        "needs compute capability 9.0 exactly: wgmma and setmaxnreg, sm_90a-only instructions"
    )
    assert wgmma.reason_for_cc((8, 0)) == wgmma.reason_for_cc((10, 0)) == wgmma.cc_reason()
    assert wgmma.reason_for_cc((9, 0)) is None
    assert report.generation_cells(wgmma) == ["no", "no", "no", "no", "yes", wgmma.cc_reason()]
    cp_async = get_rung("gemm", "cp-async")
    assert cp_async.reason_for_cc((7, 5)) == "needs compute capability 8.0 or later: cp.async"
    assert report.generation_cells(get_rung("gemm", "wmma"))[-1] == ""  # 7.0: runs on all five
    for r in rungs():
        if r.min_cc is None and r.max_cc is None:
            assert report.generation_cells(r) == ["yes"] * len(GENERATIONS) + [""], r.key


def test_a_rung_with_a_compute_capability_range_must_say_why():
    with pytest.raises(ValueError, match="cc_needs"):
        rung(name="x", title="x", problem="gemm", reference=True, min_cc=(8, 0))(lambda: None)
    assert "gemm/x" not in {r.key for r in rungs("gemm")}


def test_ladder_list_shows_each_gpu_generation(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one line per rung
    assert cli.main(["list", "gemm", "--gpus"]) == 0
    text = capsys.readouterr().out
    assert all(g.name in text for g in GENERATIONS) and "9.0 exactly" in text


def test_check_reports_an_arch_outside_a_rungs_range_as_not_for_this_gpu(tmp_path):
    wgmma = get_rung("gemm", "wgmma")
    reports = check.check([wgmma], ("sm_86", "sm_90"))
    (skipped,) = [r for r in reports if r.skipped]
    assert (skipped.arch, skipped.error) == ("sm_86", None)
    assert skipped.skipped == f"not for this GPU: {wgmma.cc_reason()}"
    built = [r for r in reports if not r.skipped]
    assert built and all(r.arch == "sm_90a" and r.registers and not r.error for r in built)
    out = tmp_path / "check.json"
    assert (
        cli.main(["check", "gemm", "--rungs", "wgmma", "--archs", "sm_80", "--json", str(out)]) == 0
    )
    (only,) = json.loads(out.read_text())
    assert only["skipped"] == skipped.skipped and only["error"] is None


def test_check_groups_rungs_that_share_a_build():
    """``ladder check`` hands groups of rungs to its processes: a kernel or a ``.cu`` two rungs
    share is in one group (built once), every rung in exactly one, the costliest group first."""
    compiled = [r for r in rungs() if not (r.on_cpu or r.reference)]
    found = check.groups(compiled)
    assert sorted(r.key for g in found for r in g) == sorted(r.key for r in compiled)
    owner = {}
    for i, group in enumerate(found):
        for r in group:
            for build in check._builds_of(r):
                assert owner.setdefault(build, i) == i, f"{r.key} shares a build across groups"
    keys = [{r.key for r in g} for g in found]
    assert any({"attention/flash", "attention-causal/flash"} <= k for k in keys)
    work = [sum(check._work(r, check.ARCHS) for r in g) for g in found]
    assert work == sorted(work, reverse=True)


def _check_json(tmp_path, name, *options):
    out = tmp_path / f"{name}.json"
    argv = ["check", "gemm", "--rungs", "naive", "wmma", "--archs", "sm_80", "sm_90"]
    assert cli.main([*argv, *options, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_check_in_parallel_reports_what_one_process_does_and_keeps_it(tmp_path, monkeypatch):
    """Two processes (a Numba rung and a CUDA C++ one, each in its own) give the reports one
    gives, in the same order, each from an empty cache. A third check reads each build's
    figures from the cache instead of building: here a kept figure changed by hand shows in
    its report. The fingerprint covers every file of the package, so an edit anywhere
    builds everything again."""
    monkeypatch.setenv("LADDER_CACHE", str(tmp_path / "one"))
    alone = _check_json(tmp_path, "one", "--jobs", "1")
    monkeypatch.setenv("LADDER_CACHE", str(tmp_path / "two"))
    assert _check_json(tmp_path, "two", "--jobs", "2") == alone
    assert {r["rung"] for r in alone} == {"naive", "wmma"}
    assert all(r["registers"] and not r["error"] for r in alone)
    (folder,) = (tmp_path / "two" / "check").iterdir()
    docs = {path: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}
    builds = sorted(d["build"].split()[0] + " " + d["build"].split()[-1] for d in docs.values())
    # one per Numba kernel and architecture, one per .cu and architecture
    assert builds == ["cuda sm_80", "cuda sm_90", "numba sm_80", "numba sm_90"]
    path, doc = next((p, d) for p, d in docs.items() if d["build"].startswith("numba "))
    doc["figures"]["registers"] = 999
    path.write_text(json.dumps(doc))
    kept = _check_json(tmp_path, "kept", "--jobs", "2")
    changed = [b for a, b in zip(alone, kept, strict=True) if a != b]
    assert [r["registers"] for r in changed] == [999] and changed[0]["rung"] == "naive"
    assert check._in_package(check.PACKAGE / "core" / "check.py")
    assert not check._in_package(tmp_path / "my_rung.py")  # a user's rung is never kept


SUMMARY_ONLY = """info    : 8 bytes gmem
info    : Function properties for 'k':
info    : used 32 registers, used 0 barriers, 64 stack, 0 bytes smem, 536 bytes cmem[0]
"""
PTXAS_LINES = (
    """ptxas info    : Function properties for k
ptxas         .     64 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 536 bytes cmem[0]
"""
    + SUMMARY_ONLY
)


def test_a_link_from_the_compute_cache_is_made_again_for_its_figures(monkeypatch):
    """nvJitLink 13.0 with a GPU driver takes a PTX it has seen from CUDA's compute cache and
    logs only its summary, without spills (seen on the H200): the report links again with a
    PTX no cache holds and reads ptxas's own lines."""
    logs, seen = [SUMMARY_ONLY, PTXAS_LINES], []

    def link_log(ptx, arch):
        seen.append(ptx)
        return logs.pop(0)

    monkeypatch.setattr(check, "_link_log", link_log)
    figures = check._nvjitlink_report(".entry k() { ret; }", "sm_80")
    assert figures == {
        "k": {
            "stack_bytes": 64,
            "spill_stores": 4,
            "spill_loads": 4,
            "registers": 32,
            "smem_bytes": 0,
        }
    }
    assert len(seen) == 2 and seen[1].startswith(seen[0]) and seen[1] != seen[0]


def test_an_nvrtc_build_with_an_empty_log_is_made_again_for_its_figures(monkeypatch):
    """On the H200, NVRTC 13.0 returned an empty log for a source built before on the machine
    (the check's own test lost its CUDA C++ rows): the report builds again with an empty kernel
    of a new name added (a new PTX; a comment would vanish in the preprocessor) and reports the
    same figures as a first build, without that kernel."""
    source = sys.modules[get_rung("gemm", "wmma").launch.__module__].SOURCE
    options = [*source.options, "--ptxas-options=-v"]
    direct = check._nvrtc_report(source, "sm_90", options)
    real, seen = cuda_cpp.compile_source, []

    def first_empty(text, *args, **kwargs):
        seen.append(text)
        build = real(text, *args, **kwargs)
        return cuda_cpp.Build(build.cubin, "" if len(seen) == 1 else build.log, build.path)

    monkeypatch.setattr(cuda_cpp, "compile_source", first_empty)
    assert direct and check._nvrtc_report(source, "sm_90", options) == direct
    assert len(seen) == 2 and seen[1].startswith(seen[0]) and check.NONCE_KERNEL in seen[1]


def test_the_cache_follows_ladder_cache_set_after_import(tmp_path, monkeypatch):
    """A check with one job runs in this process, long after ``ladder`` was imported: the
    cache must be where ``LADDER_CACHE`` says now (on a GPU, where no child process re-reads
    the environment, it once stayed where the import found it)."""
    monkeypatch.setenv("LADDER_CACHE", str(tmp_path))
    assert check.Cache().folder.parent == tmp_path / "check"
    monkeypatch.delenv("LADDER_CACHE")
    assert check.cache_dir() == Path.home() / ".cache" / "ladder" / "check"


def test_the_fingerprint_follows_the_packages_files(tmp_path, monkeypatch):
    package = tmp_path / "ladder"
    (package / "gemm").mkdir(parents=True)
    (package / "gemm" / "r01.cu").write_text("__global__ void k() {}\n")
    (package / "notes.txt").write_text("not a source")
    monkeypatch.setattr(check, "PACKAGE", package)
    fingerprints = []
    for change in (None, ("notes.txt", "still not a source"), ("gemm/r01.cu", "// edited\n")):
        if change:
            (package / change[0]).write_text(change[1])
        check.fingerprint.cache_clear()
        fingerprints.append(check.fingerprint())
    check.fingerprint.cache_clear()
    assert fingerprints[0] == fingerprints[1] != fingerprints[2]


def _limited_sources() -> list[tuple[Rung, cuda_cpp.CudaSource]]:
    """One rung per CUDA C++ source whose range leaves out a generation NVRTC builds for."""
    found: dict[Path, tuple[Rung, cuda_cpp.CudaSource]] = {}
    for r in rungs(references=False):
        source = getattr(sys.modules[r.launch.__module__], "SOURCE", None)
        if isinstance(source, cuda_cpp.CudaSource) and any(
            r.reason_for_cc(g.cc) for g in GENERATIONS
        ):
            found.setdefault(source.path, (r, source))
    return list(found.values())


@pytest.mark.parametrize(
    "case",
    # each is an NVRTC build of seconds: the fast path keeps the first
    [pytest.param(c, marks=quick_unless(i > 0)) for i, c in enumerate(_limited_sources())],
    ids=lambda c: c[0].key,
)
def test_a_cuda_rung_does_not_build_below_its_range_for_the_reason_it_gives(case):
    """The reason a rung gives is the compiler's: built for the generation below its range
    (and for sm_90 without the a, where it needs sm_90a), ptxas names its first instruction."""
    found, source = case
    below = [g.arch for g in GENERATIONS if found.reason_for_cc(g.cc)][-1:]
    targets = below + (["sm_90"] if source.arch_specific else [])
    instruction = found.cc_needs.split()[0].rstrip(",")
    for arch in targets:
        with pytest.raises(cuda_cpp.CudaBuildError) as err:
            source.build(arch, cache=False)
        assert f"'{instruction}" in str(err.value), f"{source.name} for {arch}"


SHARED_LOWERING = r"""
import json, math, re, sys
import numba
from numba import cuda
from ladder.core import check
from ladder.core.rung import arch_cc, get_rung


@cuda.jit(fastmath=True)
def tanh_kernel(x):  # numba-cuda lowers tanh by the compute capability under fastmath
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.tanh(x[i])


def same_code(ptx):  # names differ between compiles: mangled symbols, shared-array counters
    ptx = re.sub(r"_ZN\w+", "NAME", ptx)
    seen = {}
    return re.sub(r"_cudapy_smem_\d+", lambda m: str(seen.setdefault(m.group(0), len(seen))), ptx)


rung = get_rung("gemm", "transposed-tiles")
module = sys.modules[rung.launch.__module__]
((name, tiles),) = check.numba_kernels(module).items()
tiles_signature = check._numba_signature(rung, "float32", module, name)
builds = check.Builds()
found = {}
for kernel, signature in ((tanh_kernel, (numba.float32[::1],)), (tiles, tiles_signature)):
    fastmath = kernel.targetoptions.get("fastmath", False)
    for arch in ("sm_90", "sm_75", "sm_86"):  # lowered for sm_90 first, shared by sm_75
        ours = builds.numba_ptx(kernel, signature, arch)
        theirs, _ = cuda.compile_ptx(kernel.py_func, signature, cc=arch_cc(arch), fastmath=fastmath)
        same = same_code(ours) == same_code(theirs)
        found[f"{kernel.py_func.__name__} {arch}"] = [same, "tanh.approx" in ours]
print(json.dumps(found))
"""


def test_numba_kernels_are_lowered_once_for_every_generation():
    """``ladder check`` lowers a Numba kernel once for sm_75 and later and runs NVVM per
    architecture; the PTX is the one ``compile_ptx`` makes for each, tanh under fastmath
    (whose lowering depends on the compute capability) included."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    done = subprocess.run(
        [sys.executable, "-c", SHARED_LOWERING], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(found) == 6 and all(same for same, _ in found.values()), found
    assert all(approx == name.startswith("tanh") for name, (_, approx) in found.items())


NCU_CSV = """\
==PROF== Connected to process 987 (/usr/bin/python3.12)
==PROF== Disconnected from process 987
"ID","Kernel Name","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed",\
"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","lts__t_sector_hit_rate.pct",\
"sm__inst_executed.sum","sm__inst_executed_pipe_tensor_op_hmma.sum"
"","","ns","%","","%","inst","inst"
"0","wgmma_tma","12,736","1.73","0","76.4","350,381,488","16,000,000"
"1","pad_kernel","1,000","50","3","10","2,000","0"
"""


def test_parse_ncu_csv_reads_kernels_and_units():
    kernels = tools.parse_ncu_csv(NCU_CSV)
    assert [k.kernel for k in kernels] == ["wgmma_tma", "pad_kernel"]
    first = kernels[0].values
    assert first["duration_us"] == pytest.approx(12.736)
    assert first["dram_pct"] == pytest.approx(1.73) and first["bank_conflicts_ld"] == 0
    assert first["sm_pct"] is None  # not in this sample: reported as missing, never as zero
    assert first["warp_instructions"] == 350_381_488 and first["hmma_instructions"] == 16e6
    profile = tools.RungProfile("gemm", "wgmma", 16, "float16", [8, 8, 8], kernels)
    assert profile.duration_us == pytest.approx(13.736)
    assert profile.main_kernel().kernel == "wgmma_tma"


def test_profile_reads_the_metrics_asked_for_and_shows_them():
    """``ladder profile --metrics``: each extra metric under its own name, in the table as a
    column of its own; one the output lacks is missing, not zero."""
    from rich.console import Console

    from ladder.core import report

    extra = ["sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__pipe_tensor_op_gmma.sum"]
    kernels = tools.parse_ncu_csv(NCU_CSV, extra)
    assert kernels[0].values["sm__inst_executed_pipe_tensor_op_hmma.sum"] == 16e6
    assert kernels[0].values["sm__pipe_tensor_op_gmma.sum"] is None
    profile = tools.RungProfile("gemm", "wgmma", 16, "float16", [8, 8, 8], kernels)
    console = Console(width=400, record=True)
    console.print(report.profile_table([profile], "H100"))
    text = console.export_text()
    assert "sm__pipe_tensor_op_gmma.sum" in text and "1.6e+07" in text


SANITIZER_OUT = """\
========= COMPUTE-SANITIZER
@@ladder start gemm naive 1 float32
@@ladder ok
@@ladder start gemm wmma 12 float16
========= Invalid __global__ write of size 4 bytes
=========     at wmma_naive+0x120
========= Error: Race reported between Write access at k+0x100
@@ladder ok
@@ladder start planted planted-race 0 float32
========= Error: Race reported between Write access at planted_race+0x100
@@ladder ok
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
========= ERROR SUMMARY: 2 errors
"""


def test_parse_sanitizer_charges_reports_to_the_rung_that_ran():
    naive, wmma, planted = tools.parse_sanitizer(SANITIZER_OUT, "racecheck")
    assert (naive.rung, naive.errors, naive.checked) == ("naive", 0, True)
    assert (wmma.rung, wmma.errors) == ("wmma", 2)
    assert wmma.messages[0].startswith("Invalid __global__ write")
    assert (planted.problem, planted.errors) == ("planted", 1)  # the summaries are not reports


def test_missing_tools_say_how_to_get_them(monkeypatch, capsys):
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.setattr(tools, "_tool_dirs", lambda: [])
    with pytest.raises(FileNotFoundError, match="Nsight Compute"):
        tools.find_tool("ncu")
    assert cli.main(["profile", "gemm", "wgmma", "--dtype", "float16"]) == 2
    assert "ncu was not found" in capsys.readouterr().err
    assert cli.main(["sanitize", "gemm"]) == 2
    assert "compute-sanitizer was not found" in capsys.readouterr().err


def test_the_rung_below_takes_the_same_dtype():
    from ladder.core.rung import get_rung

    assert tools.rung_below(get_rung("gemm", "wgmma"), "float16").name == "wgmma-descriptors"
    assert tools.rung_below(get_rung("gemm", "tma"), "float16").name == "warp-tile-64"
    assert tools.rung_below(get_rung("gemm", "tma"), "bfloat16") is None  # warp-tile-64: float16
    assert tools.rung_below(get_rung("gemm", "fp16-staging"), "float16") is None
    assert tools.rung_below(get_rung("gemm", "naive"), "float32") is None


def test_sanitize_takes_rungs_and_names_them_to_the_child(monkeypatch, capsys):
    """``ladder sanitize PROBLEM --rungs ...`` runs only those rungs: their names reach the
    child process under the tool; --rungs without a problem, or an unknown rung, is refused
    before the tool runs."""
    assert cli.main(["sanitize", "--rungs", "naive"]) == 2
    assert "ladder sanitize gemm --rungs 6" in capsys.readouterr().err
    assert cli.main(["sanitize", "attention", "--rungs", "no-such-rung"]) == 2
    capsys.readouterr()
    commands = []

    def fake_run(command, **kwargs):
        commands.append(command)
        out = f"{tools.MARK} start attention producer-flash 9 float16\n{tools.MARK} ok\n"
        return subprocess.CompletedProcess(command, 0, out, "")

    monkeypatch.setattr(tools, "find_tool", lambda name: "/bin/compute-sanitizer")
    monkeypatch.setattr(tools.subprocess, "run", fake_run)
    found = tools.sanitize("attention", ["memcheck"], ["producer-flash"])
    assert commands[0][-3:] == ["sanitize", "attention", "producer-flash"]
    assert [(r.rung, r.checked) for r in found] == [("producer-flash", True)]
