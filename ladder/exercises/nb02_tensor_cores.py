"""Exercises for notebook 02 (tensor cores: the FP16 GEMM ladder).

- ``check_bank_conflicts(dict)``: shared-memory bank conflicts of a float32 column read, with
  and without padding, and of ldmatrix's 16-byte rows, with and without a swizzle.
- ``check_fragment_registers(dict)``: 32-bit registers per lane of the A, B and C fragments
  of one ``mma.sync.m16n8k16`` with FP16 inputs and FP32 sums.
- ``check_mma_count(dict)``: mma.sync per k-step for a block tile and for one warp's tile.
- ``check_copy_instructions(dict)``: copy instructions a block issues per 64 of K, with
  ``cp.async`` (`warp-tile-64`) and with the bulk tensor copy (`tma`).
- ``check_copy_waits(dict)``: how many K tiles behind tile t is the tile whose multiplies
  must be done before t's copy is issued, in `wgmma-descriptors` and in `wgmma`.
- ``check_epilogue_sectors(dict)``: the 32-byte sectors one warp store instruction touches in
  `wgmma`'s epilogue and in `smem-epilogue`'s, and how full `wgmma`'s are.
- ``check_fp8_stage(dict)``: what one stage of `fp8` (8-bit floats) holds and feeds, against
  `persistent`'s stage of halves.
- ``check_descriptor_fields(dict)``: decode a shared-memory descriptor `wgmma-descriptors`
  builds: its start address, leading and stride byte offsets and swizzle
  (``gemm.diagrams.draw_wgmma_descriptor``).
- ``check_core_matrix(dict)``: which k16 step and core matrix read one element of A's tile in
  `wgmma-descriptors`, and at which byte the 128-byte swizzle put it.
"""

from __future__ import annotations

from typing import Any

from ladder.core.diagrams import descriptor_fields, swizzle_128
from ladder.exercises._common import WORD, as_dict, bank_ways, require
from ladder.gemm import diagrams as gemm_diagrams

MMA = (16, 8, 16)  # m16n8k16
BLOCK_TILE = (128, 128, 32)  # BM, BN, BK
WARPS = 8  # warp tiles of 64 x 32 (2 x 4 warps)
HALF = 2  # bytes


