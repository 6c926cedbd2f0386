"""ladder/core/cuda, the one library of PTX wrappers: each wrapper compiles for the architectures
where its instruction exists and emits that instruction; no source outside the library writes
an instruction the library wraps; and on a GPU each primitive gives NumPy's answer.

Without a GPU the kernels below are compiled by NVRTC, with the project's include path, and
their PTX is read. On a GPU they are built and launched through ``ladder.core.cuda_cpp`` (CuPy),
as the rungs are.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import gpu_only

import ladder
from ladder.core import cuda_cpp

LIBRARY = cuda_cpp.LIBRARY
HEADERS = sorted(p.name for p in LIBRARY.glob("*.cuh"))


def ptx(source: str, arch: str) -> str:
    """The PTX NVRTC makes of ``source`` for ``arch``, with the include path of
    ``cuda_cpp.compile_source`` (the CUDA headers and the folder above the package)."""
    nvrtc = cuda_cpp._nvrtc()
    options = [
        f"--gpu-architecture={arch}",
        "--std=c++17",
        *[f"-I{d}" for d in cuda_cpp.include_dirs()],
        f"-I{cuda_cpp.INCLUDE_ROOT}",
    ]
    program = cuda_cpp._check(
        nvrtc.nvrtcCreateProgram(source.encode(), b"probe.cu", 0, [], []), "create"
    )
    try:
        status = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])[0]
        log = bytearray(cuda_cpp._check(nvrtc.nvrtcGetProgramLogSize(program), "log size"))
        nvrtc.nvrtcGetProgramLog(program, log)
        assert int(status) == 0, log.decode(errors="replace")
        text = bytearray(cuda_cpp._check(nvrtc.nvrtcGetPTXSize(program), "PTX size"))
        nvrtc.nvrtcGetPTX(program, text)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return text.decode().rstrip("\x00")


def probe(header: str, body: str) -> str:
    """A kernel that includes ``header`` (and memory.cuh, for smem_addr) and runs ``body`` with
    a shared buffer ``smem`` at shared address ``s``, outputs ``u`` and ``f``, an input ``h``
    and a descriptor-sized value ``x``."""
    return f"""
