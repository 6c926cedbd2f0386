"""Exercises for the notebooks that run without a GPU: ``from ladder.exercises import nb01_gemm``,
then call a ``check_<name>(answer)``. A wrong answer raises ``AssertionError`` with a hint; a
right one returns a short message. Each check computes the right answer itself (from the
problem's and the rungs' constants, a lane model, the compiler, or by running your code in
Numba's simulator), never from ``solutions.py``, which holds worked answers: read it last.

One module per notebook: ``nb00_start_here``, ``nb01_gemm``, ``nb02_tensor_cores``,
``nb03_conv``, ``nb04_streams_and_graphs``, ``nb05_fusion``, ``nb06_attention``,
``nb07_conv_hopper``, ``nb08_models``, ``nb09_moe``.
"""

EXERCISES = {
    "nb00_start_here": ("copy_time", "roofline"),
    "nb01_gemm": ("coalescing", "shared_tiling", "local_array"),
    "nb02_tensor_cores": (
        "bank_conflicts",
        "fragment_registers",
        "mma_count",
        "copy_instructions",
        "copy_waits",
        "epilogue_sectors",
        "fp8_stage",
        "descriptor_fields",
        "core_matrix",
    ),
    "nb03_conv": ("conv1_shape_flops", "quads_per_window", "quad_words", "job_rounds"),
    "nb04_streams_and_graphs": ("pipeline_time", "graph_launches", "call_costs"),
    "nb05_fusion": ("fusion_bytes", "online_softmax"),
    "nb06_attention": (
        "score_memory",
        "flash_merge",
        "backward_products",
        "softmax_share",
        "consumer_registers",
        "wide_key_registers",
    ),
    "nb07_conv_hopper": ("filter_rows", "step_descriptor"),
    "nb08_models": ("matmul_backward", "softmax_backward"),
    "nb09_moe": ("offsets", "tile_padding"),
}
