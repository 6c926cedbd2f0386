"""Data movement: transfers, the pipelined convolution, graph capture and replay, launch costs.

In the simulator, streams, events, pinned and mapped arrays all run synchronously: these tests
check the answers, the bookkeeping and the figures there, and check them again on a GPU, where
the GPU-only tests also check that capture refuses what it must refuse. Whether copies and
kernels overlap is checked by its structure (streams, events, their order), not by a time: the
benchmark, ``python -m ladder.transfer``, measures the time.
"""

import json
import threading

import numpy as np
import pytest
from conftest import ON_GPU, gpu_only
from numba import cuda

from ladder.conv.problem import CONV, conv_numpy
from ladder.core import graphs
from ladder.core.rung import get_rung
from ladder.core.timing import relative_error
from ladder.transfer import bench, launch, pipeline, plot, transfers
from ladder.transfer.clock import Stamp

NAIVE = get_rung("conv", "naive")
# the simulator runs every thread as a Python thread: three tiny images there
SIZE = (37, 4, 16, 40, 40, 7) if ON_GPU else (3, 1, 2, 9, 8, 3)


def _layer(size=SIZE, seed=3):
    x, w = CONV.make_inputs(size, "float32", seed)
    out_shape = CONV.output_shape(size)
    return x, w, out_shape


def test_transfer_sweep_gives_a_record_per_kind_direction_and_size():
    sizes = [4096, 8192]
    records = transfers.sweep(sizes, repeats=2)
    assert len(records) == len(transfers.KINDS) * len(transfers.DIRECTIONS) * len(sizes)
    for r in records:
        assert r.bytes in sizes and len(r.samples_ms) == 2
        assert r.median_ms > 0 and r.gbps > 0
        timed_by_events = ON_GPU and r.kind != "pageable"
        assert r.clock == ("events" if timed_by_events else "host")
        assert r.simulated == (not ON_GPU)
    peak = transfers.peak(records)
    assert set(peak) == {"h2d", "d2h"}
    assert peak["h2d"]["gbps"] == max(r.gbps for r in records if r.direction == "h2d")
    json.dumps([r.to_dict() for r in records])


def test_transfer_sweep_refuses_sizes_that_are_not_whole_words():
    with pytest.raises(ValueError, match="multiples of 8"):
        transfers.sweep([4100])


@pytest.mark.parametrize("host_memory", pipeline.HOST_MEMORIES)
def test_pipelined_layer_is_identical_to_the_sequential_one(host_memory, tmp_path):
    x, w, out_shape = _layer()
    expected = np.full(out_shape, np.nan, dtype=np.float32)
    sequential = pipeline.Sequential(x.shape, w, NAIVE.launch).run(x, expected)
    ref = conv_numpy(x.astype(np.float64), w.astype(np.float64))
    assert relative_error(expected, ref) <= CONV.tolerance("float32")

    pinned = host_memory == "pinned"
    xs, out = x, np.full(out_shape, np.nan, dtype=np.float32)
    if pinned:
        xs, out = pipeline.pinned_copy(xs), pipeline.pinned_copy(out)
    chunks, streams = 3, 2
    with pipeline.Pipelined(
        x.shape,
        w,
        NAIVE.launch,
        chunks=chunks,
        streams=streams,
        copy_threads=2,
        host_memory=host_memory,
    ) as pipelined:
        runs = [pipelined.run(xs, out) for _ in range(2)]  # buffers are reused between runs
    assert np.array_equal(out, expected)

    run = runs[-1]
    assert (run.mode, run.host_memory, run.chunks, run.streams) == (
        "pipelined",
        host_memory,
        chunks,
        streams,
    )
    device_ops = [op for op in run.ops if op.lane.startswith("stream")]
    assert sorted((op.chunk, op.kind) for op in device_ops) == sorted(
        (i, kind) for i in range(chunks) for kind in pipeline.STAGES
    )
    assert {op.lane for op in device_ops} == {f"stream {s}" for s in range(streams)}
    host_ops = [op for op in run.ops if op.lane.startswith("host")]
    assert len(host_ops) == (0 if pinned else 2 * chunks)
    assert all(0 <= op.start_ms <= op.end_ms <= run.wall_ms for op in run.ops)
    stages = run.stage_ms()
    assert set(stages) == set(pipeline.STAGES) | (set() if pinned else {pipeline.HOST_STAGE})
    assert 0 < run.efficiency <= 1.0
    gpu_stages = {stage: stages[stage] for stage in pipeline.STAGES}
    assert run.ideal_ms == max(gpu_stages.values())  # the issue's three stages, never the host's
    assert run.bottleneck == max(gpu_stages, key=gpu_stages.get)
    assert sequential.efficiency <= 1.0 and sequential.ops[0].lane == "default stream"

    drawn = plot.timeline([sequential.to_dict(), run.to_dict()], tmp_path / "timeline.png")
    assert drawn.stat().st_size > 0