#include "ladder/core/cuda/memory.cuh"
#include "ladder/core/cuda/{header}"
extern "C" __global__ void probe(unsigned* u, float* f, const unsigned short* h,
                                 unsigned long long x) {{
  __shared__ __align__(1024) unsigned char smem[8192];
  const unsigned s = smem_addr(smem);
  float d[128] = {{}};
  unsigned a[4] = {{u[0], u[1], u[2], u[3]}};
  {body}
  for (int i = 0; i < 128; ++i) f[i] = d[i];
  u[threadIdx.x] = a[0] + a[1] + a[2] + a[3];
}}
"""


# (header, architecture, the body that calls the wrapper, what its PTX must hold: plain text,
# or a regular expression where it starts with "re:"). One row per wrapper and form.
SM80, SM90, SM90A = "sm_80", "sm_90", "sm_90a"
WGMMA_WIDTHS = (8, 16, 32, 64, 128, 152, 256)
TYPES = (("half", "f16"), ("__nv_bfloat16", "bf16"))


def wgmma_case(body: str, n: int, k: int, types: str, operands: str) -> tuple[str, str, str, str]:
    """A wgmma row: the instruction of width n, depth k and operand type, its accumulator
    list, then ``operands`` (a regular expression: the A and B operands and the immediates)."""
    shape = rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k{k}\.f32\.{types}\.{types}"
    return ("wgmma.cuh", SM90A, body, rf"re:{shape} \{{[^}}]*\}}, {operands};")


CASES = [
    ("memory.cuh", SM80, "a[0] = smem_addr(smem + threadIdx.x);", "mov.u32"),
    ("memory.cuh", SM80, "a[0] = *(const unsigned*)gmem_addr(u + 4);", "cvta.to.global.u64"),
    ("memory.cuh", SM90, "fence_proxy_async();", "fence.proxy.async.shared::cta;"),
    ("memory.cuh", SM80, "a[0] = *opaque(u + 8);", "ld.global"),
    ("memory.cuh", SM80, "st_global_b32(u + 1, a[0]);", "st.global.b32"),
    ("memory.cuh", SM80, "st_shared_b16(s + 2, h[0]);", "st.shared.b16"),
    ("memory.cuh", SM80, "st_shared_b32(s + 4, a[0]);", "st.shared.b32"),
    ("memory.cuh", SM80, "st_shared_f32(s + 4, f[0]);", "st.shared.f32"),
    ("memory.cuh", SM80, "st_shared_v4(s + 16, a[0], a[1], a[2], a[3]);", "st.shared.v4.b32"),
    ("fastdiv.cuh", SM80, "a[0] = fast_div(a[0], a[1], a[2]);", "mul.hi.u32"),
    ("convert.cuh", SM80, "a[0] = pack2<half>(f[0], f[1]);", "cvt.rn.f16x2.f32"),
    ("convert.cuh", SM80, "a[0] = pack2<__nv_bfloat16>(f[0], f[1]);", "cvt.rn.bf16x2.f32"),
    ("convert.cuh", SM80, "store2((half*)u, f[0], f[1]);", "cvt.rn.f16x2.f32"),
    ("convert.cuh", SM80, "store2((__nv_bfloat16*)u, f[0], f[1]);", "cvt.rn.bf16x2.f32"),
    ("convert.cuh", SM80, "a[0] = is_bf16<__nv_bfloat16> && !is_bf16<half>;", "st.global"),
    ("cp_async.cuh", SM80, "cp_async16(s, h);", "cp.async.cg.shared.global [%r"),
    (
        "cp_async.cuh",
        SM80,
        "cp_async16(s, h, a[0] > 1);",
        r"re:cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;",
    ),
    ("cp_async.cuh", SM80, "cp_async_commit();", "cp.async.commit_group;"),
    ("cp_async.cuh", SM80, "cp_async_wait<1>();", "cp.async.wait_group 1;"),
    ("ldmatrix.cuh", SM80, "ldmatrix_x4(a, s);", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
    (
        "ldmatrix.cuh",
        SM80,
        "ldmatrix_x4_trans(a, s);",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
    ),
    (
        "ldmatrix.cuh",
        SM80,
        "a[0] = movmatrix_trans(a[1]);",
        "movmatrix.sync.aligned.m8n8.trans.b16",
    ),
    (
        "mma_sync.cuh",
        SM80,
        "mma_16816(*(float(*)[4])d, a, {a[0], a[1]});",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    ),
    (
        "mma_sync.cuh",
        SM80,
        "mma_16816<__nv_bfloat16>(*(float(*)[4])d, a, {a[0], a[1]});",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    ),
    (
        "mma_sync.cuh",
        SM80,
        "mma_1688(*(float(*)[4])d, {a[0], a[1]}, a[2]);",
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
    ),
    (
        "mbarrier.cuh",
        SM90,
        "mbar_init(s, a[0]);",
        r"re:mbarrier\.init\.shared::cta\.b64 \[%r\d+\], %r",
    ),
    (
        "mbarrier.cuh",
        SM90,
        "mbar_init<1>(s);",
        r"re:mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 1;",
    ),
    ("mbarrier.cuh", SM90, "mbar_fence_init();", "fence.mbarrier_init.release.cluster;"),
    (
        "mbarrier.cuh",
        SM90,
        "mbar_arrive_expect_tx(s, 1024);",
        "mbarrier.arrive.expect_tx.shared::cta.b64 _,",
    ),
    (
        "mbarrier.cuh",
        SM90,
        "mbar_expect_tx(s, 1024);",
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
    ),
    ("mbarrier.cuh", SM90, "mbar_arrive(s);", "mbarrier.arrive.shared::cta.b64 _,"),
    ("mbarrier.cuh", SM90, "mbar_wait(s, a[0] & 1);", "mbarrier.try_wait.parity.shared::cta.b64"),
    (
        "tma.cuh",
        SM90,
        "tma_load(s + 1024, (const TensorMap*)h, s, 64, 128);",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
    ),
    (
        "tma.cuh",
        SM90,
        "tma_load_3d(s + 1024, (const TensorMap*)h, s, 64, 128, 2);",
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
    ),
    (
        "tma.cuh",
        SM90,
        "bulk_load(s + 1024, h, 1024, s);",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
    ),
    ("tma.cuh", SM90, "bulk_store(u, s, 1024);", "cp.async.bulk.global.shared::cta.bulk_group"),
    ("tma.cuh", SM90, "bulk_commit();", "cp.async.bulk.commit_group;"),
    ("tma.cuh", SM90, "bulk_wait_read<0>();", "cp.async.bulk.wait_group.read 0;"),
    ("tma.cuh", SM90, "bulk_wait<0>();", "cp.async.bulk.wait_group 0;"),
    ("warpgroup.cuh", SM80, "bar_sync(1, 128);", "bar.sync"),
    ("warpgroup.cuh", SM80, "bar_arrive(2, 256);", "bar.arrive"),
    ("warpgroup.cuh", SM90A, "setmaxnreg_dec<40>();", "setmaxnreg.dec.sync.aligned.u32 40;"),
    ("warpgroup.cuh", SM90A, "setmaxnreg_inc<232>();", "setmaxnreg.inc.sync.aligned.u32 232;"),
    (
        "wgmma.cuh",
        SM90A,
        "x = wgmma_desc(s, 16, 1024) ^ wgmma_desc(s, 128, 256, WGMMA_SWIZZLE_NONE);"
        " u[5] = (unsigned)(x >> 32);",
        "st.global",
    ),
    ("wgmma.cuh", SM90A, "wgmma_fence();", "wgmma.fence.sync.aligned;"),
    ("wgmma.cuh", SM90A, "wgmma_commit();", "wgmma.commit_group.sync.aligned;"),
    ("wgmma.cuh", SM90A, "wgmma_wait<1>();", "wgmma.wait_group.sync.aligned 1;"),
    ("wgmma.cuh", SM90A, "fence_operands(d);", "st.global.f32"),
    *[
        wgmma_case(
            f"wgmma_ss<{n}, {t}, 0, 1>(d, x, x + 2);", n, 16, p, r"%rd\d+, %rd\d+, 1, 1, 1, 0, 1"
        )
        for n in WGMMA_WIDTHS
        for t, p in TYPES
    ],
    *[
        wgmma_case(
            f"wgmma_ss_fp8<256, {e5m2}>(d, x, x + 2);", 256, 32, p, r"%rd\d+, %rd\d+, 1, 1, 1"
        )
        for e5m2, p in (("false", "e4m3"), ("true", "e5m2"))
    ],
    *[
        wgmma_case(
            f"wgmma_rs<{n}, {t}, {tb}, {str(acc).lower()}>(d, a, x);",
            n,
            16,
            p,
            r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, " + f"{int(acc)}, 1, 1, {tb}",
        )
        for n in WGMMA_WIDTHS
        for t, p in TYPES
        for tb, acc in ((0, True), (1, False))
    ],
]


def case_id(case: tuple[str, str, str, str]) -> str:
    """``header-arch-call``: the body's first call, its template arguments and all."""
    header, arch, body, _ = case
    call = re.search(r"\b(?!a\b|x\b|u\[)(\w+(?:<[^>]*>)?)\(", body)
    first = re.findall(r"[A-Za-z_]\w*", body.split("=", 1)[-1])[0]  # when nothing is called
    name = re.sub(r"[^\w<>,]+", "", call.group(1)) if call else first
    return f"{header[:-4]}-{arch}-{name}-{zlib.crc32(body.encode()) % 1000:03d}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_wrapper_emits_its_instruction(case: tuple[str, str, str, str]) -> None:
    """Each wrapper, in a kernel of its own, built for the first architecture that has its
    instruction (sm_80: mma.sync, ldmatrix, cp.async; sm_90: mbarriers, TMA, the proxy fence;
    sm_90a: wgmma, setmaxnreg): its PTX holds the instruction."""
    header, arch, body, expected = case
    text = ptx(probe(header, body), arch)
    if expected.startswith("re:"):
        assert re.search(expected[3:], text), f"{expected[3:]!r} not in the PTX of {body!r}"
    else:
        assert expected in text, f"{expected!r} not in the PTX of {body!r}"


