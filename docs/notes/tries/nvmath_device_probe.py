#!/usr/bin/env python3
# ruff: noqa: E501  (a probe script, reformatted: its messages are long lines)
"""Probe: can a numba-cuda kernel use tensor cores through nvmath-python's device API
(nvmath.device.Matmul = cuBLASDx via libmathdx, linked into the kernel as LTO-IR)?

One run prints, stage by stage (each wrapped in try/except with the full traceback):
  versions            python/numpy/numba/numba-cuda/cuda-*/nvmath/libmathdx and where each came from
  preload_libmathdx   loads libmathdx.so.0 from a PYTHONPATH entry (pip --target dirs are not
                      searched by cuda.pathfinder, which only scans site-packages)
  import_nvmath       import nvmath.device; libmathdx + NVRTC versions
  device              numba's view of the GPU, nvmath's default LTO code type (sm_90a on H100)
  matmul_object       Matmul(64x64x64, fp16 x fp16 -> fp32 accumulate, Block, 128 threads) + traits
  compile_<k>         host-side compile of kernel <k> (numba + libmathdx/NVRTC LTO-IR) and
                      nvJitLink LTO link to a cubin, then a SASS census: HGMMA = Hopper wgmma,
                      HMMA = mma.sync; either means tensor cores. Needs no GPU.
  correct_<k>         one launch on 4 tiles, relative error vs numpy float64
  time_*              CUDA-event timings, labelled
Kernels: 'tensor' = tensor API (gmem->smem copy with suggested layouts, register accumulator);
         'repeat' = same, MMA repeated R times on the smem tiles (tensor-core issue rate);
         'basic'  = plain 2-D shared arrays + MM.execute(alpha, sA, sB, beta, sC) (runs after the
                    tensor ones: its libmathdx JIT costs ~15 s more; skip with NVMATH_PROBE_SKIP_BASIC=1).
         These three use cuBLASDx's warp-level mma.sync path (SASS HMMA), never wgmma.
  pipeline_wgmma      (only with NVMATH_PROBE_PIPELINE=1; ~2-3 more minutes of host JIT) cuBLASDx's
                      pipeline API (with_pipeline + enable_input_streaming + 16-B alignment on sm_90a),
                      the only path that emits Hopper wgmma (HGMMA) + TMA (UTMALDG): an 8192^3 fp16->fp32
                      GEMM, 128x128x32 tiles, checked on 2 tiles vs numpy float64, timed, vs torch.matmul.
Environment knobs:
  NVMATH_PROBE_NO_GPU=1   compile-only mode for a machine without a GPU (targets NVMATH_PROBE_CC,
                          patches nvmath's and numba's current-device lookups)
  NVMATH_PROBE_CC=90a     target for compile-only mode (default 90a)
  NVMATH_PROBE_BATCH=N    tiles for the batched timing (default 16384)
  NVMATH_PROBE_PIPELINE=1 add the pipeline (wgmma) stage; NVMATH_PROBE_PIPE_SIZE=N its GEMM size (8192)
  OUT=dir                 if set, everything printed is also written to $OUT/nvmath_probe.log
Expect ~1-2 minutes, nearly all of it libmathdx's host-side NVRTC code generation (single-threaded).

How it ran (2026-11-27, an H100; log: results/nvidia-h100-80gb-hbm3-nvmath-device-probe.log):
the GPU machine has no nvmath, so its wheels travelled with the working tree (nvmath-python
1.0.0, nvidia-libmathdx-cu13 0.3.2.6, cuda-pathfinder 1.9.1, cp312 manylinux, 24 MB) and were
installed there with
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl_nvmath/*.whl
  NVMATH_PROBE_SKIP_BASIC=1 NVMATH_PROBE_BATCH=4096 PYTHONPATH=/tmp/site:$PYTHONPATH \
      python nvmath_device_probe.py
NVMATH_PROBE_PIPELINE=1 adds cuBLASDx's pipeline API (wgmma and TMA in the SASS, compiled
here without a GPU); it was not run on the GPU.
"""

import os
import sys
import time
import traceback

T0 = time.time()
NO_GPU = os.environ.get("NVMATH_PROBE_NO_GPU", "") not in ("", "0")
SKIP_BASIC = os.environ.get("NVMATH_PROBE_SKIP_BASIC", "") not in ("", "0")
PIPELINE = os.environ.get("NVMATH_PROBE_PIPELINE", "") not in ("", "0")
S = {}  # state shared between stages
SUMMARY = []

M, N, K = 64, 64, 64
BLOCK_SIZE = 128
FLOP_TILE = 2.0 * M * N * K


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for st in self.streams:
            st.write(s)

    def flush(self):
        for st in self.streams:
            st.flush()


