"""CUDA C++ sources: every .cu file compiles with NVRTC for each of its targets, no GPU needed.

This is what catches a broken kernel source in CI, which has no GPU. Running the kernels is
left to test_gemm.py on a GPU machine.
"""

import pytest

from ladder.core import cuda_cpp
from ladder.core.rung import rungs

rungs()  # imports every rung module, which registers its sources
TARGETS = [(src, arch) for src in cuda_cpp.SOURCES.values() for arch in src.archs]


def test_every_cu_file_is_registered():
    from pathlib import Path

    import ladder

    on_disk = {str(p) for p in Path(ladder.__file__).parent.rglob("*.cu")}
    assert on_disk and on_disk == set(cuda_cpp.SOURCES), "a .cu file without a loader (or back)"


@pytest.mark.slow  # each source takes seconds; `ladder check` compiles them all again in CI
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0].name}-{t[1]}")
def test_source_compiles_with_nvrtc(target):
    src, arch = target
    build = src.build(arch, cache=False)
    assert build.cubin[:4] == b"\x7fELF", "NVRTC returned something other than a cubin"
    assert "warning" not in build.log.lower(), build.log


def test_broken_source_reports_the_compiler_log():
    with pytest.raises(cuda_cpp.CudaBuildError, match="undefined_name"):
        cuda_cpp.compile_source(
            "__global__ void k() { undefined_name(); }", "broken.cu", "sm_80", cache=False
        )


def test_missing_headers_say_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(cuda_cpp, "_places", lambda: [(tmp_path,)])
    cuda_cpp.include_dirs.cache_clear()
    try:
        with pytest.raises(cuda_cpp.CudaBuildError, match=r"pip install 'numba-ladder\[cuda13\]'"):
            cuda_cpp.include_dirs()
    finally:
        cuda_cpp.include_dirs.cache_clear()


def test_compiled_cubins_are_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_cpp, "CACHE_DIR", tmp_path)
    src = next(iter(cuda_cpp.SOURCES.values()))
    first = src.build(src.archs[0])
    assert first.path.is_file() and first.path.parent == tmp_path
    assert src.build(src.archs[0]).cubin == first.cubin


def test_compiling_leaves_python_strings_alone():
    # NVRTC writes its log into the buffer it is given; a one-byte bytes object would be
    # CPython's shared b" ", and every later " ".encode() would then return b"\x00"
    cuda_cpp.compile_source('extern "C" __global__ void k() {}', "empty.cu", "sm_80", cache=False)
    assert chr(32).encode() == bytes([32]) == b"\x20"


def test_local_cu_includes_are_inlined(tmp_path):
    """NVRTC compiles one string: ``#include "x.cu"`` of a file beside it (or in a folder
    beside it) is inlined, nested too; other includes are left to NVRTC, the library's
    ``"ladder/core/cuda/..."`` among them. The conv rungs take their staging and epilogues
    from ladder/conv/tc/ this way."""
    from ladder.conv import r09_wgmma
    from ladder.core.cuda_cpp import inline_includes

    (tmp_path / "inner.cu").write_text("int inner;\n")
    (tmp_path / "middle.cu").write_text('#include "inner.cu"\nint middle;\n')
    (tmp_path / "outer.cu").write_text('#include <cuda_fp16.h>\n#include "middle.cu"\nint x;\n')
    assert inline_includes(tmp_path / "outer.cu") == (
        "#include <cuda_fp16.h>\nint inner;\n\nint middle;\n\nint x;\n"
    )
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.cuh").write_text('#include "b.cuh"\nint a;\n')
    (tmp_path / "lib" / "b.cuh").write_text("int b;\n")
    (tmp_path / "top.cu").write_text('#include "lib/a.cuh"\nint top;\n')
    assert inline_includes(tmp_path / "top.cu") == "int b;\n\nint a;\n\nint top;\n"
    text = r09_wgmma.SOURCE.text()
    assert '#include "tc/' not in text and '#include "r08_tensor_core.cu"' not in text
    assert "void wgmma_window(" in text and "void conv_wgmma(" in text
    assert '#include "ladder/core/cuda/wgmma.cuh"' in text  # through the include path
    (tmp_path / "library.cu").write_text('#include "ladder/core/cuda/mbarrier.cuh"\nint y;\n')
    assert inline_includes(tmp_path / "library.cu") == (
        '#include "ladder/core/cuda/mbarrier.cuh"\nint y;\n'
    )


def test_the_library_is_on_the_include_path():
    """A source anywhere includes the library by its path under the package, as the rungs do."""
    assert (cuda_cpp.INCLUDE_ROOT / "ladder" / "core" / "cuda" / "wgmma.cuh").is_file()
    source = '#include "ladder/core/cuda/fastdiv.cuh"\n'
    source += 'extern "C" __global__ void k(int* n) { n[0] = fast_div(n[0], 0u, 0); }\n'
    build = cuda_cpp.compile_source(source, "includes.cu", "sm_80", cache=False)
    assert build.cubin[:4] == b"\x7fELF"


def test_the_cache_key_holds_the_library(tmp_path, monkeypatch):
    """NVRTC reads the library's headers from the include path, not from the hashed source: a
    cubin built before a header changed is not reused after."""
    monkeypatch.setattr(cuda_cpp, "CACHE_DIR", tmp_path / "cubin")
    source = 'extern "C" __global__ void k(int* n) { n[0] = 1; }\n'
    first = cuda_cpp.compile_source(source, "key.cu", "sm_80")
    library = tmp_path / "library"
    library.mkdir()
    for header in cuda_cpp.LIBRARY.glob("*.cuh"):
        (library / header.name).write_text(header.read_text() + "// changed\n")
    monkeypatch.setattr(cuda_cpp, "LIBRARY", library)
    second = cuda_cpp.compile_source(source, "key.cu", "sm_80")
    assert first.path != second.path and second.path.is_file()
