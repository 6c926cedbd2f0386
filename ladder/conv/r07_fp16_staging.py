"""FP16 staging: half-precision inputs and outputs, FP32 arithmetic.

What changes: the rung takes float16 input, weights and output (the problem's float16 dtype) and
keeps the input tile in shared memory as half. Each value is converted to FP32 when it is loaded
into a register; every multiply-add and the accumulation stay FP32, and only the stored output is
rounded to half (relative error about 1e-4, against the float16 tolerance of 2e-3). Same kernel
factory as rungs `register-tiled` and `tuned` (``make_kernel(k, config, staged=float16)``), with
tile sizes from the same sweep run on float16 inputs (``r06_tuned.TUNED["float16"]``,
`register-tiled`'s).
Why: half the bytes from DRAM and in shared memory, so a block's tile costs half the shared
memory and more blocks fit on an SM. `tuned` is far from the FP32 peak (18.0% on conv1 and
26.8% on conv2), so what limits it is neither the arithmetic nor, it turns out, DRAM: it
moves conv1's fewest bytes at 0.63 TB/s of the 4.24 TB/s copy bandwidth.
Prediction: little change. The multiply-adds are the same FP32 instructions; conv1 reads
296 MB and writes 1,024 MB in FP32, half that in FP16, which matters only near the memory
floor, and neither layer is near it. To go faster the arithmetic itself must get cheaper.
Measured: on an NVIDIA H200 by ``ladder bench`` (results/nvidia-h200.json): conv1 1.963 ms and
conv2 3.795 ms in float16, against `tuned`'s 2.071 ms and 4.033 ms in float32: 1.05x and 1.06x
(25.78x and 9.51x over `implicit-gemm` in float16, the nearest rung below that runs float16; 6.10x
and 1.87x cuDNN FP32).
Verdict: held: the same FP32 multiply-adds take about the same time. The few percent likely
come from the halved staging loads and shared memory, not from DRAM; no profile separates them,
so that is not yet measured. `tensor-core` moves the arithmetic to the tensor cores.

Lab notes: docs/notes/conv.md#rung-7-fp16-staging
"""

from typing import Any

import numpy as np
from numba.types import float16

from ladder.conv.layers import CONV1, CONV2
from ladder.conv.problem import conv_rung, operands, size_of
from ladder.conv.r05_register_tiled import Config, choose, config_plan, make_kernel
from ladder.conv.r05_register_tiled import launch_config as launch_staged
from ladder.conv.r06_tuned import TUNED, candidates
from ladder.core import timing, tuning
from ladder.core.rung import get_problem, get_rung


def launch_config(config: Config, x: Any, w: Any, out: Any = None, *, stream: Any = 0) -> Any:
    """Rung 5's kernel with ``config`` and the input tile staged as half."""
    x, w, out, _ = operands(x, w, out, ("float16",))
    launch_staged(config, x, w, out, stream=stream, staged=float16)
    return out.obj


def sweep(size: tuple[int, ...]) -> list[dict[str, Any]]:
    """Rung 6's candidates for ``size`` in float16, timed with ``ladder.core.tuning``; fastest
    first. The winners are ``TUNED["float16"]``."""
    size = tuple(size)
    case = timing.prepare(get_problem("conv"), size, "float16")
    return tuning.sweep(get_rung("conv", "fp16-staging"), case, candidates(size), launch_config)


@conv_rung(
    name="fp16-staging",
    parent="tuned",
    title="FP16 inputs and outputs staged as half, FP32 arithmetic",
    dtypes=("float16",),
)
def geometry(x: Any, w: Any, out: Any) -> Any:
    """`register-tiled`'s kernel staged as half, with TUNED["float16"]'s config for this layer."""
    config = choose(size_of(x, w), TUNED["float16"], staged=2)
    return config_plan(x, w, out, config, float16)


# the kernels the rung launches for the two layers, named for `ladder check`
KERNELS = {
    f"{name}_kernel": make_kernel(size[5], TUNED["float16"][size], float16)
    for name, size in (("conv1", CONV1), ("conv2", CONV2))
}
KERNEL_ARGS = {name: lambda x, w, out: (x, w, out, np.int64(0)) for name in KERNELS}