def library_functions() -> dict[str, str]:
    """Every function a library header defines, by name: the header it is in."""
    found = {}
    for header in HEADERS:
        text = (LIBRARY / header).read_text()
        for name in re.findall(r"^__device__ __forceinline__ [\w:<>* ]*?\b(\w+)\(", text, re.M):
            found[name] = header
    return found


def test_every_wrapper_has_a_case() -> None:
    """A wrapper added to the library without a row in CASES fails here."""
    functions = library_functions()
    assert len(functions) >= 40, functions
    called = {name for _, _, body, _ in CASES for name in re.findall(r"\b(\w+)\s*[<(]", body)}
    assert not set(functions) - called, f"wrappers without a case: {set(functions) - called}"
    for name, header in functions.items():
        assert any(h == header and re.search(rf"\b{name}\b", b) for h, _, b, _ in CASES), name


def test_the_library_compiles_for_every_architecture_it_serves() -> None:
    """Every header together, through compile_source as the rungs are built: the sm_80 ones for
    sm_80 (their templates only instantiated where used), all of them for sm_90a."""
    every = "".join(f'#include "ladder/core/cuda/{h}"\n' for h in HEADERS)
    kernel = 'extern "C" __global__ void k(unsigned* u) { __shared__ unsigned x[4]; '
    kernel += "u[0] = smem_addr(x); }\n"
    for arch in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"):
        build = cuda_cpp.compile_source(every + kernel, "library.cu", arch, cache=False)
        assert build.cubin[:4] == b"\x7fELF"
        assert "warning" not in build.log.lower(), build.log


