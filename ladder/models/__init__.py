"""Models built on ``ladder.ops``: the course's network (``lenet``) and a GPT-2 transformer
block (``gpt``), each runnable on the ladder's operators or PyTorch's with the same weights.
Needs PyTorch: ``pip install 'numba-ladder[ops]'``."""
