"""The tensor-core conv rungs' library: CUDA headers (ptx, layout, staging, epilogue, wgmma,
bulk copies) and ``plan.py``, the layout arithmetic and launch. Not a rung: each rung 8-13
includes what it uses."""