def asm_statements(text: str) -> list[str]:
    """The text of every asm statement in C++ source ``text`` (to its closing parenthesis),
    comments left out."""
    text = re.sub(r"//[^\n]*", "", text)
    found = []
    for start in re.finditer(r"\basm\b\s*(?:volatile\s*)?\(", text):
        depth, i = 1, start.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        found.append(text[start.start() : i])
    return found


def template(statement: str) -> str:
    """The string literals of an asm statement's template: those before its first colon outside
    a string (PTX's own "::" stays inside them)."""
    literals, i = [], statement.index("(") + 1
    while i < len(statement) and statement[i] != ":":
        if statement[i] == '"':
            end = i + 1
            while statement[end] != '"':
                end += 2 if statement[end] == "\\" else 1
            literals.append(statement[i + 1 : end])
            i = end
        i += 1
    return "".join(literals)


def opcodes(statement: str) -> set[str]:
    """The PTX instructions an asm statement writes, each as its first two dotted parts
    (``mbarrier.try_wait``, ``cp.async``, ``wgmma.mma_async``), and "" for an empty asm (the
    library's register and pointer fences); declarations and selp (mbar_wait's result) are not
    counted."""
    ptx_text = template(statement)
    ptx_text = ptx_text.replace("\\n", ";").replace("{", ";").replace("}", ";")
    found = set()
    for part in ptx_text.split(";"):
        words = part.split()
        if words and not words[0].startswith((".", "selp")):
            found.add(".".join(words[0].split(".")[:2]))
    return found or {""}


def test_wrappers_are_written_once() -> None:
    """No source outside ladder/core/cuda has an asm statement for an instruction the library
    wraps: the rungs call the library."""
    wrapped = set()
    for header in HEADERS:
        for statement in asm_statements((LIBRARY / header).read_text()):
            wrapped |= opcodes(statement)
    assert {
        "mma.sync",
        "wgmma.mma_async",
        "mbarrier.try_wait",
        "cp.async",
        "ldmatrix.sync",
        "",
    } <= wrapped
    root = Path(ladder.__file__).parent
    sources = [p for p in [*root.rglob("*.cu"), *root.rglob("*.cuh")] if LIBRARY not in p.parents]
    assert len(sources) > 30
    offenders = [
        f"{p.relative_to(root)}: {sorted(opcodes(s) & wrapped)} in {' '.join(s.split())[:80]}"
        for p in sources
        for s in asm_statements(p.read_text())
        if opcodes(s) & wrapped
    ]
    assert not offenders, "\n".join(offenders)


def test_the_scan_finds_asm() -> None:
    """asm_statements and opcodes read what a rung would write."""
    text = (
        'x; asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory"); // asm(\n'
    )
    text += 'asm("" : "+l"(p));\n'
    statements = asm_statements(text)
    assert len(statements) == 2
    assert opcodes(statements[0]) == {"mbarrier.arrive"} and opcodes(statements[1]) == {""}


# ---- on a GPU: each primitive once, against NumPy ----


def kernel(tmp_path: Path, name: str, source: str, arch_specific: bool = False):
    """The CuPy kernel ``name`` of ``source``, built as the rungs are (cuda_cpp.CudaSource) for
    this GPU, sm_90a where ``arch_specific``."""
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    return cuda_cpp.CudaSource(path, arch_specific=arch_specific).kernel(name)


