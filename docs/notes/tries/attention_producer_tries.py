"""Rung 9's kernel with 128 keys a tile instead of 64: not a rung yet, to be timed beside rung 9.

``python docs/notes/tries/attention_producer_tries.py --out
results/<gpu>-attention-tries-producer.json`` on an sm_90a GPU. The kernel is
``ladder/attention/r09_producer_flash.cu`` itself with its one constant ``BKV`` set to 128 and
its entry points replaced by the variants below (``source``), built by NVRTC like a rung and
launched through rung 9's own plan
(``attention.tensor_core.plan`` with tensor maps of 128-key boxes), at [B, H, HKV, N] =
[4, 16, 16, 4096], float16, causal and not. Timed and checked against rung 9's output by
``attention_tries.time_variants`` (CUDA events around one launch after writing 256 MB, median
of 30).

Why: with 64 keys a tile, each tile pays fixed costs once per 64 keys (O's rescale, 64
multiplies a thread at d = 128; the row statistics; two mbarrier waits and releases; the wgmma
fences), and S = Q·Kᵀ is a m64n64 product. 128 keys halve those per key and make S m64n128.
The wide-tiles try after rung 8 lost with 128 keys, but it paid for a block barrier per tile
and one block an SM; rung 9 has neither problem. Registers: S doubles to 64 floats and P to
32 registers, so d = 64 can no longer keep four consumers at 112 registers.

- ``r09``: rung 9 as it is (64 keys; 4 consumers at d = 64, 2 at d = 128).
- ``k128``: 128 keys, 2 consumers (128 query rows), 240 registers a consumer.
- ``k128-c3`` (d = 64): 128 keys, 3 consumers (192 rows), 160 registers.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

KEYS = 128
VARIANTS = {  # d -> name -> consumer warpgroups
    64: {"k128": 2, "k128-c3": 3},
    128: {"k128": 2},
}


def source() -> str:
    """Rung 9's .cu with BKV = KEYS and one entry point per variant (rung 9's own removed)."""
    from ladder.attention import r09_producer_flash as r09
    from ladder.core import cuda_cpp

    text = cuda_cpp.inline_includes(Path(r09.__file__).with_name("r09_producer_flash.cu"))
    text, found = re.subn(r"constexpr int BKV = 64;", f"constexpr int BKV = {KEYS};", text)
    assert found == 1, "rung 9's BKV constant moved"
    text, found = re.subn(r"^FLASH_ENTRY\(producer_flash.*$", "", text, flags=re.MULTILINE)
    assert found == 4, "rung 9's entry points moved"
    for d, variants in VARIANTS.items():
        for name, consumers in variants.items():
            regs = r09.consumer_registers(consumers)
            entry = f"try_{name.replace('-', '_')}_d{d}"
            text += f"FLASH_ENTRY({entry}, half, {d}, {consumers}, {regs}, 1)\n"
    return text


def launchers(d: int, q, k, v, out, module, causal: bool) -> dict:
    """Each variant at this head dimension as a no-argument launch into ``out``, its plan
    (and tensor maps) built here, outside the timing."""
    from ladder.attention import r09_producer_flash, tensor_core
    from ladder.attention.problem import operands

    runs = {"r09": lambda: r09_producer_flash.launch(q, k, v, out, causal=causal)}
    ops = operands(q, k, v, out, ("float16",))[:4]
    for name, consumers in VARIANTS[d].items():
        kernel = module.get_function(f"try_{name.replace('-', '_')}_d{d}")
        smem = r09_producer_flash.shared_bytes(d, consumers, KEYS)  # the plan raises the limit
        rows, threads = 64 * consumers, 128 * (consumers + 1)
        masks = tensor_core.plan(*ops, kernel, smem, rows, threads, False, "try", tma_rows=KEYS)
        runs[name] = lambda step=masks[causal]: step(*ops)
    return runs


def main() -> None:
    import cupy
    from attention_tries import time_variants  # beside this file: the same timing

    import ladder  # noqa: F401  (registers the rungs)
    from ladder.core import cuda_cpp

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    build = cuda_cpp.compile_source(source(), "attention_producer_tries.cu", "sm_90a")
    module = cupy.RawModule(path=str(build.path))
    results = time_variants(launchers, module, "r09")
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    report = {"gpu": gpu, "shape": [4, 16, 16, 4096], "dtype": "float16", "runs": results}
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