def check_bank_conflicts(answer: Any) -> str:
    """Give the worst bank conflict ("ways": the most distinct 4-byte words one bank serves in
    one phase; 1 is conflict-free) of four warp-wide shared-memory reads:

    - column: float tile[32][32], lane lane reads tile[l][0];
    - column_padded: the same with tile[32][33];
    - ldmatrix: a half tile of 64 columns (128-byte rows); ldmatrix.x4 gives each lane lane one
      16-byte row to read: row lane % 8, 16-byte chunk lane // 8 (a phase is 8 lanes, 128 bytes);
    - ldmatrix_swizzled: the same, with chunk c of row r stored at chunk c ^ (r % 8)."""
    keys = ("column", "column_padded", "ldmatrix", "ldmatrix_swizzled")
    found = as_dict(answer, keys, "check_bank_conflicts")
    lanes = range(32)
    right = {
        "column": bank_ways(lane * 32 * WORD for lane in lanes),
        "column_padded": bank_ways(lane * 33 * WORD for lane in lanes),
        "ldmatrix": bank_ways(((lane % 8) * 64 * HALF + (lane // 8) * 16 for lane in lanes), 16),
        "ldmatrix_swizzled": bank_ways(
            ((lane % 8) * 64 * HALF + ((lane // 8) ^ (lane % 8)) * 16 for lane in lanes), 16
        ),
    }
    hints = {
        "column": "the bank of word w is w % 32; a row of 32 floats is 32 words",
        "column_padded": "with 33 words per row, row r starts at bank r % 32",
        "ldmatrix": "8 lanes of 16 bytes form one 128-byte phase; where do the 8 rows start, "
        "at 128 bytes apart?",
        "ldmatrix_swizzled": "row r reads chunk c ^ r: which banks do the 8 rows' chunks cover?",
    }
    for key in keys:
        require(found[key] == right[key], f"{key}: {hints[key]}")
    return (
        "right: padding spreads a column over every bank at the cost of a word per row; a "
        "swizzle does it for 16-byte rows at no cost in space (`swizzle`'s ldmatrix)"
    )


def check_fragment_registers(answer: Any) -> str:
    """32-bit registers per lane for one m16n8k16 with FP16 A (16 x 16), B (16 x 8) and FP32
    C (16 x 8), spread evenly over a warp's 32 lanes. Keys: A, B, C."""
    found = as_dict(answer, ("A", "B", "C"), "check_fragment_registers")
    m, n, k = MMA
    right = {
        "A": m * k * HALF // 32 // WORD,
        "B": k * n * HALF // 32 // WORD,
        "C": m * n * 4 // 32 // WORD,
    }
    for key, value in right.items():
        require(
            found[key] == value,
            f"{key}: elements x bytes each / 32 lanes / 4 bytes per register (two halves share "
            "a register)",
        )
    return "right: 4, 2 and 4 registers; a lane's A fragment is one 16-byte load (conv's quad)"


def check_mma_count(answer: Any) -> str:
    """One k-step of a BLOCK_TILE (128 x 128, BK = 32) on m16n8k16: how many mma.sync does the
    block issue, and how many does each of its WARPS warps issue? Keys: block, warp."""
    found = as_dict(answer, ("block", "warp"), "check_mma_count")
    bm, bn, bk = BLOCK_TILE
    m, n, k = MMA
    block = (bm // m) * (bn // n) * (bk // k)
    require(
        found["block"] == block,
        "block: (BM / 16) x (BN / 8) x (BK / 16) tiles, one mma each",
    )
    require(found["warp"] == block // WARPS, "warp: the block's mma shared by its warps")
    return f"right: {block} per block, {block // WARPS} per warp per k-step"


SECTOR = 32  # bytes: the unit in which L2 and DRAM take writes


def check_epilogue_sectors(answer: Any) -> str:
    """One warp store instruction of C (row-major half, rows of many columns, C's rows 16-byte
    aligned). `wgmma`: lane ``lane`` writes 4 bytes, the halves at columns 8j + 2 (lane % 4) and
    + 1 of row lane // 4, for one 8-column group j. `smem-epilogue`: lane ``lane`` writes 16
    bytes, columns 8 lane .. 8 lane + 7 of one row. Keys: direct (32-byte sectors `wgmma`'s
    instruction touches), staged (`smem-epilogue`'s), direct_fill (the share of those sectors'
    bytes `wgmma` writes, a fraction)."""
    found = as_dict(answer, ("direct", "staged", "direct_fill"), "check_epilogue_sectors")
    j = 3
    direct = {(lane // 4, ((8 * j + 2 * (lane % 4)) * HALF) // SECTOR)
              for lane in range(32)}  # fmt: skip
    staged = {(8 * lane * HALF) // SECTOR for lane in range(32)}
    fill = 32 * 4 / (len(direct) * SECTOR)
    require(found["direct"] == len(direct), "direct: which rows do the 32 lanes write, and how "
            "many bytes of each row? 16 aligned bytes sit in one sector")  # fmt: skip
    require(found["staged"] == len(staged), "staged: 32 lanes x 16 bytes of one row, in 32-byte "
            "sectors")  # fmt: skip
    require(abs(float(found["direct_fill"]) - fill) < 1e-9,
            "direct_fill: bytes written / bytes of the sectors touched")  # fmt: skip
    return (f"right: wgmma touches {len(direct)} sectors, {fill:.0%} written each; "
            f"smem-epilogue {len(staged)} whole ones for 4 times the bytes")  # fmt: skip


CP_ASYNC_BYTES = 16  # what one cp.async moves
TMA_BOX_BYTES = 128  # the widest row of a 128-byte-swizzled box


def check_copy_instructions(answer: Any) -> str:
    """A block's tile of C is 128 x 256, and for every 64 of K it needs A's 128 x 64 tile and
    B's 64 x 256, of halves (2 bytes each). Keys: cp_async (instructions the block's threads
    issue in `warp-tile-64`, 16 bytes each), tma (instructions its one copying thread issues in
    `tma`: one box per instruction, a box's rows at most 128 bytes, A as one box of 128
    rows, B as boxes of 64 k-rows)."""
    from ladder.gemm import r19_warp_tile_64 as r19
    from ladder.gemm import r20_tma as r20

    found = as_dict(answer, ("cp_async", "tma"), "check_copy_instructions")
    k = r20.BK
    cp_async = (r19.BM * k + k * r19.BN) * HALF // CP_ASYNC_BYTES
    tma = 1 + r20.BN * HALF // TMA_BOX_BYTES
    require(found["cp_async"] == cp_async, "cp_async: the bytes of both tiles, 16 per copy")
    require(found["tma"] == tma, "tma: A's box is 128 rows x 64 halves; B's rows of 256 halves "
            "are 512 bytes: how many boxes of 128-byte rows?")  # fmt: skip
    return (f"right: {cp_async} copies from {r19.THREADS} threads against {tma} from one; the "
            "addresses and the swizzle are the copy engine's now")  # fmt: skip


def check_copy_waits(answer: Any) -> str:
    """A ring of STAGES = 4 stages; K tile t lives in stage t % 4. `wgmma-descriptors`: in
    iteration kt each warpgroup issues tile kt's wgmma, waits until only that group is in flight
    (``wait_group 1``: tile kt - 1's multiplies are done), all threads meet at
    ``__syncthreads``, then thread 0 copies tile kt + 3 into its stage. `wgmma`: the producer
    copies tile t once the stage's ``empty`` barrier has every consumer's arrival; a consumer
    arrives for tile j after its ``wait_group 1`` in iteration j + 1. Keys: wgmma_descriptors,
    wgmma: for a tile t >= 4, t minus the newest tile whose multiplies must be done before t's
    copy is issued."""
    from ladder.gemm import r22_wgmma as r22

    found = as_dict(answer, ("wgmma_descriptors", "wgmma"), "check_copy_waits")
    stages = r22.STAGES
    # wgmma-descriptors: t = kt + stages - 1, issued after tile kt - 1 is done -> t - stages
    # wgmma: empty[t % stages] completes when tile t - stages is released
    require(found["wgmma_descriptors"] == stages, "wgmma_descriptors: write t = kt + 3; which "
            "tile did wait_group 1 finish in iteration kt?")  # fmt: skip
    require(found["wgmma"] == stages, "wgmma: which tile held the stage before t?")
    return (f"right: {stages} in both. The copy of tile t waits for the same multiplies in "
            "either rung; the block barrier adds only the wait for the slower warpgroup, which "
            "is why warp specialization alone gained little here")  # fmt: skip


def check_fp8_stage(answer: Any) -> str:
    """`fp8` keeps `persistent`'s ring: stages of A's 128 rows and B's 256 columns (as Bᵀ's 256
    rows), each row 128 bytes, 48 KB a stage. Its elements are 1 byte (`persistent`'s 2), and its
    wgmma is m64n256k32: each of the two consumers multiplies its 64 rows by 32 of K per
    instruction. Keys: k_elements (elements of K one stage holds), wgmma (instructions one
    consumer issues per stage), ratio (multiply-adds per stage, `fp8`'s over `persistent`'s)."""
    from ladder.gemm import r24_persistent as r24
    from ladder.gemm import r26_fp8 as r26

    found = as_dict(answer, ("k_elements", "wgmma", "ratio"), "check_fp8_stage")
    k_elements = r26.BK  # persistent's 128-byte rows (r24.BK halves) of 1-byte elements
    wgmma = k_elements // 32
    ratio = (r26.BM * r26.BN * r26.BK) / (r24.BM * r24.BN * r24.BK)
    require(found["k_elements"] == k_elements, "k_elements: a row is still 128 bytes; how many "
            "1-byte elements is that?")  # fmt: skip
    require(found["wgmma"] == wgmma, "wgmma: each instruction takes 32 of K")
    require(found["ratio"] == ratio, "ratio: the tile of C is the same; what about K?")
    return (f"right: {k_elements} of K in {wgmma} instructions a consumer, {ratio:g}x the "
            "multiplies for the same bytes: the copies and barriers cost what they did, the math "
            "per stage doubles, as the tensor cores' 8-bit rate does")  # fmt: skip


# check_descriptor_fields: wgmma-descriptors' descriptor of B, stage 1, k16 step 2 (print in hex)
DESCRIPTOR = gemm_diagrams.wgmma_descriptor("B", stage=1, warpgroup=0, kk=2)
ELEMENT = (13, 42)  # check_core_matrix: (row, k) of a warpgroup's 64 x 64 tile of A


def check_descriptor_fields(answer: Any) -> str:
    """DESCRIPTOR is a 64-bit shared-memory descriptor `wgmma-descriptors` gives wgmma. Its
    fields (PTX ISA, "Matrix Descriptor Format"): bits 0-13 the start address, bits 16-29 the
    leading dimension byte offset (LBO), bits 32-45 the stride byte offset (SBO), each stored as
    bytes >> 4; bits 62-63 the swizzle mode (0 none, 1 the 128-byte swizzle, 2 64-byte, 3
    32-byte). Keys: start_address, lbo, sbo (bytes), swizzle (the swizzle's width in bytes, 0
    for none)."""
    keys = ("start_address", "lbo", "sbo", "swizzle")
    found = as_dict(answer, keys, "check_descriptor_fields")
    right = descriptor_fields(DESCRIPTOR)
    for key in ("start_address", "lbo", "sbo"):
        require(
            found[key] != right[key] >> 4,
            f"{key}: the field holds bytes >> 4 (16-byte units): multiply by 16",
        )
    require(
        (found["lbo"], found["sbo"]) != (right["sbo"], right["lbo"]),
        "lbo, sbo: LBO is bits 16-29, SBO bits 32-45",
    )
    bits = {"start_address": "0-13", "lbo": "16-29", "sbo": "32-45"}
    for key, where in bits.items():
        require(found[key] == right[key], f"{key}: read bits {where} (then x 16)")
    require(found["swizzle"] != 1, "swizzle: mode 1 is the 128-byte swizzle: answer in bytes")
    require(found["swizzle"] == right["swizzle"], "swizzle: bits 62-63 hold the mode")
    return (
        f"right: B's k16 step 2 of stage 1 starts at byte {right['start_address']}; the next 64 "
        f"columns of N are LBO = {right['lbo']} bytes on, the next 8 k-rows SBO = "
        f"{right['sbo']} on, {right['swizzle']}-byte swizzled: one word tells the tensor cores "
        "where all 16 x 256 halves lie"
    )


def check_core_matrix(answer: Any) -> str:
    """`wgmma-descriptors`' stage holds a warpgroup's 64 x BK (64) tile of A as TMA wrote it:
    row r at byte 128 r (BK halves of 2 bytes), then the 128-byte swizzle: the 16-byte chunk c of
    row r is stored at chunk c XOR (r % 8). A k16 step kk reads the 64 x 16 slice k = 16 kk ..
    16 kk + 15 as 8 x 2 core matrices (i, kh) of 8 rows x 8 halves: rows 8i .. 8i + 7, k
    16 kk + 8 kh .. + 7. For A's element (row, k) = ELEMENT = (13, 42): keys kk, core_matrix
    ((i, kh)) and byte (its byte offset in the tile)."""
    found = as_dict(answer, ("kk", "core_matrix", "byte"), "check_core_matrix")
    row, k = ELEMENT
    kk = k // gemm_diagrams.WGMMA_K
    core = (row // gemm_diagrams.CORE_ROWS, k % gemm_diagrams.WGMMA_K // 8)
    byte = gemm_diagrams.a_tile_offset(row, k)
    row_bytes = gemm_diagrams.A_ROW_BYTES
    require(found["kk"] == kk, "kk: a k16 step takes 16 of K")
    given = tuple(found["core_matrix"]) if isinstance(found["core_matrix"], (list, tuple)) else ()
    require(
        given == core,
        "core_matrix: i is the group of 8 rows, kh which 8 of the step's 16 k (k mod 16) // 8",
    )
    unswizzled = row * row_bytes + HALF * k
    require(
        found["byte"] != unswizzled,
        "byte: TMA wrote the tile with the 128-byte swizzle: chunk c of row r sits at chunk "
        "c XOR (r mod 8)",
    )
    require(
        found["byte"] != swizzle_128(row * row_bytes + k),
        f"byte: a half is {HALF} bytes: k = {k} is byte {HALF * k} of its row before the swizzle",
    )
    require(
        found["byte"] == byte,
        "byte: row r starts at 128 r; byte 2k of it lies in chunk 2k // 16, which moves to "
        "chunk (2k // 16) XOR (r % 8); the byte within the chunk stays",
    )
    return (
        f"right: step {kk}, core matrix {core}, byte {byte} (not {unswizzled}): the 8 rows of "
        "a core matrix sit in 8 different 16-byte columns, so wgmma reads them without bank "
        "conflicts"
    )