def test_chunks_need_not_divide_the_batch():
    x, w, out_shape = _layer()
    baseline = np.empty(out_shape, dtype=np.float32)
    pipeline.Sequential(x.shape, w, NAIVE.launch).run(x, baseline)
    out = np.full(out_shape, np.nan, dtype=np.float32)
    with pipeline.Pipelined(x.shape, w, NAIVE.launch, chunks=2, streams=3) as pipelined:
        assert pipelined.chunks == 2
        pipelined.run(x, out)
    assert np.array_equal(out, baseline)
    with pipeline.Pipelined(x.shape, w, NAIVE.launch, chunks=100, streams=1) as pipelined:
        assert pipelined.chunks == x.shape[0]  # never more chunks than images


def test_efficiency_counts_the_three_gpu_stages_even_when_host_copies_take_longer():
    ops = [
        pipeline.Op("stream 0", "h2d", 0, 0.0, 2.0),
        pipeline.Op("stream 0", "kernel", 0, 2.0, 3.0),
        pipeline.Op("stream 0", "d2h", 0, 3.0, 7.0),
        pipeline.Op("host copies 0", "host in", 0, 0.0, 9.0),
        pipeline.Op("host copies 1", "host out", 0, 7.0, 20.0),
    ]
    run = pipeline.Run("pipelined", "pageable", 1, 1, 2, 20.0, ops, False)
    assert run.stage_ms() == {"h2d": 2.0, "kernel": 1.0, "d2h": 4.0, "host copies": 11.0}
    assert run.ideal_ms == 4.0 and run.bottleneck == "d2h" and run.efficiency == 0.2
    found = run.to_dict(with_ops=False)
    assert bench.efficiency(found) == 0.2 and pipeline.gpu_ideal_ms(found["stage_ms"]) == 4.0
    # a results file from a version that counted the host copies is judged as this one judges
    found.update(ideal_ms=11.0, efficiency=0.55)
    assert bench.efficiency(found) == 0.2
    assert bench.host_bound(found, {"bound_ms": 8.0}) == 0.5


def test_host_copy_rate_and_the_bound_it_puts_on_a_staged_run():
    rate = pipeline.host_copy_rate(2, nbytes=1 << 16, piece_bytes=1 << 12, repeats=3)
    assert set(rate) == {"in", "out"} and all(r > 0 for r in rate.values())
    with pytest.raises(ValueError, match="positive"):
        pipeline.host_copy_rate(0)
    found = pipeline.host_copy_bound(3_000_000, 1_000_000, copy_threads=2, nbytes=1 << 16)
    assert {"1", "2"} <= set(found["gbps"])
    best = found["best_gbps"]
    assert best["in"] == max(r["in"] for r in found["gbps"].values())
    assert found["bound_ms"] == pytest.approx((3e6 / best["in"] + 1e6 / best["out"]) / 1e6)
    # a run whose largest GPU stage is shorter than the host's copies can reach at most
    # their ratio; one whose GPU stage is longer is not bounded by the host
    run = {"stage_ms": {"h2d": 5.0, "kernel": 1.0, "d2h": 20.0, "host copies": 30.0}}
    assert bench.host_bound(run, {"bound_ms": 40.0}) == 0.5
    assert bench.host_bound(run, {"bound_ms": 10.0}) == 1.0


def test_pipeline_refuses_arrays_of_the_wrong_shape():
    x, w, out_shape = _layer()
    with pipeline.Pipelined(x.shape, w, NAIVE.launch, chunks=2, streams=2) as pipelined:
        with pytest.raises(ValueError, match="out must be"):
            pipelined.run(x, np.empty((1, *out_shape[1:]), dtype=np.float32))
        with pytest.raises(TypeError, match="host"):
            pipelined.run(cuda.to_device(x), np.empty(out_shape, dtype=np.float32))
    with pytest.raises(ValueError, match="host_memory"):
        pipeline.Pipelined(x.shape, w, NAIVE.launch, host_memory="mapped")


def test_default_rung_is_a_float32_gpu_rung():
    chosen = pipeline.default_rung()
    assert not chosen.on_cpu and not chosen.reference and "float32" in chosen.dtypes


