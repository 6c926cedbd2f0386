"""The diagrams render without a GPU, draw what the rungs' constants say, and keep their labels
apart. Each test checks a fact of the picture that comes from a rung constant."""

from __future__ import annotations

import io
import itertools
import json
import math
import re
from collections.abc import Callable
from pathlib import Path

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
from ladder.gemm import r06_transposed_tiles as r06
from ladder.gemm import r08_warp_tiling as r08
from ladder.gemm import r14_cp_async as r14
from ladder.gemm import r15_mma_sync as r15
from ladder.gemm import r18_wgmma as r18
from ladder.gemm import r19_smem_epilogue as r19
from ladder.gemm import r20_persistent as r20

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
    c = r08.DEFAULT
    fig = gemm_diagrams.warp_tiling()
    warps = (r08.BM // r08.WM) * (r08.BN // r08.WN)
    assert len(patches(fig, "warp-tile")) == warps == r08.THREADS // r08.WARP
    assert len(patches(fig, "sub-tile")) == c.wmiter * c.wniter
    assert len(patches(fig, "thread-tile")) == r08.WARP * c.wmiter * c.wniter
    assert len(patches(fig, "lane0-outputs")) == warps * c.wmiter * c.wniter
    for tile in patches(fig, "thread-tile"):
        assert (tile.get_width(), tile.get_height()) == (r08.TN, r08.TM)
    assert f"{r08.BM} × {r08.BN}" in fig.axes[0].get_title()


def test_bank_conflicts_rung_5_then_rung_6() -> None:
    assert dg.conflict_degree(gemm_diagrams.r05_b_read()) > 1
    assert dg.conflict_degree(gemm_diagrams.r06_b_read()) == 1
    assert dg.conflict_degree(gemm_diagrams.r06_a_store(r06.BM)) > 1  # without the pad
    assert dg.conflict_degree(gemm_diagrams.r06_a_store(r06.AS_ROW)) == 1
    assert r06.AS_ROW == r06.BM + r06.PAD and r05.BN == r06.BN
    fig = gemm_diagrams.bank_conflicts()
    drawn = []
    for ax in fig.axes:
        passes = max(int(p.get_y()) for p in ax.patches if p.get_gid() == "bank-cell") + 1
        title = ax.get_title()
        stated = 1 if "conflict-free" in title else int(re.search(r"(\d+)-way", title).group(1))
        assert passes == stated
        drawn.append(passes)
    assert drawn[0] > 1 and drawn[1] == 1 and drawn[2] > 1 and drawn[3] == 1
    assert drawn[0] == 4  # rung 6's docstring: "rung 5 has 4-way conflicts there"
    assert drawn[2] == 8  # rung 6's docstring: "without the pad it is an 8-way conflict"


# Rung 15's swizzles as r15_mma_sync.cu writes them (stated once, here): the diagram derives
# them from r15.BK and r15.BN and must agree.
CU_SWIZZLE_A = lambda row, chunk: chunk ^ ((row >> 1) & 3)  # noqa: E731
CU_SWIZZLE_B = lambda row, chunk: chunk ^ (row & 7)  # noqa: E731


def test_swizzle_matches_rung_15_and_padding_costs_bytes() -> None:
    a_row, b_row = r15.BK * 2, r15.BN * 2
    derived_a, derived_b = gemm_diagrams.r15_swizzle(a_row), gemm_diagrams.r15_swizzle(b_row)
    for row in range(r15.BM):
        for chunk in range(a_row // 16):
            assert derived_a(row, chunk) == CU_SWIZZLE_A(row, chunk)
    for row in range(r15.BK):
        for chunk in range(b_row // 16):
            assert derived_b(row, chunk) == CU_SWIZZLE_B(row, chunk)
    for row_bytes in (a_row, b_row):
        assert len(set(gemm_diagrams.ldmatrix_groups(row_bytes, "plain"))) < 8
        assert len(set(gemm_diagrams.ldmatrix_groups(row_bytes, "swizzled"))) == 8
        padded = gemm_diagrams.ldmatrix_groups(row_bytes, "padded", pad_bytes=r14.PAD * 2)
        assert len(set(padded)) == 8
    fig = gemm_diagrams.swizzle()
    titles = [ax.get_title() for ax in fig.axes]
    assert ["conflict-free" in t for t in titles] == [False, True, True] * 2
    pad_bytes = (r15.BM + r15.BK) * r14.PAD * 2
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
    k_tiles = 3 * r18.STAGES
    tiles = gemm_diagrams.ring_schedule(r18.STAGES, k_tiles)
    for t in tiles:
        assert t["stage"] == t["tile"] % r18.STAGES
        assert t["copy_start"] < t["full"] <= t["mma_start"] < t["mma_end"]
        if t["tile"] >= r18.STAGES:  # waits for the stage's empty barrier
            assert t["copy_start"] >= tiles[t["tile"] - r18.STAGES]["released"]
    for moment in sorted({t["copy_start"] for t in tiles}):
        resident = [t for t in tiles if t["copy_start"] <= moment < t["released"]]
        assert len(resident) <= r18.STAGES
    assert (
        max(  # the ring does fill
            sum(t["copy_start"] <= x < t["released"] for t in tiles)
            for x in (t["copy_start"] for t in tiles)
        )
        == r18.STAGES
    )
    fig = gemm_diagrams.wgmma_ring(k_tiles)
    stage_rows = {p.get_y() for p in patches(fig, "stage-full")}
    assert len(stage_rows) == r18.STAGES
    assert len(patches(fig, "full-arrow")) == k_tiles
    assert len(patches(fig, "empty-arrow")) == k_tiles - r18.STAGES
    assert f"STAGES = {r18.STAGES}" in fig.axes[0].get_title()


def test_persistent_timeline_copies_under_the_epilogue() -> None:
    """Rung 20's model: the next tile's copies start before the last tile's epilogue ends, so
    each tile edge saves the launch and the ring's fill (one copy) against rung 19's."""
    tiles, k_tiles = 3, 6
    per_block = gemm_diagrams.tiles_schedule(False, tiles, k_tiles)
    stays = gemm_diagrams.tiles_schedule(True, tiles, k_tiles)
    for run, persistent in ((per_block, False), (stays, True)):
        ks = run["k_tiles"]
        assert len(ks) == tiles * k_tiles
        for i, t in enumerate(ks):
            assert t["copy_start"] < t["full"] <= t["mma_start"] < t["mma_end"] <= t["released"]
            it = i if persistent else t["k"]  # the producer's counter
            assert t["stage"] == it % r20.STAGES
            if it >= r20.STAGES:  # the stage's last K tile was released first
                assert t["copy_start"] >= ks[i - r20.STAGES]["released"]
        for before, after in zip(run["epilogues"], run["epilogues"][1:], strict=False):
            copies = [t["copy_start"] for t in ks if t["tile"] == after["tile"]]
            assert (min(copies) < before["end"]) == persistent
    saved = per_block["epilogues"][-1]["end"] - stays["epilogues"][-1]["end"]
    assert abs(saved - (tiles - 1) * (0.5 + 0.6)) < 1e-9  # the launch + one copy, per edge
    fig = gemm_diagrams.persistent_timeline(tiles, k_tiles)
    assert len(patches(fig, "copy")) == 2 * tiles * k_tiles
    assert len(patches(fig, "epilogue")) == 2 * tiles
    assert f"STAGES = {r20.STAGES}" in fig.axes[1].get_xlabel()


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
    """r19.staged is the .cu's ``staged`` (the same expression), every 16-byte unit of a
    consumer's 64 x 256 part has its own place, and both of rung 19's shared-memory steps touch
    8 different bank groups per quarter-warp: the accumulator's writes (8 rows, one unit) and
    the read-back (8 units of one row)."""
    cu = Path(r19.SOURCE.path).read_text()
    assert "return (u / 8) * C_CHUNK_BYTES + r * 128 + (((u % 8) ^ (r % 8)) * 16);" in cu
    places = {r19.staged(r, u) for r in range(r19.CONSUMER_ROWS) for u in range(r19.UNITS_PER_ROW)}
    assert len(places) == r19.CONSUMER_ROWS * r19.UNITS_PER_ROW
    assert max(places) + r19.UNIT_BYTES == r19.CONSUMER_ROWS * r19.BN * 2
    group = lambda offset: (offset % r19.ROW_BYTES) // r19.UNIT_BYTES  # noqa: E731
    for j in range(r19.UNITS_PER_ROW):  # step 1: warp 0's rows 0-7 (and 8-15), unit j
        for base in (0, 8):
            rows = {gemm_diagrams.accumulator_rows(lane, j)[0] + base for lane in range(32)}
            assert len({group(r19.staged(r, j)) for r in rows}) == 8
    for r in range(r19.CONSUMER_ROWS):  # step 2: each quarter-warp's 8 units of one row
        for q in range(r19.UNITS_PER_ROW // 8):
            assert len({group(r19.staged(r, 8 * q + u)) for u in range(8)}) == 8
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