def needs_hopper() -> None:
    if cuda_cpp.device_arch() < (9, 0):
        pytest.skip("needs compute capability 9.0 (mbarriers, bulk copies, wgmma: sm_90/sm_90a)")
    if cuda_cpp.device_arch() != (9, 0):
        pytest.skip("wgmma and setmaxnreg are sm_90a only: built for this GPU's own architecture")


def bits16(values: np.ndarray, dtype: str) -> np.ndarray:
    """The 16-bit patterns of ``values`` as ``dtype`` ("half" or "__nv_bfloat16")."""
    if dtype == "half":
        return values.astype(np.float16).view(np.uint16)
    import ml_dtypes

    return values.astype(ml_dtypes.bfloat16).view(np.uint16)


MMA_16816 = r"""
#include "ladder/core/cuda/mma_sync.cuh"
// D = A B + C for one warp: A 16 x 16, B 16 x 8 (k x n), C and D 16 x 8, row-major; the
// fragments built by hand in the layout mma_sync.cuh writes down.
extern "C" __global__ void mma(const unsigned short* A, const unsigned short* B, const float* C,
                               float* D) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto pair = [](unsigned short lo, unsigned short hi) { return lo | (unsigned)hi << 16; };
  const unsigned a[4] = {pair(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                         pair(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                         pair(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                         pair(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
  const unsigned b[2] = {pair(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
                         pair(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
  float d[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                C[(g + 8) * 8 + 2 * t + 1]};
  mma_16816<ELEMENT>(d, a, b);
  D[g * 8 + 2 * t] = d[0];
  D[g * 8 + 2 * t + 1] = d[1];
  D[(g + 8) * 8 + 2 * t] = d[2];
  D[(g + 8) * 8 + 2 * t + 1] = d[3];
}
"""


@gpu_only
@pytest.mark.parametrize("dtype", ["half", "__nv_bfloat16"])
def test_mma_16816_on_the_gpu(tmp_path: Path, dtype: str, rng: np.random.Generator) -> None:
    import cupy

    if cuda_cpp.device_arch() < (8, 0):
        pytest.skip("mma.sync m16n8k16 needs compute capability 8.0")
    # small integers: every product and sum is exact in both types and in FP32
    a = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    b = rng.integers(-4, 5, (16, 8)).astype(np.float32)
    c = rng.integers(-8, 9, (16, 8)).astype(np.float32)
    source = MMA_16816.replace("ELEMENT", dtype)
    mma = kernel(tmp_path, "mma", source)
    d = cupy.full((16, 8), np.nan, cupy.float32)
    mma((1,), (32,), (cupy.asarray(bits16(a, dtype)), cupy.asarray(bits16(b, dtype)),
                      cupy.asarray(c), d))  # fmt: skip
    np.testing.assert_array_equal(d.get(), a @ b + c)


LDMATRIX = r"""
#include "ladder/core/cuda/ldmatrix.cuh"
#include "ladder/core/cuda/memory.cuh"
// tile: 16 x 16 b16, row-major. Matrix i of the x4 load is rows 8 (i % 2) .., columns 8 (i / 2) ..
// (mma's A order); lane l gives the address of row l % 8 of matrix l / 8. out[l][i] and
// out_t[l][i]: register i of lane l, plain and transposed; moved[l]: lane l's word of matrix 0
// (row l / 4, columns 2 (l % 4), + 1) after movmatrix.
extern "C" __global__ void load(const unsigned short* tile, unsigned* out, unsigned* out_t,
                                unsigned* moved) {
  __shared__ __align__(16) unsigned short s[256];
  const int lane = threadIdx.x;
  for (int e = lane; e < 256; e += 32) s[e] = tile[e];
  __syncthreads();
  const int matrix = lane / 8, row = 8 * (matrix % 2) + lane % 8, col = 8 * (matrix / 2);
  unsigned r[4], rt[4];
  ldmatrix_x4(r, smem_addr(&s[row * 16 + col]));
  ldmatrix_x4_trans(rt, smem_addr(&s[row * 16 + col]));
  for (int i = 0; i < 4; ++i) {
    out[lane * 4 + i] = r[i];
    out_t[lane * 4 + i] = rt[i];
  }
  moved[lane] = movmatrix_trans(r[0]);
}
"""


