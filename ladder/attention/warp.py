"""Warp-level steps of the Numba flash rungs, with stand-ins for the CUDA simulator.

The flash rungs give each query row to the 16 lanes of half a warp: the row's max and sum are
combined by four xor shuffles (distances 8, 4, 2, 1 stay inside the half), and a row of
probabilities written to shared memory is read back only by the lanes that wrote it, so a
warp barrier (``syncwarp``) is enough where a block barrier would stall all eight warps.

The simulator has neither shuffles nor warp barriers, and it runs each thread of a block as a
Python thread, so every barrier is expensive there. Its shuffle swaps values through one of two
shared slots per thread, alternating: a thread writes its value, waits at one block barrier and
reads its partner's; the next shuffle writes the other slot, which nobody can still be reading,
since every thread has passed the barrier in between. Its warp barrier is a block barrier.
Both are right only where every thread of the block reaches them, as in these kernels.
"""

from __future__ import annotations

import threading
from typing import Any

from numba import cuda

from ladder.core import device

FULL_MASK = 0xFFFFFFFF  # all 32 lanes take part in every shuffle

if device.simulator():
    _slots: tuple[dict[int, Any], dict[int, Any]] = ({}, {})  # one block at a time runs
    _turn = threading.local()

    def shfl_xor_sync(mask: int, value: Any, lane_mask: int) -> Any:
        """The value of the thread whose index differs by ``lane_mask`` (one block barrier)."""
        thread = threading.current_thread()
        turn = getattr(_turn, "parity", 0)
        _turn.parity = 1 - turn
        _slots[turn][thread.thread_id] = value
        thread.syncthreads()
        return _slots[turn][thread.thread_id ^ lane_mask]

    def syncwarp() -> Any:
        """A block barrier: stronger than a warp barrier, and all the simulator has."""
        threading.current_thread().syncthreads()

else:
    shfl_xor_sync = cuda.shfl_xor_sync

    @cuda.jit(device=True, inline=True)
    def syncwarp() -> None:
        cuda.syncwarp()
