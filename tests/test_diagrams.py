"""The diagrams render without a GPU, draw what the rungs' constants say, and keep their labels
apart. Each test checks a fact of the picture that comes from a rung constant."""

from __future__ import annotations

import functools
import io
import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from ladder.attention import diagrams as attention_diagrams
from ladder.attention import r03_flash, r05_tensor_core_flash
from ladder.conv import diagrams as conv_diagrams
from ladder.conv import layers
from ladder.core import diagrams as dg
from ladder.gemm import diagrams as gemm_diagrams
from ladder.gemm import r05_register_blocked_2d as r05
from ladder.gemm import r07_transposed_tiles as r07
from ladder.gemm import r08_interleaved_columns as r08
from ladder.gemm import r10_warp_tiling as r10
from ladder.gemm import r17_mma_sync as r17
from ladder.gemm import r18_swizzle as r18
from ladder.gemm import r22_wgmma as r22
from ladder.gemm import r23_smem_epilogue as r23
from ladder.gemm import r24_persistent as r24

RESULTS = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200.json"

FIGURES: dict[str, Callable[[], Figure]] = {
    "warp_tiling": gemm_diagrams.warp_tiling,
    "bank_conflicts": gemm_diagrams.bank_conflicts,
    "swizzle": gemm_diagrams.swizzle,
    "mma_fragments": gemm_diagrams.mma_fragments,
    "wgmma_ring": gemm_diagrams.wgmma_ring,
    "epilogue_stores": gemm_diagrams.epilogue_stores,
    "flash_tiles": attention_diagrams.flash_tiles,
    "online_softmax": attention_diagrams.online_softmax,
    "backward_tiles": attention_diagrams.backward_tiles,
    "overlap_timeline": attention_diagrams.overlap_timeline,
    "producer_pipeline": attention_diagrams.producer_pipeline,
    "implicit_gemm": conv_diagrams.implicit_gemm,
    "draw_quads": conv_diagrams.draw_quads,
    "draw_jobs": conv_diagrams.draw_jobs,
    "draw_filters_on_m": conv_diagrams.draw_filters_on_m,
    "draw_wgmma_descriptor": gemm_diagrams.draw_wgmma_descriptor,
    "roofline_gemm": lambda: dg.roofline(RESULTS, "gemm"),
    "roofline_conv": lambda: dg.roofline(RESULTS, "conv"),
    "roofline_attention": lambda: dg.roofline(RESULTS, "attention"),
}


def patches(fig: Figure, gid: str) -> list:
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == gid]


def drawn_texts(fig: Figure) -> list[Text]:
    """Every text the figure draws: tick labels only where their tick is inside the view."""
    ticks, out = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * abs(hi - lo)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks.update({id(tick.label1), id(tick.label2)})
                inside = lo - slack <= tick.get_loc() <= hi + slack
                if ax.axison and tick.get_visible() and inside:
                    out += [tick.label1, tick.label2]
    out += [t for t in fig.findobj(Text) if id(t) not in ticks]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize("name", list(FIGURES))
def test_renders_with_labels_apart_and_inside(name: str) -> None:
    fig = FIGURES[name]()
    assert isinstance(fig, Figure)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert buffer.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.get_size_inches()[0] == pytest.approx(dg.FIG_WIDTH)
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in drawn_texts(fig)]
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        overlap_x = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        overlap_y = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        assert overlap_x <= 0 or overlap_y <= 0, f"{a!r} overlaps {b!r}"
    width, height = fig.bbox.width, fig.bbox.height
    for text, box in boxes:
        assert box.x0 >= -1 and box.y0 >= -1, f"{text!r} leaves the figure"
        assert box.x1 <= width + 1 and box.y1 <= height + 1, f"{text!r} leaves the figure"