def _chain(x, y, length):
    def issue(stream):
        for step in range(length):
            src, dst = (x, y) if step % 2 == 0 else (y, x)
            launch.add_one[1, launch.THREADS, stream](src, dst)

    return issue


def test_graph_replay_gives_the_same_results_as_direct_launches():
    start = np.arange(launch.THREADS, dtype=np.float32)
    x = cuda.to_device(start)
    y = cuda.device_array(launch.THREADS, dtype=np.float32)
    stream = cuda.stream()
    issue = _chain(x, y, 6)
    issue(stream)
    stream.synchronize()
    direct = x.copy_to_host()
    assert np.array_equal(direct, start + 6)

    x.copy_to_device(start)
    with graphs.capture(issue, stream, warm_up=False) as graph:
        stream.synchronize()
        assert np.array_equal(x.copy_to_host(), start), "capture must record, not run"
        if ON_GPU:
            assert graph.nodes == 6 and not graph.simulated
        graph.replay()
        stream.synchronize()
        assert np.array_equal(x.copy_to_host(), direct)
        graph.replay()  # the same launches again, on the arrays as they are now
        stream.synchronize()
        assert np.array_equal(x.copy_to_host(), start + 12)
    with pytest.raises(graphs.CaptureError, match="closed"):
        graph.replay()


def test_graph_of_a_convolution_rung_matches_the_rung():
    x, w, out_shape = _layer()
    dx, dw = cuda.to_device(x), cuda.to_device(w)
    direct = NAIVE.launch(dx, dw).copy_to_host()
    out = cuda.to_device(np.full(out_shape, np.nan, dtype=np.float32))
    stream = cuda.stream()
    graph = graphs.capture(lambda s: NAIVE.launch(dx, dw, out, stream=s), stream)
    out.copy_to_device(np.full(out_shape, np.nan, dtype=np.float32))
    graph.replay()
    stream.synchronize()
    assert np.array_equal(out.copy_to_host(), direct)
    graph.close()


def test_graphs_need_a_stream_of_their_own():
    with pytest.raises(ValueError, match="stream"):
        graphs.capture(lambda s: None, 0)


@gpu_only
def test_capture_reports_a_launch_on_the_default_stream():
    x = cuda.to_device(np.zeros(launch.THREADS, dtype=np.float32))
    y = cuda.device_array(launch.THREADS, dtype=np.float32)
    launch.add_one[1, launch.THREADS](x, y)  # compiled before capture
    cuda.synchronize()

    def stray(stream):
        launch.add_one[1, launch.THREADS](x, y)  # no stream: the default stream

    with pytest.raises(graphs.CaptureError):
        graphs.capture(stray, cuda.stream(), warm_up=False)
    launch.add_one[1, launch.THREADS](x, y)  # the context is still usable
    cuda.synchronize()


def _issued(pipelined, monkeypatch):
    """Record what ``pipelined`` issues from this thread, in order: ("record" | "wait" |
    "synchronize", stamp, stream or "host") for its events and (kind, stream, host array) for
    each copy and kernel; stamps as (chunk, name) ("origin" for the run's origin), streams as
    their index. The host copy threads' waits for the GPU (staging) are theirs, not logged."""
    main = threading.get_ident()
    names = {id(pipelined.origin): "origin"}
    for i, stamps in enumerate(pipelined.stamps):
        names.update({id(stamp): (i, name) for name, stamp in stamps.items()})
    streams = {id(stream): s for s, stream in enumerate(pipelined.streams)}
    log = []

    def logged(kind, original):
        def call(self, *args, **kwargs):
            if threading.get_ident() == main:
                stream = kwargs.get("stream", args[1] if len(args) > 1 else 0)
                host = args[0] if args else kwargs.get("ary")
                log.append((kind, streams.get(id(stream), "other"), host))
            return original(self, *args, **kwargs)

        return call

    for kind in ("record", "wait", "synchronize"):
        original = getattr(Stamp, kind)

        def stamped(self, *stream, _kind=kind, _original=original):
            if threading.get_ident() == main:
                on = streams.get(id(stream[0]), "other") if stream else "host"
                log.append((_kind, names.get(id(self)), on))
            return _original(self, *stream)

        monkeypatch.setattr(Stamp, kind, stamped)
    array = type(pipelined.d_x[0][:1])
    monkeypatch.setattr(array, "copy_to_device", logged("h2d", array.copy_to_device))
    monkeypatch.setattr(array, "copy_to_host", logged("d2h", array.copy_to_host))
    launch = pipelined.launch

    def kernel(*args, stream=0, **kwargs):
        log.append(("kernel", streams.get(id(stream), "other"), None))
        return launch(*args, stream=stream, **kwargs)

    pipelined.launch = kernel
    return log


