"""Rung 11 with its idle consumer warpgroups sent home: not a rung yet, timed beside rung 11.

``PYTHONPATH=. python docs/notes/tries/attention_idle_tries.py --out
results/<gpu>-attention-tries-idle.json`` from a checkout, on an sm_90a GPU. The kernel is
``ladder/attention/r11_wide_keys_flash.cu`` itself with the substitutions of ``source``, built
by NVRTC like a rung and launched through rung 11's own plan, at [B, H, HKV, N] =
[4, 16, 16, 4096], float16, causal and not; timed and checked against rung 11's output by
``attention_tries.time_variants`` (CUDA events around one launch after writing 256 MB, median
of 30).

Why: at d = 64 rung 11's blocks hold 192 query rows, and 4096 does not divide into 192: each
head's last block has 64 rows below N and two warpgroups of rows past N, which compute whole
tiles of padding (Nsight: 3.1% more wgmma than 0.75x rung 9's). Under the causal mask that
last block is the heaviest one (every key), and it runs first. Here a consumer warpgroup whose
rows all lie past N returns at once, and the "empty" barriers count only the consumers that
stay (``active``), so the producer never waits for the ones that left.

- ``r11``: rung 11 as it is.
- ``skip-idle``: the same with idle consumers returning (no change at d = 128, where 128 rows
  divide 4096: there it only checks that nothing is lost).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

SUBSTITUTIONS = [  # (pattern, replacement, times it must match)
    (
        r"(  const int tiles = \(kv_len \+ BKV - 1\) / BKV;\n)",
        r"\1  const int active = min(CONSUMERS, (N - row0 + 63) / 64);  // rows below N\n",
        1,
    ),
    (r"CONSUMERS \* 128\);", "active * 128);", 2),  # the two "empty" barriers
    (
        r"(  const int wg = warp / 4;.*\n)",
        r"\1  if (wg >= active) return;  // every row past N: nothing to compute or release\n",
        1,
    ),
]


def source() -> str:
    """Rung 11's .cu with the substitutions and one entry point per head dimension."""
    from ladder.attention import r09_producer_flash as r09
    from ladder.attention import r11_wide_keys_flash as r11
    from ladder.core import cuda_cpp

    text = cuda_cpp.inline_includes(Path(r11.__file__).with_name("r11_wide_keys_flash.cu"))
    for pattern, replacement, times in SUBSTITUTIONS:
        text, found = re.subn(pattern, replacement, text)
        assert found == times, f"rung 11's source moved: {pattern!r} matched {found} times"
    text, found = re.subn(r"^FLASH_ENTRY\(wide_keys_flash.*$", "", text, flags=re.MULTILINE)
    assert found == 4, "rung 11's entry points moved"
    for d, consumers in r11.CONSUMERS.items():
        regs = r09.consumer_registers(consumers)
        text += f"FLASH_ENTRY(try_skip_idle_d{d}, half, {d}, {consumers}, {regs}, 1)\n"
    return text


def launchers(d: int, q, k, v, out, module, causal: bool) -> dict:
    """Rung 11 and the variant at this head dimension as no-argument launches into ``out``,
    their plans (and tensor maps) built here, outside the timing."""
    from ladder.attention import r09_producer_flash as r09
    from ladder.attention import r11_wide_keys_flash as r11
    from ladder.attention import tensor_core
    from ladder.attention.problem import operands

    runs = {"r11": lambda: r11.launch(q, k, v, out, causal=causal)}
    ops = operands(q, k, v, out, ("float16",))[:4]
    consumers = r11.CONSUMERS[d]
    kernel = module.get_function(f"try_skip_idle_d{d}")
    smem = r09.shared_bytes(d, consumers, r11.BKV)
    rows, threads = 64 * consumers, 128 * (consumers + 1)
    masks = tensor_core.plan(*ops, kernel, smem, rows, threads, False, "try", tma_rows=r11.BKV)
    runs["skip-idle"] = lambda step=masks[causal]: step(*ops)
    return runs


def main() -> None:
    import cupy
    from attention_tries import time_variants  # beside this file: the same timing

    import ladder  # noqa: F401  (registers the rungs)
    from ladder.core import cuda_cpp

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    build = cuda_cpp.compile_source(source(), "attention_idle_tries.cu", "sm_90a")
    module = cupy.RawModule(path=str(build.path))
    results = time_variants(launchers, module, "r11")
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    report = {"gpu": gpu, "shape": [4, 16, 16, 4096], "dtype": "float16", "runs": results}
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
