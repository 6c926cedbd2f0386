"""Rungs 9 and 10 with 128 keys a tile instead of 64: not rungs yet, timed beside rung 9.

``PYTHONPATH=. python docs/notes/tries/attention_producer_tries.py --out
results/<gpu>-attention-tries-producer.json`` from a checkout, on an sm_90a GPU. Each kernel
is ``ladder/attention/r09_producer_flash.cu`` (or ``r10_pingpong_flash.cu``) itself with its
one constant ``BKV`` set to 128 and its entry points replaced by the variants below
(``source``), built by NVRTC like a rung and launched through rung 9's own plan
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
- ``pp128``, ``pp128-c3``: the same from rung 10's .cu (the consumers take turns): with 128
  keys a tile each consumer's softmax is twice as long, more to hide under another's products.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

KEYS = 128
BASES = {"producer": "r09_producer_flash", "pingpong": "r10_pingpong_flash"}  # base -> its .cu
VARIANTS = {  # d -> name -> (base rung, consumer warpgroups)
    64: {"k128": ("producer", 2), "k128-c3": ("producer", 3), "pp128-c3": ("pingpong", 3)},
    128: {"k128": ("producer", 2), "pp128": ("pingpong", 2)},
}


def source(base: str = "producer") -> str:
    """Rung 9's (``producer``) or rung 10's (``pingpong``) .cu with BKV = KEYS and one entry
    point per variant on that base (the rung's own entry points removed)."""
    from ladder.attention import r09_producer_flash as r09
    from ladder.attention import warp_specialized
    from ladder.core import cuda_cpp

    cu = Path(r09.__file__).with_name(f"{BASES[base]}.cu")
    text = cuda_cpp.inline_includes(cu)
    text, found = re.subn(r"constexpr int BKV = 64;", f"constexpr int BKV = {KEYS};", text)
    assert found == 1, f"{cu.name}'s BKV constant moved"
    text, found = re.subn(rf"^FLASH_ENTRY\({base}_flash.*$", "", text, flags=re.MULTILINE)
    assert found == 4, f"{cu.name}'s entry points moved"
    for d, variants in VARIANTS.items():
        for name, (on, consumers) in variants.items():
            if on == base:
                regs = warp_specialized.consumer_registers(consumers)
                entry = f"try_{name.replace('-', '_')}_d{d}"
                text += f"FLASH_ENTRY({entry}, half, {d}, {consumers}, {regs}, 1)\n"
    return text


def launchers(d: int, q, k, v, out, module, causal: bool) -> dict:
    """Each variant at this head dimension as a no-argument launch into ``out``, its plan
    (and tensor maps) built here, outside the timing."""
    from ladder.attention import r09_producer_flash, warp_specialized
    from ladder.attention.problem import operands

    runs = {"r09": lambda: r09_producer_flash.launch(q, k, v, out, causal=causal)}
    ops = operands(q, k, v, out, ("float16",))[:4]
    for name, (base, consumers) in VARIANTS[d].items():
        kernel = module[base].get_function(f"try_{name.replace('-', '_')}_d{d}")
        masks = warp_specialized.plan(*ops, kernel, consumers, KEYS, "try")
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

    module = {}  # base -> its module
    for base in BASES:
        build = cuda_cpp.compile_source(source(base), f"attention_{base}_tries.cu", "sm_90a")
        module[base] = cupy.RawModule(path=str(build.path))
    results = time_variants(launchers, module, "r09")
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    report = {"gpu": gpu, "shape": [4, 16, 16, 4096], "dtype": "float16", "runs": results}
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