@pytest.mark.parametrize("host_memory", pipeline.HOST_MEMORIES)
def test_pipeline_issues_copies_and_kernels_so_that_they_can_overlap(host_memory, monkeypatch):
    """The structure that lets copies and kernels overlap, not a time (the benchmark,
    ``python -m ladder.transfer``, judges the time): consecutive chunks on different streams;
    on its stream each chunk's copy in, kernel and copy out, each between its own two stamps;
    across streams only waits on the same stage of the chunk before (so a copy never queues
    behind another chunk's kernel); copies from pinned host memory only (pageable ones are
    synchronous); and the answer of the sequential run."""
    size = (64, 4, 16, 40, 40, 7) if ON_GPU else SIZE
    x, w, out_shape = _layer(size)
    expected = np.empty(out_shape, dtype=np.float32)
    pipeline.Sequential(x.shape, w, NAIVE.launch).run(x, expected)
    xs, out = x, np.full(out_shape, np.nan, dtype=np.float32)
    if host_memory == "pinned":
        xs, out = pipeline.pinned_copy(xs), pipeline.pinned_copy(out)
    streams = 3  # the simulator's three images: a chunk each
    with pipeline.Pipelined(
        x.shape, w, NAIVE.launch, chunks=8, streams=streams, host_memory=host_memory
    ) as pipelined:
        chunks = pipelined.chunks
        pipelined.run(xs, out)  # compiles the kernel
        log = _issued(pipelined, monkeypatch)
        out.fill(np.nan)
        run = pipelined.run(xs, out)
    assert np.array_equal(out, expected)

    assert log[0] == ("record", "origin", 0)
    position, used = 1, []
    for i in range(chunks):
        s = log[position + (1 if i else 0)][2]  # the stream chunk i's first stamp went to
        assert i == 0 or s != used[-1], "consecutive chunks must go to different streams"
        used.append(s)
        for stage in pipeline.STAGES:
            if i:  # the engine takes the chunks in order: wait for this stage of chunk i - 1
                assert log[position] == ("wait", (i - 1, f"{stage}_end"), s)
                position += 1
            issued = log[position : position + 3]
            assert issued[0] == ("record", (i, f"{stage}_start"), s)
            assert issued[1][:2] == (stage, s)
            assert issued[2] == ("record", (i, f"{stage}_end"), s)
            host = issued[1][2]
            if host is not None:  # a copy: from or to pinned memory, so that it is async
                if host_memory == "pageable":
                    staging = pipelined.pin_in if stage == "h2d" else pipelined.pin_out
                    assert any(np.shares_memory(host, b) for b in staging[s])
                else:
                    assert np.shares_memory(host, xs if stage == "h2d" else out)
            position += 3
    assert position == len(log), "nothing else is issued, and the issuing never waits for the GPU"
    assert set(used) == set(range(streams))

    device_ops = [op for op in run.ops if op.lane.startswith("stream")]
    assert [(op.chunk, op.kind, op.lane) for op in device_ops] == [
        (i, stage, f"stream {i % streams}") for i in range(chunks) for stage in pipeline.STAGES
    ]
    assert all(0 <= op.start_ms <= op.end_ms for op in device_ops)


@gpu_only
def test_pinned_pipeline_refuses_pageable_arrays():
    x, w, out_shape = _layer()
    with pipeline.Pipelined(x.shape, w, NAIVE.launch, host_memory="pinned") as pipelined:
        with pytest.raises(ValueError, match="pinned"):
            pipelined.run(x, np.empty(out_shape, dtype=np.float32))


def test_launch_costs_are_measured_every_way(tmp_path):
    found = launch.measure(launches=3, repeats=1, chain=3, replays=2)
    costs = {c["name"]: c for c in found["costs"]}
    assert set(costs) == {
        "numba-device-arrays",
        "numba-cupy-arrays",
        "numba-wrapped-once",
        "cupy-rawkernel",
        "numba-chain-direct",
        "graph-replay",
    }
    for name in ("numba-device-arrays", "numba-chain-direct", "graph-replay"):
        assert costs[name]["median_us"] > 0
    if ON_GPU:
        assert found["graph"]["nodes"] == 3
        assert found["graph"]["replay_gpu_us_per_kernel"] > 0
    if not ON_GPU:
        assert costs["cupy-rawkernel"]["error"] and costs["cupy-rawkernel"]["median_us"] is None
    json.dumps(found)
    assert plot.launch_costs(found, tmp_path / "launch.png").stat().st_size > 0


