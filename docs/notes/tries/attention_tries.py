"""Tile shapes of the wgmma attention kernel that are not rungs, timed beside rung 8.

``python docs/notes/tries/attention_tries.py --out results/<gpu>-attention-tries.json`` on an
sm_90a GPU. Each variant is ``attention_wide_tiles.cu`` (beside this file: rung 8's kernel with
its tile shape a template parameter) built for one (query rows a block, keys a tile) shape, by
NVRTC like a rung, and launched
through the rungs' own plan (``attention.tensor_core.plan``), at [B, H, HKV, N] =
[4, 16, 16, 4096], float16, causal and not. Timed with CUDA events around one launch after
writing 256 MB (flushing the L2, and long enough for the host to enqueue the launch), median
of 30, and checked against rung 8's output.

- ``r08``: rung 8 as it is (128 rows, 64 keys; two blocks an SM at d = 64).
- ``wide``: 128 keys a tile, with 192 rows (three warpgroups) at d = 64 and 128 at d = 128;
  one block an SM (168 and 217 registers). It was briefly rung 9 (``wide-flash``), and its
  ``ladder run`` files are ``results/*-attention*-wide-tiles-try.json``.
- ``q128-k128`` (d = 64): 128 keys with rung 8's two warpgroups (one block an SM).
- ``q192-k64`` (d = 64): three warpgroups with rung 8's 64-key tile (one block an SM).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
VARIANTS = {  # d -> name -> (query rows a block, keys a tile)
    64: {"wide": (192, 128), "q128-k128": (128, 128), "q192-k64": (192, 64)},
    128: {"wide": (128, 128)},
}


def launchers(d: int, q, k, v, out, module, causal: bool) -> dict:
    """Each variant at this head dimension as a no-argument launch into ``out``, its plan
    built here, outside the timing."""
    from ladder.attention import r08_overlap_flash, tensor_core
    from ladder.attention.problem import operands

    runs = {"r08": lambda: r08_overlap_flash.launch(q, k, v, out, causal=causal)}
    ops = operands(q, k, v, out, ("float16",))[:4]
    for name, (rows, keys) in VARIANTS[d].items():
        kernel = module.get_function(f"try_{name.replace('-', '_')}_d{d}")
        smem = (rows + 4 * keys) * d * 2 + 1024
        threads = rows // 64 * 128
        masks = tensor_core.plan(*ops, kernel, smem, rows, threads, False, "try")
        runs[name] = lambda step=masks[causal]: step(*ops)
    return runs


def time_variants(launchers: Callable[..., dict], module: Any, reference: str) -> list[dict]:
    """Every variant ``launchers(d, q, k, v, out, module, causal)`` returns, at d = 64 and 128,
    causal and not, on the same random float16 inputs: its error relative to the ``reference``
    variant's output, and CUDA-event times of one launch after writing 256 MB (~0.1 ms, which
    flushes the L2 and lets the host enqueue the launch meanwhile), the median of 30."""
    import cupy

    flush = cupy.empty(256 << 20, cupy.uint8)
    results = []
    for d in (64, 128):
        rng = np.random.default_rng(0)
        shape = (4, 16, 4096, d)
        q, k, v = (
            cupy.asarray(rng.standard_normal(shape, np.float32), cupy.float16) for _ in "qkv"
        )
        for causal in (False, True):
            want = cupy.empty_like(q)
            launchers(d, q, k, v, want, module, causal)[reference]()
            out = cupy.empty_like(q)
            for name, run in launchers(d, q, k, v, out, module, causal).items():
                out.fill(cupy.nan)
                run()
                diff = cupy.linalg.norm((out - want).astype(cupy.float32))
                err = float(diff / cupy.linalg.norm(want.astype(cupy.float32)))
                times = []
                for _ in range(30):
                    flush.fill(1)
                    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                    start.record()
                    run()
                    stop.record()
                    stop.synchronize()
                    times.append(cupy.cuda.get_elapsed_time(start, stop))
                row = {"variant": name, "d": d, "causal": causal}
                row |= {"median_ms": float(np.median(times)), "min_ms": float(np.min(times))}
                row[f"rel_err_vs_{reference}"] = err
                print(row, flush=True)
                results.append(row)
    return results


def main() -> None:
    import cupy

    import ladder  # noqa: F401  (registers the rungs)
    from ladder.core import cuda_cpp

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    text = cuda_cpp.inline_includes(HERE / "attention_wide_tiles.cu")
    for d, shapes in VARIANTS.items():
        for name, (rows, keys) in shapes.items():
            text += f"FLASH_ENTRY(try_{name.replace('-', '_')}_d{d}, half, {d}, {rows}, {keys})\n"
    build = cuda_cpp.compile_source(text, "attention_tries.cu", "sm_90a")
    module = cupy.RawModule(path=str(build.path))
    results = time_variants(launchers, module, "r08")
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    report = {"gpu": gpu, "shape": [4, 16, 16, 4096], "dtype": "float16", "runs": results}
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