@gpu_only
def test_ldmatrix_x4_on_the_gpu(tmp_path: Path) -> None:
    import cupy

    if cuda_cpp.device_arch() < (8, 0):
        pytest.skip("ldmatrix and movmatrix are built for compute capability 8.0 on here")
    tile = np.arange(256, dtype=np.uint16).reshape(16, 16) * 3 + 7
    load = kernel(tmp_path, "load", LDMATRIX)
    out, out_t, moved = (cupy.zeros(n, cupy.uint32) for n in (128, 128, 32))
    load((1,), (32,), (cupy.asarray(tile), out, out_t, moved))
    expect, expect_t, expect_moved = (np.zeros((32, 4), np.uint32) for _ in range(3))
    word = lambda m, r, c: int(m[r, c]) | int(m[r, c + 1]) << 16  # noqa: E731
    for lane in range(32):
        g, t = divmod(lane, 4)
        for i in range(4):
            m = tile[8 * (i % 2) : 8 * (i % 2) + 8, 8 * (i // 2) : 8 * (i // 2) + 8]
            expect[lane, i] = word(m, g, 2 * t)
            expect_t[lane, i] = word(m.T.copy(), g, 2 * t)
        expect_moved[lane, 0] = word(tile[:8, :8].T.copy(), g, 2 * t)
    np.testing.assert_array_equal(out.get().reshape(32, 4), expect)
    np.testing.assert_array_equal(out_t.get().reshape(32, 4), expect_t)
    np.testing.assert_array_equal(moved.get(), expect_moved[:, 0])


CP_ASYNC = r"""
#include "ladder/core/cuda/cp_async.cuh"
#include "ladder/core/cuda/memory.cuh"
// 64 chunks of 16 bytes global -> shared by 32 threads: chunk lane by the plain form, chunk
// 32 + lane by the zero-filling one (valid for even lanes), over shared memory set to ones.
extern "C" __global__ void copy(const uint4* src, uint4* out) {
  __shared__ __align__(16) uint4 s[64];
  const int lane = threadIdx.x;
  s[lane] = s[32 + lane] = make_uint4(~0u, ~0u, ~0u, ~0u);
  __syncthreads();
  cp_async16(smem_addr(&s[lane]), &src[lane]);
  cp_async_commit();
  cp_async16(smem_addr(&s[32 + lane]), &src[32 + lane], lane % 2 == 0);
  cp_async_commit();
  cp_async_wait<1>();  // the first group has landed (the second may not have)
  const uint4 first = s[lane];
  cp_async_wait<0>();
  __syncthreads();
  out[lane] = first;
  out[32 + lane] = s[32 + lane];
}
"""


@gpu_only
def test_cp_async_on_the_gpu(tmp_path: Path, rng: np.random.Generator) -> None:
    import cupy

    if cuda_cpp.device_arch() < (8, 0):
        pytest.skip("cp.async needs compute capability 8.0")
    src = rng.integers(0, 2**32, (64, 4), dtype=np.uint32)
    copy = kernel(tmp_path, "copy", CP_ASYNC)
    out = cupy.zeros((64, 4), cupy.uint32)
    copy((1,), (32,), (cupy.asarray(src), out))
    expect = src.copy()
    expect[33::2] = 0  # chunks 32 + odd lane: src-size 0, sixteen zero bytes
    np.testing.assert_array_equal(out.get(), expect)


BULK_COPY = r"""
#include "ladder/core/cuda/mbarrier.cuh"
#include "ladder/core/cuda/memory.cuh"
#include "ladder/core/cuda/tma.cuh"
// Three 1 KB regions of src into shared memory by bulk copies: region 0 on barrier 0 (armed by
// arrive.expect_tx), region 1 on barrier 1 (expect_tx, the copy, then the arrival), region 2 on
// barrier 0's second phase (parity 1). Then shared memory -> out by the threads, and -> out2 by
// one bulk store.
extern "C" __global__ void bulk(const unsigned* src, unsigned* out, unsigned* out2) {
  constexpr unsigned BYTES = 1024;
  __shared__ __align__(128) unsigned s[3 * BYTES / 4];
  __shared__ alignas(8) unsigned long long bars[2];
  const unsigned base = smem_addr(s), bar0 = smem_addr(&bars[0]), bar1 = smem_addr(&bars[1]);
  if (threadIdx.x == 0) {
    mbar_init(bar0, 1);
    mbar_init<1>(bar1);
    mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_arrive_expect_tx(bar0, BYTES);
    bulk_load(base, src, BYTES, bar0);
    mbar_expect_tx(bar1, BYTES);
    bulk_load(base + BYTES, src + BYTES / 4, BYTES, bar1);
    mbar_arrive(bar1);
  }
  mbar_wait(bar0, 0);
  mbar_wait(bar1, 0);
  __syncthreads();  // every thread is past phase 0 of bar0 before it is armed again
  if (threadIdx.x == 0) {
    mbar_arrive_expect_tx(bar0, BYTES);
    bulk_load(base + 2 * BYTES, src + 2 * BYTES / 4, BYTES, bar0);
  }
  mbar_wait(bar0, 1);
  for (int i = threadIdx.x; i < 3 * BYTES / 4; i += blockDim.x) out[i] = s[i];
  if (threadIdx.x == 0) {
    bulk_store(out2, base, 3 * BYTES);
    bulk_commit();
    bulk_wait_read<0>();
    bulk_wait<0>();
  }
}
"""


@gpu_only
def test_bulk_copy_on_an_mbarrier_on_the_gpu(tmp_path: Path, rng: np.random.Generator) -> None:
    import cupy

    if cuda_cpp.device_arch() < (9, 0):
        pytest.skip("mbarriers with transaction counts and bulk copies need compute capability 9.0")
    src = rng.integers(0, 2**32, 768, dtype=np.uint32)
    bulk = kernel(tmp_path, "bulk", BULK_COPY)
    out, out2 = cupy.zeros(768, cupy.uint32), cupy.zeros(768, cupy.uint32)
    bulk((1,), (64,), (cupy.asarray(src), out, out2))
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(out.get(), src)
    np.testing.assert_array_equal(out2.get(), src)


TMA = r"""
#include "ladder/core/cuda/mbarrier.cuh"
#include "ladder/core/cuda/memory.cuh"
#include "ladder/core/cuda/tma.cuh"
// One 64 x 64 box of a half matrix at (column 0, row ROW0), 128-byte swizzled into shared
// memory (1024-byte aligned), read back by the threads through the swizzle: out is the box.
extern "C" __global__ void tma(const __grid_constant__ TensorMap map, unsigned short* out,
                               int row0) {
  __shared__ __align__(128) unsigned char raw[8192 + 1024];
  __shared__ alignas(8) unsigned long long bar;
  unsigned char* tile = raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
  if (threadIdx.x == 0) {
    mbar_init(smem_addr(&bar), 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_arrive_expect_tx(smem_addr(&bar), 8192);  // the whole box, zero-filled part included
    tma_load(smem_addr(tile), &map, smem_addr(&bar), 0, row0);
  }
  mbar_wait(smem_addr(&bar), 0);
  for (int e = threadIdx.x; e < 64 * 64; e += blockDim.x) {
    const int r = e / 64, c = e % 64;
    const int at = r * 128 + (((c / 8) ^ (r % 8)) << 4) + (c % 8) * 2;
    out[e] = *reinterpret_cast<const unsigned short*>(tile + at);
  }
}
"""


@gpu_only
def test_tma_load_on_the_gpu(tmp_path: Path, rng: np.random.Generator) -> None:
    import cupy

    from ladder.gemm.hopper import tensor_map

    if cuda_cpp.device_arch() < (9, 0):
        pytest.skip("the bulk tensor copy (TMA) needs compute capability 9.0")
    a = rng.integers(0, 2**16, (128, 64), dtype=np.uint16)  # as half bits: the copy moves bits
    a_dev = cupy.asarray(a)
    tma = kernel(tmp_path, "tma", TMA)
    for row0 in (64, 96):  # the second box reaches past row 127: zeros there
        out = cupy.full((64, 64), 0xFFFF, cupy.uint16)
        tma((1,), (128,), (tensor_map(a_dev.data.ptr, 128, 64, 64, 64), out, np.int32(row0)))
        expect = np.zeros((64, 64), np.uint16)
        expect[: 128 - row0] = a[row0:]
        np.testing.assert_array_equal(out.get(), expect)


WGMMA = r"""
#include "ladder/core/cuda/memory.cuh"
#include "ladder/core/cuda/wgmma.cuh"
// One warpgroup: A (64 x 16) and B (16 x 16, k x n) half into shared memory as K-major core
// matrices without swizzle (8 rows of 16 bytes: 8 consecutive k of one row), the k8 halves 128
// bytes apart (LBO) and the 8-row groups 256 bytes apart (SBO). Then
//   D1 = A B + C   by wgmma_ss (both operands by descriptor, accumulating onto C),
//   D2 = A B       by wgmma_rs (A from registers in mma.sync's A layout, warp w rows 16w ..;
//                  ACCUMULATE false: d's NaNs are ignored),
// written back from the D layout (warp w rows 16w + lane / 4 and + 8; d[4j + 0, 1] columns
// 8j + 2 (lane % 4) + 0, 1 of the first, d[4j + 2, 3] of the second).
__device__ __forceinline__ unsigned core_offset(int row, int k) {
  return (row / 8) * 256 + (k / 8) * 128 + (row % 8) * 16 + (k % 8) * 2;
}
extern "C" __global__ void mma64(const unsigned short* A, const unsigned short* B,
                                 const float* C, float* D1, float* D2) {
  __shared__ __align__(1024) unsigned char sa[64 * 16 * 2];
  __shared__ __align__(1024) unsigned char sb[16 * 16 * 2];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int e = tid; e < 64 * 16; e += 128)
    *reinterpret_cast<unsigned short*>(sa + core_offset(e / 16, e % 16)) = A[e];
  for (int e = tid; e < 16 * 16; e += 128)  // B[k][n]: row n of the K-major layout
    *reinterpret_cast<unsigned short*>(sb + core_offset(e % 16, e / 16)) = B[e];
  fence_proxy_async();  // the stores above (generic proxy) before wgmma's reads (async proxy)
  __syncthreads();
  const unsigned long long da = wgmma_desc(smem_addr(sa), 128, 256, WGMMA_SWIZZLE_NONE);
  const unsigned long long db = wgmma_desc(smem_addr(sb), 128, 256, WGMMA_SWIZZLE_NONE);
  const int r0 = 16 * warp + g, r8 = r0 + 8;
  float d1[8], d2[8];
  for (int j = 0; j < 2; ++j) {
    const int c = 8 * j + 2 * t;
    d1[4 * j] = C[r0 * 16 + c];
    d1[4 * j + 1] = C[r0 * 16 + c + 1];
    d1[4 * j + 2] = C[r8 * 16 + c];
    d1[4 * j + 3] = C[r8 * 16 + c + 1];
    for (int e = 0; e < 4; ++e) d2[4 * j + e] = __int_as_float(0x7fc00000);
  }
  auto pair = [&](int r, int k) { return A[r * 16 + k] | (unsigned)A[r * 16 + k + 1] << 16; };
  const unsigned a[4] = {pair(r0, 2 * t), pair(r8, 2 * t), pair(r0, 2 * t + 8),
                         pair(r8, 2 * t + 8)};
  wgmma_fence();
  wgmma_ss<16, half, 0, 0>(d1, da, db);
  wgmma_rs<16, half, 0, false>(d2, a, db);
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(d1);
  fence_operands(d2);
  for (int j = 0; j < 2; ++j) {
    const int c = 8 * j + 2 * t;
    D1[r0 * 16 + c] = d1[4 * j];
    D1[r0 * 16 + c + 1] = d1[4 * j + 1];
    D1[r8 * 16 + c] = d1[4 * j + 2];
    D1[r8 * 16 + c + 1] = d1[4 * j + 3];
    D2[r0 * 16 + c] = d2[4 * j];
    D2[r0 * 16 + c + 1] = d2[4 * j + 1];
    D2[r8 * 16 + c] = d2[4 * j + 2];
    D2[r8 * 16 + c + 1] = d2[4 * j + 3];
  }
}
"""


@gpu_only
def test_wgmma_m64n16k16_on_the_gpu(tmp_path: Path, rng: np.random.Generator) -> None:
    import cupy

    needs_hopper()
    a = rng.integers(-4, 5, (64, 16)).astype(np.float32)
    b = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    c = rng.integers(-8, 9, (64, 16)).astype(np.float32)
    mma64 = kernel(tmp_path, "mma64", WGMMA, arch_specific=True)
    d1, d2 = cupy.full((64, 16), np.nan, cupy.float32), cupy.full((64, 16), np.nan, cupy.float32)
    args = (cupy.asarray(bits16(a, "half")), cupy.asarray(bits16(b, "half")), cupy.asarray(c))
    mma64((1,), (128,), (*args, d1, d2))
    np.testing.assert_array_equal(d1.get(), a @ b + c)
    np.testing.assert_array_equal(d2.get(), a @ b)