@pytest.mark.skipif(ON_GPU, reason="on a GPU the benchmark is python -m ladder.transfer")
def test_benchmark_writes_results_and_figures(tmp_path):
    out = tmp_path / "sim-transfer.json"
    code = bench.main(["--out", str(out), "--rung", "naive", "--layers", "conv1"])
    assert code == 0  # the time targets are not judged in the simulator
    doc = json.loads(out.read_text())
    assert doc["kind"] == "transfer" and doc["simulated"] and doc["gpu"]
    assert doc["overlap"]["conv1"]["identical"]
    assert set(doc["overlap"]["conv1"]["best"]) == set(pipeline.HOST_MEMORIES)
    assert {c["met"] for name, c in doc["checks"].items() if "target" in c} == {None}
    staged = doc["checks"]["conv1 overlap efficiency, pageable, staged through pinned"]
    assert 0 < staged["host_bound"] <= 1.0
    assert "host_bound" not in doc["checks"]["conv1 overlap efficiency, pinned host memory"]
    assert doc["overlap"]["conv1"]["host_copy"]["bound_ms"] > 0
    for suffix in ("bandwidth", "timeline-conv1", "launch"):
        assert (tmp_path / f"sim-transfer-{suffix}.png").stat().st_size > 0
    assert any(line.startswith("check:") for line in bench.summary(doc))
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{bench.README_START}\nold\n{bench.README_END}\nbottom\n")
    figures = tmp_path / "again"
    argv = ["--from-results", str(out), "--readme", str(readme), "--figures", str(figures)]
    assert bench.main(argv) == 0
    text = readme.read_text()
    assert "old" not in text and text.startswith("top\n") and text.endswith("bottom\n")
    assert "| conv1 overlap efficiency, pinned host memory |" in text
    assert "| conv1 overlap efficiency, pageable, staged through pinned |" in text
    assert "the shortest staging these rates allow" in text
    assert "| run | host memory | chunks × streams | ms | largest GPU stage | host copies |" in text
    assert "not judged (simulator)" in text and (figures / "sim-transfer-launch.png").exists()
    (tmp_path / "other.json").write_text(json.dumps({"gpu": "x", "runs": []}))
    with pytest.raises(ValueError, match="not a results file"):
        bench.main(["--from-results", str(tmp_path / "other.json")])


def test_call_costs_plot_the_launch_rows_and_the_libraries(tmp_path):
    """The notebook's figure of a host-time run (lab/harness/2026-11-25-hosttime/): rung
    launchers with PyTorch inputs and library calls, not the dispatcher rows, other inputs or
    bare launches."""

    def row(kind, label, inputs="torch", path="launch", host=15.0, graph=None):
        return {"kind": kind, "label": label, "inputs": inputs, "path": path, "dtype": "float32",
                "host_us_median": host, "back_to_back_us": host, "graph_us": graph}  # fmt: skip

    doc = {
        "label": "test",
        "device": {"name": "NVIDIA H200"},
        "rows": [
            row("rung", "gemm/naive", graph=4000.0),
            row("rung", "gemm/naive", path="dispatcher"),
            row("rung", "gemm/naive", inputs="cupy"),
            row("library", "torch.matmul(a, b, out=c)", inputs="torch", path=""),
            row("bare launch", "cupy RawKernel: empty0", inputs="", path=""),
            row("rung", "conv/naive", host=None),  # a failed row
        ],
    }
    chosen = plot.call_cost_rows(doc)
    assert [(r["label"], r["kind"]) for r in chosen] == [
        ("gemm/naive", "rung"),
        ("torch.matmul(a, b, out=c)", "library"),
    ]
    path = plot.call_costs(doc, tmp_path / "calls.png")
    assert path.exists() and path.stat().st_size > 0


def test_call_parts_say_they_need_a_gpu_in_the_simulator():
    if ON_GPU:
        parts = launch.call_parts(calls=5)
        assert parts["host_us"] > 0 and parts["graph_us"] > 0 and parts["mode"] == "raw"
        assert set(parts["parts_us"]) >= {"launch (cuLaunchKernel)", "the whole call"}
    else:
        assert launch.call_parts() == {
            "error": "needs a GPU: the simulator launches every kernel through Numba"
        }
