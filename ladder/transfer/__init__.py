"""Data movement: pinned memory, streams and CUDA graphs.

Not a ladder of kernels but the costs around them, measured the same way on every GPU:

- ``transfers``: host-device bandwidth of pageable, pinned and mapped (zero-copy) host memory
  over sizes from 4 KiB to 1 GiB, and the measured peak of the link;
- ``pipeline``: a convolution layer from host memory to host memory, sequential against
  chunked over several streams with pinned, double-buffered staging, its overlap efficiency
  and its timeline, from CUDA events (with NVTX ranges for Nsight Systems);
- CUDA graphs through ``ladder.core.graphs``, the project's helper that captures launches on
  a stream into a graph and replays it;
- ``launch``: what a launch costs on the host, several ways, and what a graph's replay costs;
- ``plot``: the bandwidth, timeline and launch figures; ``bench``: all of it
  (``python -m ladder.transfer``; ``ladder bench --problems transfer`` for the canonical file).

The convolution comes from ``ladder.conv``: any rung's launcher (``launch(x, w, out, *,
stream)``), by default the highest rung that runs here.
"""