def test_warp_tiling_draws_rung_8s_tiles() -> None:
    c = r10.DEFAULT
    fig = gemm_diagrams.warp_tiling()
    warps = (r10.BM // r10.WM) * (r10.BN // r10.WN)
    assert len(patches(fig, "warp-tile")) == warps == r10.THREADS // r10.WARP
    assert len(patches(fig, "sub-tile")) == c.wmiter * c.wniter
    assert len(patches(fig, "thread-tile")) == r10.WARP * c.wmiter * c.wniter
    assert len(patches(fig, "lane0-outputs")) == warps * c.wmiter * c.wniter
    for tile in patches(fig, "thread-tile"):
        assert (tile.get_width(), tile.get_height()) == (r10.TN, r10.TM)
    assert f"{r10.BM} × {r10.BN}" in fig.axes[0].get_title()


def test_bank_conflicts_register_blocked_2d_then_transposed_and_interleaved() -> None:
    assert dg.conflict_degree(gemm_diagrams.b_read_adjacent()) > 1
    assert dg.conflict_degree(gemm_diagrams.b_read_interleaved()) == 1
    assert dg.conflict_degree(gemm_diagrams.a_store_transposed(r07.BM)) > 1  # without the pad
    assert dg.conflict_degree(gemm_diagrams.a_store_transposed(r07.AS_ROW)) == 1
    assert r07.AS_ROW == r07.BM + r07.PAD and r05.BN == r07.BN == r08.BN
    assert (r07.AS_ROW, r07.PAD) == (r08.AS_ROW, r08.PAD)
    fig = gemm_diagrams.bank_conflicts()
    drawn = []
    for ax in fig.axes:
        passes = max(int(p.get_y()) for p in ax.patches if p.get_gid() == "bank-cell") + 1
        title = ax.get_title()
        stated = 1 if "conflict-free" in title else int(re.search(r"(\d+)-way", title).group(1))
        assert passes == stated
        drawn.append(passes)
    assert drawn[0] > 1 and drawn[1] == 1 and drawn[2] > 1 and drawn[3] == 1
    assert drawn[0] == 4  # register-blocked-2d's docstring: B's reads "(4-way)"
    assert drawn[2] == 8  # transposed-tiles' docstring: without the pad "8-way"


# The swizzles as r18_swizzle.cu and r19_warp_tile_64.cu write them (stated once, here): the
# diagram derives them from r18.BK and r18.BN and must agree.
CU_SWIZZLE_A = lambda row, chunk: chunk ^ ((row >> 1) & 3)  # noqa: E731
CU_SWIZZLE_B = lambda row, chunk: chunk ^ (row & 7)  # noqa: E731


def test_swizzle_matches_the_rung_and_padding_costs_bytes() -> None:
    a_row, b_row = r18.BK * 2, r18.BN * 2
    derived_a, derived_b = gemm_diagrams.swizzle_rule(a_row), gemm_diagrams.swizzle_rule(b_row)
    for row in range(r18.BM):
        for chunk in range(a_row // 16):
            assert derived_a(row, chunk) == CU_SWIZZLE_A(row, chunk)
    for row in range(r18.BK):
        for chunk in range(b_row // 16):
            assert derived_b(row, chunk) == CU_SWIZZLE_B(row, chunk)
    for row_bytes in (a_row, b_row):
        assert len(set(gemm_diagrams.ldmatrix_groups(row_bytes, "plain"))) < 8
        assert len(set(gemm_diagrams.ldmatrix_groups(row_bytes, "swizzled"))) == 8
        padded = gemm_diagrams.ldmatrix_groups(row_bytes, "padded", pad_bytes=r17.PAD * 2)
        assert len(set(padded)) == 8
    fig = gemm_diagrams.swizzle()
    titles = [ax.get_title() for ax in fig.axes]
    assert ["conflict-free" in t for t in titles] == [False, True, True] * 2
    pad_bytes = (r18.BM + r18.BK) * r17.PAD * 2
    assert f"padding costs {pad_bytes:,} B" in fig.get_suptitle()
    assert len(patches(fig, "chunk")) == 6 * 8


def test_mma_fragments_cover_each_element_once() -> None:
    layout = gemm_diagrams.mma_layout()
    m, n, k = gemm_diagrams.MMA_M, gemm_diagrams.MMA_N, gemm_diagrams.MMA_K
    expected = {"A": (m, k, 4 * 2), "B": (k, n, 2 * 2), "C": (m, n, 4)}
    for name, (rows, cols, per_lane) in expected.items():
        owners = layout[name].reshape(-1, 3)
        assert layout[name].shape[:2] == (rows, cols)
        assert (owners >= 0).all(), f"{name}: an element nobody holds"
        assert len({tuple(o) for o in owners}) == rows * cols == 32 * per_lane
        lanes, counts = np.unique(owners[:, 0], return_counts=True)
        assert list(lanes) == list(range(32)) and set(counts) == {per_lane}
    a = layout["A"]
    for lane in range(32):  # the PTX layout, spot-checked per lane
        g, t = divmod(lane, 4)
        assert tuple(a[g, 2 * t]) == (lane, 0, 0) and tuple(a[g + 8, 2 * t + 9]) == (lane, 3, 1)
        assert tuple(layout["B"][2 * t + 8, g]) == (lane, 1, 0)
        assert tuple(layout["C"][g + 8, 2 * t + 1]) == (lane, 3, 0)
    fig = gemm_diagrams.mma_fragments()
    assert len(patches(fig, "A-element")) == m * k
    assert len(patches(fig, "B-element")) == k * n
    assert len(patches(fig, "C-element")) == m * n


def test_wgmma_ring_uses_rung_16s_stages() -> None:
    k_tiles = 3 * r22.STAGES
    tiles = gemm_diagrams.ring_schedule(r22.STAGES, k_tiles)
    for t in tiles:
        assert t["stage"] == t["tile"] % r22.STAGES
        assert t["copy_start"] < t["full"] <= t["mma_start"] < t["mma_end"]
        if t["tile"] >= r22.STAGES:  # waits for the stage's empty barrier
            assert t["copy_start"] >= tiles[t["tile"] - r22.STAGES]["released"]
    for moment in sorted({t["copy_start"] for t in tiles}):
        resident = [t for t in tiles if t["copy_start"] <= moment < t["released"]]
        assert len(resident) <= r22.STAGES
    assert (
        max(  # the ring does fill
            sum(t["copy_start"] <= x < t["released"] for t in tiles)
            for x in (t["copy_start"] for t in tiles)
        )
        == r22.STAGES
    )
    fig = gemm_diagrams.wgmma_ring(k_tiles)
    stage_rows = {p.get_y() for p in patches(fig, "stage-full")}
    assert len(stage_rows) == r22.STAGES
    assert len(patches(fig, "full-arrow")) == k_tiles
    assert len(patches(fig, "empty-arrow")) == k_tiles - r22.STAGES
    assert f"STAGES = {r22.STAGES}" in fig.axes[0].get_title()


def test_persistent_timeline_copies_under_the_epilogue() -> None:
    """`persistent`'s model: the next tile's copies start before the last tile's epilogue ends,
    so each tile edge saves the launch and the ring's fill (one copy) against `smem-epilogue`'s."""
    tiles, k_tiles = 3, 6
    per_block = gemm_diagrams.tiles_schedule(False, tiles, k_tiles)
    stays = gemm_diagrams.tiles_schedule(True, tiles, k_tiles)
    for run, persistent in ((per_block, False), (stays, True)):
        ks = run["k_tiles"]
        assert len(ks) == tiles * k_tiles
        for i, t in enumerate(ks):
            assert t["copy_start"] < t["full"] <= t["mma_start"] < t["mma_end"] <= t["released"]
            it = i if persistent else t["k"]  # the producer's counter
            assert t["stage"] == it % r24.STAGES
            if it >= r24.STAGES:  # the stage's last K tile was released first
                assert t["copy_start"] >= ks[i - r24.STAGES]["released"]
        for before, after in zip(run["epilogues"], run["epilogues"][1:], strict=False):
            copies = [t["copy_start"] for t in ks if t["tile"] == after["tile"]]
            assert (min(copies) < before["end"]) == persistent
    saved = per_block["epilogues"][-1]["end"] - stays["epilogues"][-1]["end"]
    assert abs(saved - (tiles - 1) * (0.5 + 0.6)) < 1e-9  # the launch + one copy, per edge
    fig = gemm_diagrams.persistent_timeline(tiles, k_tiles)
    assert len(patches(fig, "copy")) == 2 * tiles * k_tiles
    assert len(patches(fig, "epilogue")) == 2 * tiles
    assert f"STAGES = {r24.STAGES}" in fig.axes[1].get_xlabel()


def test_flash_tiles_from_rungs_3_and_5() -> None:
    n, d = 512, 64
    sizes = attention_diagrams.flash_tile_sizes(d)
    tm, tn = r03_flash.tile_shape(d)
    assert sizes["r03_flash"] == (16 * tm, 16 * tn)
    assert sizes["r05_tensor_core_flash"][1] == r05_tensor_core_flash.BKV
    fig = attention_diagrams.flash_tiles(n, d)
    for ax, (_, bkv) in zip(fig.axes, sizes.values(), strict=True):
        swept = [p for p in ax.patches if p.get_gid() == "swept-tile"]
        assert len(swept) == math.ceil(n / bkv)
        assert {p.get_width() for p in swept} == {bkv}


@pytest.mark.parametrize("d", [64, 128])
def test_backward_tiles_from_rung_3(d: int) -> None:
    """The key kernel's block walks every query tile from the one holding its first key (causal)
    or from the first; the query kernel's block stops at the tile holding its last query."""
    from ladder.attention.backward import r03_tensor_core as backward_r03

    n, block = 512, 2
    kd = backward_r03.kernel_d(d, "test")
    bq, rows, bk = backward_r03.QUERY_TILE[kd], backward_r03.BLOCK_ROWS, backward_r03.KEY_TILE
    assert attention_diagrams.backward_tile_sizes(d) == {
        "key kernel": (bq, rows),
        "query kernel": (rows, bk),
    }
    for causal in (False, True):
        fig = attention_diagrams.backward_tiles(n, d, causal, block)
        keys, queries = (len([p for p in ax.patches if p.get_gid() == "visited-tile"])
                         for ax in fig.axes)  # fmt: skip
        first_query_tile = block * rows // bq if causal else 0
        assert keys == n // bq - first_query_tile
        assert queries == (-(-(block + 1) * rows // bk) if causal else n // bk)


def test_online_softmax_matches_direct() -> None:
    scores = np.array(attention_diagrams.EXAMPLE_SCORES)
    values = np.array(attention_diagrams.EXAMPLE_VALUES)
    steps = attention_diagrams.online_softmax_steps(scores, values, 4)
    assert len(steps) == 2 and steps[1]["alpha"] < 1  # the max rose in tile 2
    weights = np.exp(scores - scores.max())
    assert steps[-1]["out"] == pytest.approx(weights @ values / weights.sum())
    fig = attention_diagrams.online_softmax()
    result = next(t for ax in fig.axes for t in ax.texts if t.get_gid() == "result")
    online, direct = re.findall(r"= (-?\d+\.\d{6})", result.get_text())
    assert online == direct


def test_implicit_gemm_mapping_is_a_convolution(rng: np.random.Generator) -> None:
    layer = (2, 3, 4, 7, 6, 3)  # B, C, M, H, W, K
    b, c, m, h, w, k = layer
    x = rng.standard_normal((b, c, h, w))
    weights = rng.standard_normal((m, c, k, k))
    rows, cols = conv_diagrams.unrolled_shape(layer)
    unrolled = np.empty((rows, cols))
    for r in range(rows):
        for col in range(cols):
            unrolled[r, col] = x[conv_diagrams.unrolled_entry(layer, r, col)]
    ho, wo = h - k + 1, w - k + 1
    y = (weights.reshape(m, -1) @ unrolled).reshape(m, b, ho, wo).transpose(1, 0, 2, 3)
    direct = np.zeros_like(y)
    for p in range(k):
        for q in range(k):
            direct += np.einsum(
                "mc,bcyx->bmyx", weights[:, :, p, q], x[:, :, p : p + ho, q : q + wo]
            )
    np.testing.assert_allclose(y, direct, rtol=1e-10, atol=1e-10)

    fig = conv_diagrams.implicit_gemm()
    rows, cols = conv_diagrams.unrolled_shape(layers.CONV2)
    assert (rows, cols) == (4 * 7 * 7, 10000 * 34 * 34)
    assert f"{rows} × {cols:,}" in fig.axes[1].get_title()
    assert len(patches(fig, "channel")) == layers.CONV2[1]
    assert {(p.get_width(), p.get_height()) for p in patches(fig, "window")} == {(7, 7)}


@pytest.mark.parametrize("problem", ["gemm", "conv", "attention"])
def test_roofline_has_one_point_per_measured_rung(problem: str) -> None:
    doc = json.loads(RESULTS.read_text())
    shape, points = dg.roofline_points(doc, problem)
    fig = dg.roofline(doc, problem)
    ax = fig.axes[0]
    rung_points = [line for line in ax.lines if line.get_gid() == "rung-point"]
    measured = [
        r
        for r in doc["runs"]
        if r["problem"] == problem
        and tuple(r["shape"]) == shape
        and not r["reference"]
        and r.get("ok")
        and r.get("median_ms")
    ]
    assert len(rung_points) == len(measured) == sum(not p["reference"] for p in points)
    labels = [t for t in ax.texts if t.get_gid() == "rung-label"]
    assert sorted(t.get_text() for t in labels) == sorted(str(r["number"]) for r in measured)
    assert doc["gpu"] in ax.get_title()
    for line, run in zip(rung_points, [p for p in points if not p["reference"]], strict=True):
        x, y = line.get_xdata()[0], line.get_ydata()[0]
        assert x == pytest.approx(run["flops"] / run["min_bytes"])
        assert y == pytest.approx(run["flops"] / run["median_ms"] / 1e9)
    legend_lines = ax.get_legend().get_texts()
    ceilings = doc["ceilings"]
    assert any(f"{ceilings['copy_tbps']:.2f} TB/s" in t.get_text() for t in legend_lines)
    assert any(f"{ceilings['cublas_fp16_tflops']:.1f}" in t.get_text() for t in legend_lines)


def test_spread_keeps_order_and_gap() -> None:
    placed = dg.spread([5.0, 5.0, 5.1, 20.0, 0.0], 2.0)
    ordered = sorted(placed)
    assert all(b - a >= 2.0 - 1e-9 for a, b in itertools.pairwise(ordered))
    assert placed[4] == 0.0 and placed[3] == 20.0
    assert sum(placed[:3]) / 3 == pytest.approx((5.0 + 5.0 + 5.1) / 3)


def test_epilogue_staging_is_the_kernels_and_conflict_free() -> None:
    """r23.staged is the .cu's ``staged`` (the same expression), every 16-byte unit of a consumer's
    64 x 256 part has its own place, and both of `smem-epilogue`'s shared-memory steps touch 8
    different bank groups per quarter-warp: the accumulator's writes (8 rows, one unit) and the
    read-back (8 units of one row)."""
    cu = Path(r23.SOURCE.path).read_text()
    assert "return (u / 8) * C_CHUNK_BYTES + r * 128 + (((u % 8) ^ (r % 8)) * 16);" in cu
    places = {r23.staged(r, u) for r in range(r23.CONSUMER_ROWS) for u in range(r23.UNITS_PER_ROW)}
    assert len(places) == r23.CONSUMER_ROWS * r23.UNITS_PER_ROW
    assert max(places) + r23.UNIT_BYTES == r23.CONSUMER_ROWS * r23.BN * 2
    group = lambda offset: (offset % r23.ROW_BYTES) // r23.UNIT_BYTES  # noqa: E731
    for j in range(r23.UNITS_PER_ROW):  # step 1: warp 0's rows 0-7 (and 8-15), unit j
        for base in (0, 8):
            rows = {gemm_diagrams.accumulator_rows(lane, j)[0] + base for lane in range(32)}
            assert len({group(r23.staged(r, j)) for r in rows}) == 8
    for r in range(r23.CONSUMER_ROWS):  # step 2: each quarter-warp's 8 units of one row
        for q in range(r23.UNITS_PER_ROW // 8):
            assert len({group(r23.staged(r, 8 * q + u)) for u in range(8)}) == 8
    fig = gemm_diagrams.epilogue_stores()
    assert "8 partial 32-byte sectors" in fig.axes[0].get_title()
    assert all("conflict-free" in ax.get_title() for ax in fig.axes[1:])


@pytest.mark.parametrize("d", [64, 128])
def test_overlap_timeline_from_rung_8(d: int) -> None:
    """Rung 7's steps follow one another; rung 8's tensor cores run S_j and P_{j-1}·V_{j-1}
    back to back while S_j's exponentials run beside P·V, and never two steps of one unit at
    once. The clocks come from rung 8's key tile and the SM's rates."""
    from ladder.attention import r08_overlap_flash as r08

    c = attention_diagrams.tile_clocks(d)
    product = 2 * 64 * r08.BKV * d / attention_diagrams.TENSOR_FLOP_PER_CLOCK
    assert c == {
        "S": product,
        "PV": product,
        "exp": 64 * r08.BKV / attention_diagrams.EXP_PER_CLOCK,
    }
    tiles = 4
    schedule = attention_diagrams.overlap_schedule(d, tiles)
    serial, overlap = schedule["rung 7"], schedule["rung 8"]
    assert max(e for *_, e in serial) == tiles * (c["S"] + c["PV"] + c["exp"])
    wanted = c["S"] + c["exp"] + (tiles - 1) * (c["S"] + max(c["PV"], c["exp"])) + c["PV"]
    assert max(e for *_, e in overlap) == wanted
    for steps in (serial, overlap):
        assert len(steps) == 3 * tiles
        for unit in ("tensor", "exp"):
            spans = sorted((s, e) for u, _, s, e in steps if u == unit)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), unit
    fig = attention_diagrams.overlap_timeline(d, tiles)
    assert len(patches(fig, "rung 8-tensor")) == 2 * tiles
    assert len(patches(fig, "rung 7-exp")) == tiles


@pytest.mark.parametrize("d", [64, 128])
def test_producer_pipeline_from_rung_9(d: int) -> None:
    """Rung 9's copies: K_j then V_j, into stage j % STAGES; a copy into a used stage waits for
    the release of the tile that last used it (STAGES tiles back), and nothing before; K_j is
    read by S_j in tile j, V_j by P_j·V_j in tile j + 1. The figure: a box per copy and per
    consumer tile, a 'full' arrow per copy read within the drawn tiles, an 'empty' arrow per
    refill, a row per consumer warpgroup of rung 9 at this head dimension."""
    from ladder.attention import r09_producer_flash as r09

    tiles = 5
    waits = attention_diagrams.producer_waits(tiles)
    assert [w["copy"] for w in waits[:4]] == ["K0", "V0", "K1", "V1"]
    for w in waits:
        operand, j = w["copy"][0], int(w["copy"][1:])
        assert w["stage"] == j % r09.STAGES
        earlier = j - r09.STAGES
        assert w["waits_for"] == (f"{operand}{earlier} released" if earlier >= 0 else None)
        assert w["read_by"].endswith(f"tile {j if operand == 'K' else j + 1}")
    fig = attention_diagrams.producer_pipeline(tiles, d)
    consumers = r09.CONSUMERS[d]
    assert (
        len([p for p in fig.axes[0].patches if str(p.get_gid()).startswith("copy-")]) == 2 * tiles
    )
    tile_boxes = [p for p in fig.axes[0].patches if str(p.get_gid()).startswith("consumer-")]
    assert len(tile_boxes) == consumers * (tiles + 1)
    assert len(patches(fig, "full")) == 2 * tiles  # V of the last tile is read after the loop
    assert len(patches(fig, "empty")) == 2 * (tiles - r09.STAGES)
    assert f"{consumers} consumer warpgroups" in fig.axes[0].get_title()


def test_register_budget_from_rungs_9_and_11() -> None:
    """A consumer's O, S and P from the rungs' tile sizes: 128 keys double S and P; the arrays
    fit each built kernel's setmaxnreg budget, and 128 keys with four consumers at d = 64 do not
    leave room for anything else (the reason rung 11 runs three)."""
    from ladder.attention import r09_producer_flash as r09
    from ladder.attention import r11_wide_keys_flash as r11
    from ladder.attention import warp_specialized

    def used(a: dict[str, int]) -> int:
        return a["O"] + a["S"] + a["P"]

    nine = attention_diagrams.consumer_arrays(64, r09.BKV, r09.CONSUMERS[64])
    wide4 = attention_diagrams.consumer_arrays(64, r11.BKV, r09.CONSUMERS[64])
    eleven = attention_diagrams.consumer_arrays(64, r11.BKV, r11.CONSUMERS[64])
    assert (nine["S"], nine["P"], wide4["S"], wide4["P"]) == (32, 16, 64, 32)
    assert used(nine) < nine["budget"] and used(eleven) < eleven["budget"]
    assert used(wide4) >= wide4["budget"]
    for d in (64, 128):
        a = attention_diagrams.consumer_arrays(d, r11.BKV, r11.CONSUMERS[d])
        assert a["budget"] == warp_specialized.consumer_registers(r11.CONSUMERS[d])
        assert used(a) < a["budget"]
    fig = attention_diagrams.register_budget()
    bars = [p for p in fig.axes[0].patches if str(p.get_gid()).endswith(":S")]
    assert sorted(b.get_width() for b in bars) == [32, 32, 64, 64, 64]


# ---- the densest layouts (issue 53): conv rung 8's quads and jobs, conv rung 13's operands,
# wgmma's descriptor and core matrix. The layout arithmetic the kernels do in C++ is written
# once in Python (conv/tc/plan.py, core/diagrams.py, gemm/diagrams.py); each test holds it to
# the .cu files' own expressions, or multiplies a layer through it and compares with the
# convolution. ----

from ladder.conv import r08_tensor_core as conv_r08  # noqa: E402
from ladder.conv import r09_wgmma as conv_r09  # noqa: E402
from ladder.conv import r13_filters_on_m as conv_r13  # noqa: E402
from ladder.conv.tc import plan as tc_plan  # noqa: E402
from ladder.gemm import r21_wgmma_descriptors as r21  # noqa: E402

LADDER = Path(__file__).resolve().parent.parent / "ladder"
TC = LADDER / "conv" / "tc"


def c_expression(text: str) -> str:
    """A C++ integer expression as Python: no casts or unsigned suffixes, ``/`` as ``//`` (the
    operands here are never negative, where the two agree)."""
    text = re.sub(r"\((?:unsigned long long|unsigned|int|long long)\)", "", " ".join(text.split()))
    text = re.sub(r"(\d)(?:ull|u)\b", r"\1", text)
    return re.sub(r"(?<![/])/(?![/])", "//", text)


def cu_constants(text: str, given: dict[str, int] | None = None) -> dict[str, int]:
    """The integer constants a .cu or .cuh file declares (``constexpr int|unsigned NAME = ...``,
    several per statement, or an enum's), evaluated in order after ``given`` (the -D options);
    those that need anything else are left out."""
    names = dict(given or {})
    statements = re.findall(r"constexpr (?:int|unsigned) ([^;(]+);", text)
    statements += re.findall(r"enum\s+\w*\s*(?::\s*\w+\s*)?\{([^}]*)\}", text)
    for statement in statements:
        for part in statement.split(","):
            name, _, value = part.partition("=")
            try:
                names[name.strip()] = eval(c_expression(value.split("//")[0]), {}, dict(names))
            except (NameError, SyntaxError):
                pass
    return names


def minus_d(options: Sequence[str]) -> dict[str, int]:
    """The integer -D options of a source, by name."""
    found = (re.fullmatch(r"-D(\w+)=(\d+)u?", option) for option in options)
    return {m.group(1): int(m.group(2)) for m in found if m}


DEFINES = {**minus_d(tc_plan.defines()),
           **minus_d([f"-D{k}={v}" for k, v in conv_r13.DEFINES.items()])}  # fmt: skip


def descriptor_builders() -> dict[str, dict[str, Any]]:
    """Every function under ladder/ that builds a wgmma descriptor (returns ``unsigned long
    long``, named ``*desc``), wherever the wrappers live: name -> its parameters (with
    defaults), its return expression and the constants it can see (its file's, the library's
    and the -D options)."""
    sources = {p: p.read_text() for p in [*LADDER.rglob("*.cuh"), *LADDER.rglob("*.cu")]}
    library = {}
    for text in sources.values():
        library.update(cu_constants(text, DEFINES))
    found = {}
    pattern = r"unsigned long long (\w*desc)\(([^)]*)\)\s*\{\s*return\s+(.*?);\s*\}"
    for text in sources.values():
        for name, params, body in re.findall(pattern, text, re.S):
            parameters = []
            for param in params.split(","):
                declared, _, default = param.partition("=")
                parameters.append((declared.split()[-1], default.strip() or None))
            found[name] = {"parameters": parameters, "body": body, "constants": library}
    return found


def build_descriptor(name: str, *args: int) -> int:
    """Descriptor builder ``name`` evaluated from its own C++ for these arguments (defaults
    for the rest); a builder that calls another one is evaluated through it."""
    builder = descriptor_builders()[name]
    here = dict(builder["constants"])
    for (param, default), value in itertools.zip_longest(builder["parameters"], args):
        here[param] = value if value is not None else eval(c_expression(default), {}, here)
    body = c_expression(builder["body"])
    calls = {other: functools.partial(build_descriptor, other) for other in descriptor_builders()}
    return eval(body, {}, {**here, **calls})


def conv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """y[b, m, oy, ox] = Σ x[b, c, oy + p, ox + q] w[m, c, p, q], float64."""
    k = w.shape[-1]
    ho, wo = x.shape[2] - k + 1, x.shape[3] - k + 1
    y = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for p in range(k):
        for q in range(k):
            y += np.einsum("mc,bcyx->bmyx", w[:, :, p, q], x[:, :, p : p + ho, q : q + wo])
    return y


def test_quad_words_are_the_mma_fragment_rows() -> None:
    """Tile i at k16 step j, read through mma.m16n8k16's A layout (A row g: output row 2i,
    row g + 8: 2i + 1; k = 8 kh + kq: filter row 2j + kh, column kq), needs in register reg the
    pair word of input row quad_words(i + j)[reg] at column g + 2t: one quad per diagonal. And
    the rewrite writes those rows, the window reads quad i + j."""
    a = gemm_diagrams.mma_layout()["A"]
    for row, col in itertools.product(range(16), range(16)):
        lane, reg, half = a[row, col]
        g, t = divmod(lane, 4)
        for i, j in itertools.product(range(6), range(tc_plan.PAIRS)):
            input_row = 2 * i + row // 8 + 2 * j + col // 8
            assert input_row == tc_plan.quad_words(i + j)[reg]
            assert row % 8 + col % 8 == g + 2 * t + half  # the pair word at column g + 2t
    staging = (TC / "staging.cuh").read_text()
    assert "const unsigned m = pair_word(2 * k + 1);" in staging
    assert "quad = make_uint4(pair_word(2 * k), m, m, pair_word(2 * k + 2));" in staging
    cu = Path(conv_r08.SOURCE.path).read_text()
    assert "const int i = k - j;" in cu and "constexpr int QUADS = T + USED - 1;" in cu
    assert tc_plan.diagonal(3, 6) == [(0, 3), (1, 2), (2, 1), (3, 0)]
    assert tc_plan.diagonal(8, 6) == [(5, 3)]


def test_window_addressing_is_rung_8s() -> None:
    """plan.window_quad is the .cu's lane_quads + src, evaluated from its own expressions."""
    cu = Path(conv_r08.SOURCE.path).read_text()
    lane = re.search(r"lane_quads =\s*quads \+ (.*?);", cu, re.S).group(1)
    src = re.search(r"const uint4\* src = lane_quads \+ (.*?);", cu, re.S).group(1)
    for layer in (layers.CONV1, layers.CONV2, (3, 2, 32, 22, 15, 9)):
        found = conv_r08.plan(layer)
        names = {"p": found, "ROWS": 2 * found.tiles, "CSTEP": 2 if found.packed else 1,
                 "Q_CHUNK": tc_plan.Q_CHUNK, "P_BLOCK": tc_plan.P_BLOCK}  # fmt: skip
        windows = itertools.product(range(found.QC), range(found.PB))
        for (col, t, sb, cl), (qc, pb) in itertools.product(
            itertools.product((0, 5), range(4), (0, 1), (0, 1)), windows
        ):
            here = {**names, "col": col, "t": t, "sb": sb, "cl": cl, "qc": qc, "pb": pb}
            cu_index = eval(c_expression(lane), {}, here) + eval(c_expression(src), {}, here)
            assert tc_plan.window_quad(found, col, t, sb, cl, qc, pb) == cu_index
            column = tc_plan.window_quad(found, col, t, 0, cl, qc, 0) // found.quad_stride
            cstep = names["CSTEP"]
            assert cstep * (column - cl * found.cols) == tc_plan.pair_word_column(found, col, t, qc)


def test_rung_8_model_convolves(rng: np.random.Generator) -> None:
    """A NumPy model of rung 8's kernel built on plan.py's arithmetic: quads staged as
    rewrite_quads writes them (quad_words), each job of job_walk, each window at window_quad,
    tile i at step j multiplying quad i + j through mma.sync's fragment layout, the B blocks
    from the weights. It computes the convolution, and writes every output once. The layer has
    two sub-bands (a group of 8 columns wraps), two filter groups, and K = 9: two filter-column
    chunks and two filter-row blocks, the last of one row (a k8 step)."""
    layer = (1, 2, 32, 22, 15, 9)
    found = conv_r08.plan(layer)
    assert not found.packed and found.PB == 2 and found.QC == 2 and found.NFG == 2
    _, c_count, m_count, h, w_in, k = layer
    x = rng.standard_normal((1, c_count, h, w_in))
    weights = rng.standard_normal((m_count, c_count, k, k))
    quads = np.zeros((c_count * found.cols * found.quad_stride, 4, 2))
    for cl, column, q in itertools.product(range(c_count), range(found.cols),
                                           range(found.quad_stride)):  # fmt: skip
        for reg, r in enumerate(tc_plan.quad_words(q)):
            for half in range(2):
                if r < h and column + half < w_in:
                    index = (cl * found.cols + column) * found.quad_stride + q
                    quads[index, reg, half] = x[0, cl, r, column + half]
    owners = gemm_diagrams.mma_layout()["A"]
    rows, tiles, nt_count = 2 * found.tiles, found.tiles, found.n_tiles
    y = np.zeros((1, m_count, found.Ho, found.Wo))
    written = np.zeros_like(y)
    for job in tc_plan.job_walk(found):
        lanes = job["columns"]
        for i, nt in itertools.product(range(tiles), range(nt_count)):
            d = np.zeros((16, 8))
            for cl, qc, pb in itertools.product(range(c_count), range(found.QC), range(found.PB)):
                taps = min(tc_plan.P_BLOCK, k - pb * tc_plan.P_BLOCK)
                for j in range(taps // 2 + taps % 2):
                    a = np.zeros((16, 16))
                    for row, col in itertools.product(range(16), range(16)):
                        lane, reg, half = owners[row, col]
                        g, t = divmod(lane, 4)
                        if g < len(lanes):
                            sb, column = lanes[g]
                            at = tc_plan.window_quad(found, column, t, sb, cl, qc, pb) + i + j
                            a[row, col] = quads[at, reg, half]
                    b = np.zeros((16, 8))
                    for kk, n in itertools.product(range(16), range(8)):
                        f = 8 * (job["fg"] * nt_count + nt) + n
                        p, q = 8 * pb + 2 * j + kk // 8, 8 * qc + kk % 8
                        if f < m_count and p < k and q < k:
                            b[kk, n] = weights[f, cl, p, q]
                    d += a @ b
            for g, (sb, column) in enumerate(lanes):
                for row, oy in ((g, sb * rows + 2 * i), (g + 8, sb * rows + 2 * i + 1)):
                    for n in range(8):
                        f = 8 * (job["fg"] * nt_count + nt) + n
                        if oy < found.Ho and f < m_count:
                            y[0, f, oy, column] = d[row, n]
                            written[0, f, oy, column] += 1
    assert (written == 1).all()
    np.testing.assert_allclose(y, conv_reference(x, weights), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layer", [layers.CONV1, layers.CONV2, (3, 2, 32, 22, 15, 9)])
def test_job_walk_is_the_kernels_loop(layer: tuple[int, ...]) -> None:
    """job_walk's rounds are Layout.rounds for rung 8's and rung 9's (warpgroup) plans; a job
    takes slot job % SLOTS of round job // SLOTS; every (column, filter group) is one job's.
    The .cu's loop keeps job = round · NWARPS + warp by subtraction (no division)."""
    for found in (conv_r08.plan(layer), conv_r09.plan(layer)):
        if found is None:
            continue
        walk = tc_plan.job_walk(found)
        slots = tc_plan.NWARPS // found.job_warps
        assert max(job["round"] for job in walk) + 1 == found.rounds
        for job in walk:
            assert (job["round"], job["slot"]) == divmod(job["job"], slots)
            assert 0 < len(job["columns"]) <= 8 * found.job_warps
        covered = [(job["fg"], sb, w) for job in walk for sb, w in job["columns"]]
        sub_bands = -(-min(found.band_rows, found.Ho) // (found.tile_rows * found.tiles))
        assert sorted(covered) == sorted(itertools.product(range(found.NFG), range(sub_bands),
                                                           range(found.Wn)))  # fmt: skip
    cu = Path(conv_r08.SOURCE.path).read_text()
    assert "// job = round * NWARPS + warp = fg * groups + group" in cu
    assert "const int n = group * 8 + g;" in cu


def test_rung_13_layout_is_its_cu_expressions() -> None:
    """plan.py's rung-13 arithmetic against the .cu's own expressions, evaluated: the rewrite's
    chunk of row r, the step's descriptor offset, the first descriptor of a job; A's rows."""
    cu = Path(conv_r13.SOURCE.path).read_text()
    found = conv_r13.plan(layers.CONV2)
    r_count, blocks, nt = found.R, found.NP, conv_r13.NT
    core_bytes = cu_constants(cu, DEFINES)["FM_CORE_BYTES"]
    rewrite = re.search(r"unsigned dst = rep \+ 16 \* \((.*?) \+ 4 \* first\);", cu).group(1)
    step = re.search(r"\(d, a\[s\], desc \+ (.*?)\);", cu).group(1)  # steps 1 ..
    first = re.search(r"= \w*desc\(rep \+ ([^,]+), ([^,;]+?)[,)]", cu).groups()
    names = {"R": r_count, "R2": r_count // 2, "NP": blocks, "FM_NT": nt}
    for c, r in itertools.product(range(found.size[1]), range(r_count)):
        chunk = eval(c_expression(rewrite), {}, {**names, "c": c, "r": r})
        assert chunk == tc_plan.fm_chunk(c, r, 0, r_count, blocks)
    for s, job in itertools.product(range(4 * found.size[1]), range(found.tiles)):
        c, j = divmod(s, 4)
        fields = tc_plan.fm_step(c, j, job, r_count, blocks, nt)
        start = eval(c_expression(first[0]), {}, {**names, "job": job}) // 16
        assert start + eval(c_expression(step), {}, {**names, "s": s}) == fields["start"]
        assert eval(c_expression(first[1]), {}, names) == fields["lbo"]
    assert tc_plan.fm_step(0, 0, 0, r_count, blocks, nt)["sbo"] == core_bytes
    assert "const int f = 4 * (i % 4) + warp, dy = i / 4;" in cu
    assert "const int dx = r & 1, p = 2 * (s % 4) + (r >> 1);" in cu
    assert "weight_pair(w, f, s / 4, p - dy, 2 * t - dx, M, C, K)" in cu
    a = gemm_diagrams.mma_layout()["A"]  # wgmma's register A: each warp's 16 rows as mma.sync's
    for warp, row, col in itertools.product(range(4), range(16), range(16)):
        lane, reg, _ = a[row, col]
        i = lane // 4
        f, dy, dx = tc_plan.fm_row(16 * warp + row)
        assert (f, dy, dx) == (4 * (i % 4) + warp, i // 4, reg & 1)
    assert sorted(tc_plan.fm_row(m) for m in range(64)) == sorted(
        itertools.product(range(16), range(2), range(2))
    )


def test_rung_13_model_convolves(rng: np.random.Generator) -> None:
    """conv2's image through rung 13's layout: A[m][(c, p, q)] = the tap fm_tap gives, B read
    chunk by chunk where each step's descriptor points (fm_step_chunks), a chunk holding
    x[c][r][2n .. 2n + 7] where fm_chunk says the rewrite stored it; D[m][g] is then y at
    (f, 2Y + dy, 2n + dx). Every chunk read lies inside the plan's rewritten rows and tail."""
    found = conv_r13.plan(layers.CONV2)
    _, c_count, m_count, h, w_in, k = found.size
    x = rng.standard_normal((1, c_count, h, w_in))
    weights = rng.standard_normal((m_count, c_count, k, k))
    r_count, blocks = found.R, found.NP
    chunks = np.zeros((found.rep_chunks, 8))
    for c, r, n in itertools.product(range(c_count), range(r_count), range(blocks)):
        for e in range(8):
            if r < h and 2 * n + e < w_in:
                chunks[tc_plan.fm_chunk(c, r, n, r_count, blocks), e] = x[0, c, r, 2 * n + e]
    g_count = found.tiles * conv_r13.NT
    d = np.zeros((64, g_count))
    for c, j in itertools.product(range(c_count), range(tc_plan.PAIRS)):
        b = np.zeros((16, g_count))
        for read in conv_diagrams.fm_step_chunks(found, c, j):
            assert read["chunk"] < found.rep_chunks
            b[8 * read["half"] : 8 * read["half"] + 8, read["g"]] = chunks[read["chunk"]]
        a = np.zeros((64, 16))
        for m, kk in itertools.product(range(64), range(16)):
            f = tc_plan.fm_row(m)[0]
            tap = tc_plan.fm_tap(m, 2 * j + kk // 8, kk % 8, k)
            if tap is not None and f < m_count:
                a[m, kk] = weights[f, c, tap[0], tap[1]]
        d += a @ b
    y = conv_reference(x, weights)[0]
    for m, g in itertools.product(range(64), range(found.G)):
        f, dy, dx = tc_plan.fm_row(m)
        row, col = divmod(g, blocks)
        oy, ox = 2 * row + dy, 2 * col + dx
        if f < m_count and oy < found.Ho and ox < found.Wo:
            assert d[m, g] == pytest.approx(y[f, oy, ox], abs=1e-9)
    for g in range(found.G):  # the even half of step j is block row Y's input row 2Y + 2j
        row, col = divmod(g, blocks)
        reads = [r for r in conv_diagrams.fm_step_chunks(found, 1, 2) if r["g"] == g]
        assert [r["chunk"] for r in reads] == [
            tc_plan.fm_chunk(1, 2 * row + 4 + half, col, r_count, blocks) for half in (0, 1)
        ]


def test_descriptor_encoding_is_the_kernels() -> None:
    """core/diagrams.descriptor and descriptor_fields against every descriptor builder of the
    kernels, evaluated from its own C++: the library's (address, LBO, SBO, swizzle) and the
    conv rungs' (rung 13's chunks, the weights' core matrices). Decoded, each gives back its
    arguments; encoded again, the same 64 bits."""
    builders = descriptor_builders()
    general = [name for name, b in builders.items()
               if [p for p, _ in b["parameters"][:3]] == ["addr", "lbo", "sbo"]]  # fmt: skip
    assert general, "no descriptor builder taking (addr, lbo, sbo)"
    samples = {"addr": (0, 16, 8224, 69632, 0x3FFF0), "lbo": (16, 5440, 8192), "sbo": (128, 1024)}
    for name, builder in builders.items():
        params = [p for p, default in builder["parameters"] if default is None]
        for values in itertools.product(*(samples[p] for p in params)):
            desc = build_descriptor(name, *values)
            fields = dg.descriptor_fields(desc)
            again = dg.descriptor(fields["start_address"], fields["lbo"], fields["sbo"],
                                  fields["swizzle"])  # fmt: skip
            assert again == desc and fields["base_offset"] == 0, name
            for param, value in zip(params, values, strict=True):
                field = "start_address" if param == "addr" else param
                assert fields[field] == value, (name, param)
    for name in general:  # the library's default is TMA's 128-byte swizzle
        assert dg.descriptor_fields(build_descriptor(name, 8224, 16, 1024))["swizzle"] == 128


def test_wgmma_descriptors_are_the_cu_expressions() -> None:
    """wgmma_descriptor against `wgmma-descriptors`' .cu: its constexprs, the stage's sa and sb, and
    the two descriptor calls, evaluated through the library's builder for every stage, warpgroup and
    step."""
    cu = Path(r21.SOURCE.path).read_text()
    names = cu_constants(cu)
    assert (names["BM"], names["BN"], names["BK"]) == (r21.BM, r21.BN, r21.BK)
    assert names["B_CHUNK"] == gemm_diagrams.B_CHUNK and names["STAGES"] == r21.STAGES
    assert names["STAGE_BYTES"] == gemm_diagrams.STAGE_BYTES
    stages = re.findall(r"const unsigned sa = (.*?), sb = (.*?);", cu)
    (sa, sb), *_ = [(a, b) for a, b in stages if "wg" in a]  # the consumers', not the copy's
    calls = dict(re.findall(r"const unsigned long long (d[ab]) = (\w+\(.*?\));", cu))
    builders = {**names, **{b: functools.partial(build_descriptor, b)
                            for b in descriptor_builders()}}  # fmt: skip
    for stage, wg, kk in itertools.product(range(r21.STAGES), range(2), range(r21.BK // 16)):
        here = {**builders, "smem0": 0, "s": stage, "wg": wg, "kk": kk}
        here["sa"], here["sb"] = (eval(c_expression(e), {}, here) for e in (sa, sb))
        for operand, call in (("A", calls["da"]), ("B", calls["db"])):
            desc = eval(c_expression(call), {}, here)
            assert desc == gemm_diagrams.wgmma_descriptor(operand, stage, wg, kk)
            fields = dg.descriptor_fields(desc)
            args = gemm_diagrams.wgmma_descriptor_args(operand, stage, wg, kk)
            assert (fields["start_address"], fields["lbo"], fields["sbo"]) == args


def test_core_matrices_read_what_tma_wrote() -> None:
    """Through `wgmma-descriptors`' A descriptor, core matrix (i, kh) of step kk is rows 8i .. 8i +
    7 of the warpgroup's slice at k 16 kk + 8 kh .. + 7, exactly where TMA's 128-byte swizzle put
    them; its 8 rows lie in 8 different bank groups. The swizzle is `swizzle`'s and
    `smem-epilogue`'s rule for 128-byte rows."""
    for stage, wg, kk in itertools.product((0, 3), (0, 1), range(r21.BK // 16)):
        desc = gemm_diagrams.wgmma_descriptor("A", stage, wg, kk)
        for i, kh in itertools.product(range(8), range(2)):
            rows = gemm_diagrams.core_matrix_rows(desc, i, kh)
            wanted = [stage * gemm_diagrams.STAGE_BYTES
                      + gemm_diagrams.a_tile_offset(64 * wg + 8 * i + r, 16 * kk + 8 * kh)
                      for r in range(8)]  # fmt: skip
            assert rows == wanted
            assert len({row // dg.CHUNK_BYTES % dg.BANK_GROUPS for row in rows}) == 8
    swizzle_rows = gemm_diagrams.swizzle_rule(dg.SWIZZLE_ROW)
    for row, chunk in itertools.product(range(16), range(8)):
        offset = row * dg.SWIZZLE_ROW + chunk * dg.CHUNK_BYTES
        assert dg.swizzle_128(offset) == offset - 16 * chunk + 16 * swizzle_rows(row, chunk)
        assert dg.swizzle_128(offset) == r23.staged(row, chunk)


def test_the_new_figures_draw_the_constants() -> None:
    """Each figure draws what its data functions and the rungs' constants say."""
    found8 = conv_r08.plan(layers.CONV2)
    fig = conv_diagrams.draw_quads(k=3)
    assert len(patches(fig, "quad-word")) == len(set(tc_plan.quad_words(3)))
    assert len(patches(fig, "quad")) == 4 * (found8.tiles + tc_plan.PAIRS - 1)
    assert len(patches(fig, "tile-step")) == found8.tiles * tc_plan.PAIRS
    assert f"feeds {len(tc_plan.diagonal(3, found8.tiles))} mma" in fig.get_suptitle()

    fig = conv_diagrams.draw_jobs()
    labels = [t.get_text().split("\n") for ax in fig.axes for t in ax.texts]
    walk = tc_plan.job_walk(found8)
    drawn = {(int(a[4:]), int(b[5:]), int(c[6:])) for a, b, c in (x for x in labels if len(x) == 3)}
    assert drawn == {(job["job"], job["slot"], job["round"]) for job in walk}  # conv2: all labelled
    assert f"takes {found8.rounds} rounds" in fig.get_suptitle()
    assert len(patches(fig, "window")) == found8.size[1] * found8.QC * found8.PB

    found13 = conv_r13.plan(layers.CONV2)
    fig = conv_diagrams.draw_filters_on_m()
    assert len(patches(fig, "a-row")) == conv_r13.ROWS
    assert len(patches(fig, "tap")) == conv_r13.SHIFTS * found13.size[5] ** 2
    lbo = tc_plan.fm_step(0, 0, 0, found13.R, found13.NP, conv_r13.NT)["lbo"]
    assert f"{lbo} B later" in fig.get_suptitle() and lbo == 16 * found13.R // 2 * found13.NP

    fig = gemm_diagrams.draw_wgmma_descriptor(stage=1, warpgroup=1, kk=2)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    for operand in ("A", "B"):
        desc = gemm_diagrams.wgmma_descriptor(operand, 1, 1, 2)
        assert any(f"{desc:#018x}" in text for text in texts)
        assert len(patches(fig, f"bit-{operand}")) == 64
    assert len(patches(fig, "core-matrix")) == 8 * 8
    assert sum(p.get_linewidth() > 0.5 for p in patches(fig, "atom-chunk")) == 2 * 8


def test_writing_a_results_figure_leaves_the_backend_alone(tmp_path: Path) -> None:
    """A notebook's inline backend must survive a figure written to a file: switching to Agg
    there turned every later figure of the notebook into ``<Figure size ...>``."""
    from ladder.core import report

    run = {"problem": "gemm", "rung": "naive", "dtype": "float32", "shape": [8, 8, 8]}
    run |= {"reference": False, "peer": False, "status": "ok", "ok": True, "number": 1}
    run |= {"median_ms": 1.0, "tflops": 1.0, "tbps": 0.1}
    before = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        report.plot({"gpu": "G", "runs": [run], "simulated": False}, tmp_path / "f.png")
        assert (tmp_path / "f.png").is_file()
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
