"""What the warp-specialized attention rungs (9, 10, 11) share: the register split between the
producer warpgroup and the consumers (``setmaxnreg``), their shared memory, and one plan that
checks the build and launches it. A library, not a rung: each rung passes its kernel, its
consumer warpgroups and its key tile width.

A block is one producer warpgroup (TMA copies of K and V) and ``consumers`` warpgroups of 64
query rows each, launched one block an SM. ``setmaxnreg`` only moves registers the launch
allocated, so the split below is worked out from the launch, and ``check_register_split``
refuses a build that would leave a consumer waiting for registers that never come.
"""

from __future__ import annotations

from typing import Any

from ladder.attention import tensor_core
from ladder.attention.problem import Masks
from ladder.core.fastcall import Operand

PRODUCER_REGS = 24  # registers a producer thread keeps (setmaxnreg.dec, the least there is)
SM_REGISTERS = 65536  # an H100 SM's register file, 32-bit registers
STAGES = 2  # stages each of K and V (the .cu files' STAGES)


def launch_registers(consumers: int) -> int:
    """The registers the launch allocates a block of ``consumers`` consumer warpgroups and the
    producer, one block an SM: the threads times the registers ptxas compiles each for (the
    SM's file over the threads, down to a multiple of 8)."""
    threads = 128 * (consumers + 1)
    return SM_REGISTERS // threads // 8 * 8 * threads


def consumer_registers(consumers: int) -> int:
    """The registers a consumer thread can raise itself to (``setmaxnreg.inc``; the .cu's
    CONSUMER_REGS): setmaxnreg only moves what the launch allocated (``launch_registers``),
    so that less the producer warpgroup's PRODUCER_REGS, over the consumer threads, down to a
    multiple of 8."""
    return (launch_registers(consumers) - 128 * PRODUCER_REGS) // (128 * consumers) // 8 * 8


def shared_bytes(d: int, consumers: int, keys: int) -> int:
    """Dynamic shared memory for ``consumers`` warpgroups and key tiles of ``keys``: the q tile,
    the stages of k and v, one word a consumer thread (the store that keeps the exponentials
    above the wait) and 1 KB of alignment slack."""
    return (64 * consumers + 2 * STAGES * keys) * d * 2 + consumers * 128 * 4 + 1024


def check_register_split(kernel: Any, d: int, rung: str, consumers: int) -> None:
    """Refuse a build whose launch allocates fewer registers than the split hands out: a
    consumer's ``setmaxnreg.inc`` would then wait for registers that never come free, and the
    kernel would hang (ptxas compiles to the launch bound today, which ``consumer_registers``
    assumes)."""
    threads = 128 * (consumers + 1)
    allocated = -(-int(kernel.num_regs) // 8) * 8 * threads  # whole 8-register units a thread
    needed = 128 * PRODUCER_REGS + 128 * consumers * consumer_registers(consumers)
    if allocated < needed:
        raise RuntimeError(
            f"{rung}: the d = {d} kernel was built for {kernel.num_regs} registers a thread, "
            f"{allocated} for the block, but its setmaxnreg split needs {needed}"
        )


def plan(
    q: Operand, k: Operand, v: Operand, out: Operand, kernel: Any, consumers: int, keys: int,
    rung: str,
) -> Masks:  # fmt: skip
    """``kernel`` (built for ``tensor_core.kernel_d`` of q's head dimension, ``consumers``
    warpgroups of 64 query rows and a producer, K and V in tiles of ``keys``) on these operands,
    without and with the causal mask: its register split checked, then ``tensor_core.plan``
    with tensor maps of ``keys``-key boxes."""
    kd = tensor_core.kernel_d(q.shape[3], rung)
    check_register_split(kernel, kd, rung, consumers)
    rows, threads = 64 * consumers, 128 * (consumers + 1)
    smem = shared_bytes(kd, consumers, keys)
    return tensor_core.plan(q, k, v, out, kernel, smem, rows, threads, False, rung, tma_rows=keys)