if os.environ.get("OUT") and os.path.isdir(os.environ["OUT"]):
    _log = open(os.path.join(os.environ["OUT"], "nvmath_probe.log"), "w")
    sys.stdout = _Tee(sys.__stdout__, _log)
    sys.stderr = _Tee(sys.__stderr__, _log)


def stage(name):
    """Run the decorated function at once; print OK / FAILED + full traceback; never raise."""

    def deco(fn):
        t = time.time()
        print(f"\n=== [{name}] (t={t - T0:.1f}s)", flush=True)
        try:
            r = fn()
            dt = time.time() - t
            print(f"=== [{name}] OK in {dt:.1f}s", flush=True)
            SUMMARY.append((name, "OK" + (f"  {S.pop('note')}" if "note" in S else ""), dt))
            return r
        except BaseException as e:
            dt = time.time() - t
            print(f"=== [{name}] FAILED in {dt:.1f}s: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
            tb = traceback.extract_tb(e.__traceback__)
            where = " <- ".join(
                f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in tb[::-1][:4]
            )
            msg = str(e).splitlines()[0][:300] if str(e) else ""
            SUMMARY.append((name, f"FAILED: {type(e).__name__}: {msg}  [at {where}]", dt))
            S.pop("note", None)
            return None

    return deco


# --------------------------------------------------------------------------------------
@stage("versions")
def _versions():
    import importlib
    import importlib.metadata as md
    import platform

    print("python", sys.version.replace("\n", " "), platform.machine())
    print("sys.path[:4]", sys.path[:4])
    for dist in [
        "numpy",
        "numba",
        "numba-cuda",
        "llvmlite",
        "cuda-bindings",
        "cuda-core",
        "cuda-pathfinder",
        "cuda-toolkit",
        "nvidia-cuda-nvrtc",
        "nvidia-nvjitlink",
        "nvidia-cuda-cccl",
        "nvmath-python",
        "nvidia-libmathdx-cu13",
        "numba-cuda-mlir",
        "cupy-cuda13x",
        "torch",
    ]:
        try:
            print(f"  dist {dist:24s} {md.version(dist)}")
        except Exception:
            print(f"  dist {dist:24s} (not installed)")
    for mod in [
        "numpy",
        "numba",
        "numba_cuda",
        "cuda.bindings",
        "cuda.core",
        "cuda.pathfinder",
        "nvmath",
    ]:
        try:
            m = importlib.import_module(mod)
            print(
                f"  module {mod:16s} {getattr(m, '__version__', '?'):12s} {getattr(m, '__file__', '?')}"
            )
        except Exception as e:
            print(f"  module {mod:16s} import failed: {type(e).__name__}: {e}")
    print(
        "CUDA_HOME",
        os.environ.get("CUDA_HOME"),
        "CUDA_PATH",
        os.environ.get("CUDA_PATH"),
        "LD_LIBRARY_PATH",
        os.environ.get("LD_LIBRARY_PATH"),
    )


# --------------------------------------------------------------------------------------
@stage("numpy_compat")
def _compat():
    # numpy 2.5 removed np.row_stack; numba-cuda 0.30.x registers an overload for it when
    # numba.cuda.cudaimpl is imported (nvmath.device imports it), which then fails with
    # AttributeError. Same shim as the project's ladder/core/compat.py.
    import numpy as np

    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
        print("numpy", np.__version__, "has no row_stack: aliased np.row_stack = np.vstack")
    else:
        print("numpy", np.__version__, "has row_stack: nothing to do")


# --------------------------------------------------------------------------------------
@stage("preload_libmathdx")
def _preload():
    import ctypes

    from cuda import pathfinder

    # libmathdx.so.0 NEEDs libnvrtc.so.13: let pathfinder load NVRTC first (site-packages or /usr/local/cuda)
    try:
        print("nvrtc:", pathfinder.load_nvidia_dynamic_lib("nvrtc"))
    except Exception as e:
        print("pathfinder could not load nvrtc:", type(e).__name__, e)
    try:
        print("mathdx via pathfinder:", pathfinder.load_nvidia_dynamic_lib("mathdx"))
        return
    except Exception as e:
        print(
            "pathfinder did not find mathdx on its own:", type(e).__name__, str(e).splitlines()[0]
        )
    for p in sys.path:
        f = os.path.join(p or ".", "nvidia", "cu13", "lib", "libmathdx.so.0")
        if os.path.isfile(f):
            ctypes.CDLL(f, mode=ctypes.RTLD_GLOBAL)
            print("preloaded", f)
            # pathfinder's step 0 ("already loaded in this process") now succeeds
            print("mathdx via pathfinder now:", pathfinder.load_nvidia_dynamic_lib("mathdx"))
            return
    raise RuntimeError("libmathdx.so.0 not found under any sys.path entry's nvidia/cu13/lib")


# --------------------------------------------------------------------------------------
@stage("import_nvmath")
def _import_nvmath():
    import nvmath
    import nvmath.device
    from nvmath.bindings import mathdx
    from nvmath.device import common as _c

    print("nvmath", nvmath.__version__, nvmath.__file__)
    print("libmathdx version", mathdx.get_version_ex())
    print(
        "numba extension registered:",
        _c._HAS_NUMBA,
        " numba_cuda_mlir registered:",
        _c._HAS_NUMBA_CUDA_MLIR,
    )
    try:
        from nvmath._utils import get_nvrtc_version

        print("NVRTC version", get_nvrtc_version())
    except Exception as e:
        print("NVRTC version query failed:", type(e).__name__, e)


# --------------------------------------------------------------------------------------
@stage("device")
def _device():
    from nvmath.device.common_cuda import CodeType, ComputeCapability

    if NO_GPU:
        cc = os.environ.get("NVMATH_PROBE_CC", "90a")
        S["cc"] = ComputeCapability(int(cc[0]), int(cc[1]), cc[2:])
        # nvmath's numba lowering asks the *current device* for its LTO target; numba-cuda's
        # device-function dispatchers ask it for the cc. Without a GPU, answer with the target.
        ct = CodeType("lto", S["cc"])
        for modname in [
            "nvmath.device.cublasdx_numba",
            "nvmath.device.common_cuda",
            "nvmath.device.cublasdx",
        ]:
            mod = sys.modules.get(modname)
            if mod is not None and hasattr(mod, "get_default_code_type"):
                mod.get_default_code_type = lambda: ct
        sys.modules["nvmath.device.common_cuda"].get_current_device_cc = lambda: S["cc"]
        import numba.cuda.dispatcher as nd

        class _FakeDev:
            compute_capability = (S["cc"].major, S["cc"].minor)

        nd.get_current_device = lambda: _FakeDev()
        print("NO_GPU mode: target", S["cc"])
        return
    from numba import cuda
    from nvmath.device import current_device_lto

    dev = cuda.get_current_device()
    print("numba device:", dev.name, "cc", dev.compute_capability, "SMs", dev.MULTIPROCESSOR_COUNT)
    ct = current_device_lto()
    print("nvmath current_device_lto():", ct)
    S["cc"] = ct.cc
    S["sms"] = dev.MULTIPROCESSOR_COUNT


# --------------------------------------------------------------------------------------
@stage("matmul_object")
def _matmul():
    import numpy as np
    from nvmath.device import Matmul

    # As examples/device/cublasdx_single_gemm_tensor_performance.py of nvmath-python
    # (64x64x64, block 128, row/col/col) with the mixed precision of
    # cublasdx_simple_gemm_mixed_precision.py (fp16 A, B; fp32 C / accumulator).
    MM = Matmul(
        size=(M, N, K),
        precision=(np.float16, np.float16, np.float32),
        data_type="real",
        arrangement=("row_major", "col_major", "col_major"),
        execution="Block",
        block_size=BLOCK_SIZE,
        sm=S["cc"] if NO_GPU else None,  # None = current device (9.0a on H100)
    )
    S["MM"] = MM
    print(
        "sm",
        MM.sm,
        "block_dim",
        MM.block_dim,
        "ld",
        MM.leading_dimension,
        "alignment",
        MM.alignment,
    )
    print(
        "value types",
        MM.a_value_type,
        MM.b_value_type,
        MM.c_value_type,
        "a/b/c dim",
        MM.a_dim,
        MM.b_dim,
        MM.c_dim,
    )
    la, lb, lc = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b(), MM.suggest_layout_rmem_c()
    S["layouts"] = (la, lb, lc)
    print(
        "suggested smem a/b cosize", la.cosize, lb.cosize, " rmem c cosize (per thread)", lc.cosize
    )
    S["smem_ab"] = MM.get_shared_storage_size_ab(la, lb)
    print(
        "dyn smem A+B (suggested layouts) bytes",
        S["smem_ab"],
        "; basic-API smem A+B+C bytes",
        MM.get_shared_storage_size(),
    )


# --------------------------------------------------------------------------------------
@stage("define_kernels")
def _kernels():
    import numpy as np
    from numba import cuda
    from numba.core import types as nbt
    from nvmath.device import clear, copy, copy_fragment, copy_wait, make_tensor

    MM = S["MM"]
    a_layout, b_layout, c_layout = S["layouts"]
    a_cos, b_cos, c_cos = a_layout.cosize, b_layout.cosize, c_layout.cosize

    # Global data, all C-order numpy: a[t] = A_t (M,K) row-major; b[t] = B_t^T stored (N,K),
    # i.e. B_t (K,N) column-major; out[t] = C_t^T stored (N,M), i.e. C_t (M,N) column-major.

    # tensor API (pattern of examples/device/cublasdx_simple_gemm_tensor_fp32.py)
    def k_tensor(a, b, out):
        t = cuda.blockIdx.x
        smem = cuda.shared.array(shape=(0,), dtype=np.float16, alignment=16)
        smem_a_buffer, smem = smem[:a_cos], smem[a_cos:]
        smem_b_buffer, smem = smem[:b_cos], smem[b_cos:]
        rmem_c_buffer = cuda.local.array(shape=(c_cos,), dtype=MM.c_value_type)
        gmem_a = make_tensor(a[t], MM.get_layout_gmem_a())
        gmem_b = make_tensor(b[t], MM.get_layout_gmem_b())
        gmem_out = make_tensor(out[t], MM.get_layout_gmem_c())
        smem_a = make_tensor(smem_a_buffer, a_layout)
        smem_b = make_tensor(smem_b_buffer, b_layout)
        rmem_c = make_tensor(rmem_c_buffer, c_layout)
        copy(gmem_a, smem_a)
        copy(gmem_b, smem_b)
        clear(rmem_c)
        copy_wait()
        MM.execute(smem_a, smem_b, rmem_c)  # rmem_c += A @ B on tensor cores
        copy_fragment(rmem_c, gmem_out)

    # same, MMA repeated `repeat` times on the same smem tiles (accumulating in registers)
    def k_repeat(a, b, out, repeat):
        t = cuda.blockIdx.x
        smem = cuda.shared.array(shape=(0,), dtype=np.float16, alignment=16)
        smem_a_buffer, smem = smem[:a_cos], smem[a_cos:]
        smem_b_buffer, smem = smem[:b_cos], smem[b_cos:]
        rmem_c_buffer = cuda.local.array(shape=(c_cos,), dtype=MM.c_value_type)
        gmem_a = make_tensor(a[t], MM.get_layout_gmem_a())
        gmem_b = make_tensor(b[t], MM.get_layout_gmem_b())
        gmem_out = make_tensor(out[t], MM.get_layout_gmem_c())
        smem_a = make_tensor(smem_a_buffer, a_layout)
        smem_b = make_tensor(smem_b_buffer, b_layout)
        rmem_c = make_tensor(rmem_c_buffer, c_layout)
        copy(gmem_a, smem_a)
        copy(gmem_b, smem_b)
        clear(rmem_c)
        copy_wait()
        for _ in range(repeat):
            MM.execute(smem_a, smem_b, rmem_c)
        copy_fragment(rmem_c, gmem_out)

    # basic API: plain 2-D shared arrays (pattern of examples/device/cublasdx_simple_gemm_mixed_precision.py)
    def k_basic(a, b, alpha, beta, out):
        t = cuda.blockIdx.x
        smem_a = cuda.shared.array(shape=(M, K), dtype=np.float16)  # row-major A
        smem_b = cuda.shared.array(shape=(N, K), dtype=np.float16)  # col-major B: dims flipped
        smem_c = cuda.shared.array(shape=(N, M), dtype=np.float32)  # col-major C: dims flipped
        tid = cuda.threadIdx.x
        nthr = cuda.blockDim.x
        for i in range(tid, M * K, nthr):
            smem_a[i // K, i % K] = a[t, i // K, i % K]
        for i in range(tid, N * K, nthr):
            smem_b[i // K, i % K] = b[t, i // K, i % K]
        for i in range(tid, N * M, nthr):
            smem_c[i // M, i % M] = 0.0
        cuda.syncthreads()
        MM.execute(alpha, smem_a, smem_b, beta, smem_c)  # C = alpha A@B + beta C
        cuda.syncthreads()
        for i in range(tid, N * M, nthr):
            out[t, i // M, i % M] = smem_c[i // M, i % M]

    f16_3d = nbt.Array(nbt.float16, 3, "C")
    f32_3d = nbt.Array(nbt.float32, 3, "C")
    S["pyfuncs"] = {
        "tensor": (k_tensor, (f16_3d, f16_3d, f32_3d)),
        "repeat": (k_repeat, (f16_3d, f16_3d, f32_3d, nbt.int64)),
        "basic": (k_basic, (f16_3d, f16_3d, nbt.float64, nbt.float64, f32_3d)),
    }
    if not NO_GPU:
        S["kernels"] = {k: cuda.jit(f) for k, (f, _) in S["pyfuncs"].items()}


# --------------------------------------------------------------------------------------
def _find_tool(name):
    import shutil

    for cand in [
        shutil.which(name),
        os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "bin", name),
        f"/usr/local/cuda/bin/{name}",
    ]:
        if cand and os.path.isfile(cand):
            return cand
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        return find_nvidia_binary_utility(name)
    except Exception:
        return None


def _sass_census(cubin, tag):
    import re
    import subprocess

    path = f"/tmp/nvmath_probe_{tag}.cubin"
    with open(path, "wb") as f:
        f.write(cubin)
    print(f"  cubin {len(cubin)} bytes -> {path}")
    tool = _find_tool("cuobjdump")  # cuobjdump -sass needs nvdisasm on PATH too
    if tool is None:
        print("  no cuobjdump found: SASS census skipped")
        S["note"] = "cubin OK, SASS not inspected"
        return
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")
    r = subprocess.run([tool, "-sass", path], capture_output=True, text=True, timeout=120, env=env)
    sass = r.stdout
    if r.returncode != 0 or "fatal" in r.stderr + sass:
        print("  cuobjdump rc", r.returncode, (r.stderr + sass)[-500:])
    ops = {}
    for m in re.finditer(
        r"\b(HGMMA|HMMA|WARPGROUP\.[A-Z]+|LDSM|STSM|LDGSTS|UTMALDG|UBLKCP|SYNCS|FFMA|HFMA2|BAR)\b",
        sass,
    ):
        ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    print("  SASS opcode census:", dict(sorted(ops.items())))
    for line in sass.splitlines():
        if "HGMMA" in line or "HMMA" in line:
            print("   e.g.", " ".join(line.split()[:6])[:160])
            break
    tc = ops.get("HGMMA", 0) + ops.get("HMMA", 0)
    verdict = "YES" if tc else "NO"
    print(
        f"  TENSOR-CORE INSTRUCTIONS in '{tag}': HGMMA={ops.get('HGMMA', 0)} HMMA={ops.get('HMMA', 0)} -> {verdict}"
    )
    S["note"] = (
        f"tensor-core SASS: {verdict} (HGMMA={ops.get('HGMMA', 0)}, HMMA={ops.get('HMMA', 0)})"
    )


def _offline_compile(tag):
    """The steps of numba-cuda's _Kernel.__init__ (compile_cuda with lto=True, kernel_fixup), then
    CUDACodeLibrary.get_cubin (nvJitLink LTO link of numba's LTO-IR with libmathdx's LTO-IR)
    for the target arch. Needs no GPU."""
    from numba.core import types as nbt
    from numba.cuda.compiler import compile_cuda, kernel_fixup

    f, sig = S["pyfuncs"][tag]
    cc = S["cc"]
    cc2 = (cc.major, cc.minor)
    cc3 = (cc.major, cc.minor, cc.arch) if cc.arch else cc2
    t = time.time()
    cres = compile_cuda(
        f,
        nbt.void,
        sig,
        debug=False,
        lineinfo=False,
        fastmath=False,
        nvvm_options={"fastmath": False, "opt": 3},
        cc=cc2,
        lto=True,
    )
    lib = cres.library
    kernel = lib.get_function(cres.fndesc.llvm_func_name)
    lib._entry_name = cres.fndesc.llvm_func_name
    kernel_fixup(kernel, False)
    print(
        f"  numba typing+lowering (incl. libmathdx/NVRTC codegen of the cuBLASDx calls): {time.time() - t:.1f}s;"
        f" LTO-IR objects to link: {len(lib._linking_files)}"
    )
    t = time.time()
    cubin = lib.get_cubin(cc=cc3)
    print(f"  nvJitLink LTO link to cubin for {cc3}: {time.time() - t:.1f}s")
    _sass_census(bytes(cubin.code) if hasattr(cubin, "code") else bytes(cubin), tag)


def _data(batch, seed=0):
    import numpy as np
    from numba import cuda

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, M, K), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((batch, N, K), dtype=np.float32).astype(np.float16)  # = B^T per tile
    return a, b, cuda.to_device(a), cuda.to_device(b), cuda.device_array((batch, N, M), np.float32)


def _relerr(a, b, out, scale=1.0):
    import numpy as np

    ref = scale * np.matmul(
        a.astype(np.float64), b.astype(np.float64).transpose(0, 2, 1)
    )  # (t, M, N)
    got = out.astype(np.float64).transpose(0, 2, 1)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def _launch(tag, grid, args):
    k = S["kernels"][tag]
    if tag == "basic":
        k[grid, BLOCK_SIZE](*args)  # static shared memory
    else:
        k[grid, BLOCK_SIZE, 0, S["smem_ab"]](*args)  # dynamic shared memory for A and B


def _time(fn, reps):
    from numba import cuda

    fn()
    fn()
    cuda.synchronize()
    s, e = cuda.event(), cuda.event()
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    e.synchronize()
    return cuda.event_elapsed_time(s, e) / reps  # ms per launch


def _correct(tag):
    from numba import cuda

    a, b, da, db, dout = _data(4, 1)
    args = (da, db, 1.0, 0.0, dout) if tag == "basic" else (da, db, dout)
    t = time.time()
    _launch(tag, 4, args)
    cuda.synchronize()
    print(
        f"  first launch (numba JIT + nvJitLink, libmathdx results cached by the compile stage): {time.time() - t:.1f}s"
    )
    e = _relerr(a, b, dout.copy_to_host())
    print(f"  '{tag}' kernel, 4 tiles 64x64x64 fp16 -> fp32: rel. error vs numpy float64 = {e:.3e}")
    S["note"] = f"rel.err {e:.2e}"
    assert e < 1e-3, e


BATCH = int(os.environ.get("NVMATH_PROBE_BATCH", "16384"))


def _time_batched(tag):
    from numba import cuda

    a, b, da, db, dout = _data(BATCH, 3)
    bytes_moved = BATCH * (M * K * 2 + N * K * 2 + M * N * 4)
    args = (da, db, 1.0, 0.0, dout) if tag == "basic" else (da, db, dout)
    ms = _time(lambda: _launch(tag, BATCH, args), 20)
    cuda.synchronize()
    e = _relerr(a[:64], b[:64], dout.copy_to_host()[:64])
    line = (
        f"'{tag}': {BATCH} independent 64x64x64 tiles (fp16 in, fp32 out), 1 block of {BLOCK_SIZE} per tile: "
        f"{ms * 1e3:.1f} us/launch (CUDA events, mean of 20) = {BATCH * FLOP_TILE / ms / 1e9:.1f} TFLOP/s, "
        f"{bytes_moved / ms / 1e9:.0f} GB/s of global traffic ({bytes_moved / 1e6:.0f} MB); rel.err {e:.1e}"
    )
    print("  " + line)
    S["note"] = (
        f"{ms * 1e3:.1f} us, {BATCH * FLOP_TILE / ms / 1e9:.1f} TFLOP/s, {bytes_moved / ms / 1e9:.0f} GB/s"
    )


# ------------------------------------------------------------------ pipeline (wgmma) path
# cuBLASDx only emits Hopper wgmma (HGMMA) + TMA through its pipeline API: with_pipeline=True,
# enable_input_streaming=True, sm 9.0a, 16-byte alignment, block 128/256. The plain execute()
# used above is the warp-level mma.sync path (HMMA). Pattern of nvmath-python's
# examples/device/cublasdx_device_gemm_performance_pipeline.py.
PM = PN = PK = int(os.environ.get("NVMATH_PROBE_PIPE_SIZE", "8192"))
TM, TN, TK = 128, 128, 32


def _set_max_dyn_smem(kernel, nbytes, *args):
    import ctypes

    from cuda.bindings import driver as cudadrv
    from numba.cuda.typing import typeof as cuda_typeof

    compiled = kernel.compile(tuple(cuda_typeof.typeof(a) for a in args))
    h = compiled.library.get_cufunc().handle
    if isinstance(h, ctypes.c_void_p):
        h = h.value
    elif isinstance(h, cudadrv.CUkernel):
        err, h = cudadrv.cuKernelGetFunction(h)
        assert err == cudadrv.CUresult.CUDA_SUCCESS, err
    r = cudadrv.cuFuncSetAttribute(
        h, cudadrv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes
    )
    assert r[0] == cudadrv.CUresult.CUDA_SUCCESS, r
    return compiled


def _pipeline_stage():
    import numpy as np
    from numba import cuda
    from nvmath.device import Matmul, axpby, make_tensor
    from nvmath.device.cublasdx import MAX_ALIGNMENT

    t = time.time()
    MMp = Matmul(
        size=(TM, TN, TK),
        precision=(np.float16, np.float16, np.float32),
        data_type="real",
        arrangement=("row_major", "col_major", "row_major"),
        execution="Block",
        block_size=128,
        alignment=MAX_ALIGNMENT,
        with_pipeline=True,
        enable_input_streaming=True,
        static_block_dim=True,
        sm=S["cc"] if NO_GPU else None,
    )
    stage_bytes = TM * TK * 2 + TK * TN * 2 + 16
    avail = 227 * 1024 if NO_GPU else cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    depth = min(16, (avail - 32) // stage_bytes, PK // TK)
    print(
        f"  {PM}x{PN}x{PK} GEMM, tile {TM}x{TN}x{TK}, block 128, pipeline depth {depth}, sm {MMp.sm}"
    )

    def k_pipe(alpha, beta, c, device_pipeline):
        smem = cuda.shared.array(
            shape=(0,), dtype=np.byte, alignment=device_pipeline.buffer_alignment
        )
        bx = cuda.blockIdx.x
        by = cuda.blockIdx.y
        c_tile = c[bx * TM : (bx + 1) * TM, by * TN : (by + 1) * TN]
        gmem_c = make_tensor(c_tile, MMp.get_layout_gmem_c(PN))
        tile_pipeline = device_pipeline.get_tile(smem, bx, by)
        accumulator = MMp.suggest_accumulator()
        tile_pipeline.execute(accumulator)
        tile_pipeline._del()
        if accumulator.is_thread_active():
            d_frag = accumulator.make_partition_and_copy(gmem_c)
            axpby(alpha, accumulator.get_results(), beta, d_frag)
            accumulator.partition_and_copy(d_frag, gmem_c)

    if NO_GPU:
        # No GPU: build the DevicePipeline descriptor by hand (its __init__ allocates GPU storage
        # and launches an init kernel), then compile + link offline as for the other kernels.
        import types as pytypes

        from numba.core import types as nbt
        from numba.cuda.compiler import compile_cuda, kernel_fixup
        from numba.cuda.cudadrv import nvvm
        from numba.cuda.typing.typeof import typeof
        from nvmath.bindings import mathdx
        from nvmath.device.cublasdx import DevicePipeline, _blas_device_pipeline_handle

        dp = DevicePipeline.__new__(DevicePipeline)
        dp.mm, dp.pipeline_depth = MMp, depth
        dp._a_view = pytypes.SimpleNamespace(
            shape=(PM, PK), strides=None, dtype=np.dtype(np.float16)
        )
        dp._b_view = pytypes.SimpleNamespace(
            shape=(PK, PN), strides=(1, PK), dtype=np.dtype(np.float16)
        )
        h = _blas_device_pipeline_handle(dp)
        T = mathdx.CublasdxPipelineTrait
        dp._storage_bytes = int(mathdx.cublasdx_get_pipeline_trait_int64(h, T.STORAGE_BYTES))
        dp._storage_alignment_bytes = int(
            mathdx.cublasdx_get_pipeline_trait_int64(h, T.STORAGE_ALIGNMENT_BYTES)
        )
        dp._buffer_size = int(mathdx.cublasdx_get_pipeline_trait_int64(h, T.BUFFER_SIZE))
        dp._buffer_alignment_bytes = int(
            mathdx.cublasdx_get_pipeline_trait_int64(h, T.BUFFER_ALIGNMENT_BYTES)
        )
        print(
            f"  pipeline traits: buffer {dp._buffer_size} B (align {dp._buffer_alignment_bytes}), "
            f"storage {dp._storage_bytes} B; {time.time() - t:.1f}s"
        )
        t = time.time()
        sig = (nbt.float64, nbt.float64, nbt.Array(nbt.float32, 2, "C"), typeof(dp))
        cres = compile_cuda(
            k_pipe,
            nbt.void,
            sig,
            debug=False,
            lineinfo=False,
            fastmath=False,
            nvvm_options={"fastmath": False, "opt": 3},
            cc=(S["cc"].major, S["cc"].minor),
            lto=True,
        )
        lib = cres.library
        kern = lib.get_function(cres.fndesc.llvm_func_name)
        lib._entry_name = cres.fndesc.llvm_func_name
        kernel_fixup(kern, False)
        nvvm.set_launch_bounds(kern, [128, 1])
        print(
            f"  numba typing+lowering (incl. libmathdx/NVRTC codegen): {time.time() - t:.1f}s; "
            f"LTO-IR objects: {len(lib._linking_files)}"
        )
        t = time.time()
        cubin = lib.get_cubin(cc=(S["cc"].major, S["cc"].minor, S["cc"].arch))
        print(f"  nvJitLink LTO link: {time.time() - t:.1f}s")
        _sass_census(bytes(cubin.code) if hasattr(cubin, "code") else bytes(cubin), "pipeline")
        return

    from nvmath.device.cublasdx_numba import pipeline_extensions

    rng = np.random.default_rng(5)
    a = rng.standard_normal((PM, PK), dtype=np.float32).astype(np.float16)  # row-major A
    b = np.asfortranarray(
        rng.standard_normal((PK, PN), dtype=np.float32).astype(np.float16)
    )  # col-major B
    a_d, b_d = cuda.to_device(a), cuda.to_device(b)
    c_d = cuda.device_array((PM, PN), np.float32)  # row-major C
    dp = MMp.suggest_device_pipeline(depth, a_d, b_d)
    print(
        f"  DevicePipeline: block_dim {dp.block_dim}, buffer {dp.buffer_size} B; setup {time.time() - t:.1f}s"
    )
    kern = cuda.jit(k_pipe, extensions=pipeline_extensions, launch_bounds=[MMp.block_size, 1])
    t = time.time()
    compiled = _set_max_dyn_smem(kern, dp.buffer_size, 1.0, 0.0, c_d, dp)
    print(f"  numba JIT + libmathdx codegen + LTO link: {time.time() - t:.1f}s")
    cubin = compiled.library.get_cubin()
    _sass_census(bytes(cubin.code) if hasattr(cubin, "code") else bytes(cubin), "pipeline")
    note = S.pop("note", "")
    grid = (PM // TM, PN // TN)
    launch = lambda: kern[grid, dp.block_dim, 0, dp.buffer_size](1.0, 0.0, c_d, dp)  # noqa: E731
    launch()
    cuda.synchronize()
    c = c_d.copy_to_host()
    errs = []
    for i, j in [(0, 0), (PM // TM - 1, PN // TN - 1)]:
        ref = a[i * TM : (i + 1) * TM].astype(np.float64) @ b[:, j * TN : (j + 1) * TN].astype(
            np.float64
        )
        got = c[i * TM : (i + 1) * TM, j * TN : (j + 1) * TN]
        errs.append(float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    print(f"  rel. error vs numpy float64 on 2 output tiles: {errs}")
    ms = _time(launch, 10)
    tf = 2.0 * PM * PN * PK / ms / 1e9
    print(
        f"  pipeline GEMM {PM}^3 fp16->fp32: {ms:.3f} ms/launch (CUDA events, mean of 10) = {tf:.1f} TFLOP/s"
    )
    S["note"] = f"{note}; rel.err {max(errs):.1e}; {tf:.1f} TFLOP/s"
    assert max(errs) < 1e-3, errs
    try:
        import torch

        ta = torch.from_numpy(a).cuda()
        tb = torch.from_numpy(np.ascontiguousarray(b)).cuda()
        for _ in range(2):
            torch.matmul(ta, tb)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            torch.matmul(ta, tb)
        e.record()
        torch.cuda.synchronize()
        tms = s.elapsed_time(e) / 10
        print(
            f"  reference torch.matmul fp16 (fp16 out) same size: {tms:.3f} ms = {2.0 * PM * PN * PK / tms / 1e9:.1f} TFLOP/s"
        )
    except Exception as ex:
        print("  torch reference failed:", type(ex).__name__, ex)


# ---------------------------------------------------------------------------------- run
stage("compile_tensor")(lambda: _offline_compile("tensor"))
stage("compile_repeat")(lambda: _offline_compile("repeat"))

if NO_GPU:
    if not SKIP_BASIC:
        stage("compile_basic")(lambda: _offline_compile("basic"))
    if PIPELINE:
        stage("pipeline_wgmma_compile")(_pipeline_stage)
    print("\nNO_GPU mode: no launches.")
else:
    stage("correct_tensor")(lambda: _correct("tensor"))
    stage("time_batched_tensor")(lambda: _time_batched("tensor"))

    @stage("time_repeat_mma")
    def _tr():
        sms = S.get("sms", 132)
        grid = sms * 8
        a, b, da, db, dout = _data(grid, 4)
        times = {
            rep: _time(lambda rep=rep: _launch("repeat", grid, (da, db, dout, rep)), 5)
            for rep in (64, 128)
        }
        e = _relerr(a[:16], b[:16], dout.copy_to_host()[:16], scale=128.0)
        d_ms = times[128] - times[64]
        tflops = grid * 64 * FLOP_TILE / d_ms / 1e9
        print(
            f"  grid {grid} blocks x {BLOCK_SIZE} threads, each block repeating MM.execute on its own smem tiles: "
            f"{times[64] * 1e3:.1f} us (64 reps), {times[128] * 1e3:.1f} us (128 reps)"
        )
        print(
            f"  MARGINAL tensor-core rate from the (128 - 64 reps) difference: {tflops:.1f} TFLOP/s "
            f"(H100 SXM dense fp16 peak ~990 with wgmma; mma.sync reaches less); rel.err of 128*A@B {e:.1e}"
        )
        S["note"] = f"{tflops:.1f} TFLOP/s marginal"

    @stage("torch_bmm_baseline")
    def _tt():
        import torch

        a = torch.randn(BATCH, M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(BATCH, K, N, device="cuda", dtype=torch.float16)
        for _ in range(3):
            torch.bmm(a, b)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            torch.bmm(a, b)
        e.record()
        torch.cuda.synchronize()
        ms = s.elapsed_time(e) / 20
        print(
            f"  torch.bmm fp16 (fp16 out) on the same {BATCH} 64x64x64 tiles: {ms * 1e3:.1f} us = "
            f"{BATCH * FLOP_TILE / ms / 1e9:.1f} TFLOP/s (reference only)"
        )
        S["note"] = f"{ms * 1e3:.1f} us, {BATCH * FLOP_TILE / ms / 1e9:.1f} TFLOP/s"

    if not SKIP_BASIC:
        stage("compile_basic")(lambda: _offline_compile("basic"))
        stage("correct_basic")(lambda: _correct("basic"))
        stage("time_batched_basic")(lambda: _time_batched("basic"))
    if PIPELINE:
        stage("pipeline_wgmma")(_pipeline_stage)

print("\n=== SUMMARY (total %.1fs)" % (time.time() - T0))
for name, status, dt in SUMMARY:
    print(f"  {name:20s} {dt:6.1f}s  {status}")
sys.stdout.flush()
