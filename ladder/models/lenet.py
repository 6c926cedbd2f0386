"""The course's network: a modified LeNet-5 on Fashion-MNIST-sized images (86 x 86, one
channel), whose two convolution layers are the conv ladder's ``CONV1`` and ``CONV2``.

conv1 (4 filters, 7 x 7) → ReLU → 2 x 2 max pool → conv2 (16 filters, 7 x 7) → ReLU → 2 x 2
max pool → flatten (16 x 17 x 17) → fully connected (``HIDDEN``) → ReLU → fully connected (10
classes) → softmax. The convolutions, each ReLU + pool, the fully connected layers and the
softmax run on the ladder's operators (``ops="ladder"``; ReLU + pool is one kernel of
``ladder.ops.pool``) or PyTorch's (``ops="torch"``), with the same weights.

``layers()`` lists the steps by name, as the course reports its op times per layer; a forward
is those steps in order. The weights are random (seeded): the check is that both sets of
operators predict the same classes, not that the network was trained.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from ladder.conv.layers import CONV1, CONV2
from ladder.models.common import operators

CLASSES = 10
HIDDEN = 128  # the first fully connected layer's width (our choice; the course leaves it open)
IMAGE = CONV1[3]  # 86: the input's height and width


def flat_features(image: int) -> int:
    """The features after the second pool for ``image`` x ``image`` inputs: 16 x 17 x 17 for
    the course's 86; ValueError for an image too small for the layers."""
    _, _, _, _, _, k1 = CONV1
    _, _, m2, _, _, k2 = CONV2
    side = ((image - k1 + 1) // 2 - k2 + 1) // 2
    if side < 1:
        raise ValueError(f"image must be at least {2 * (2 + k2 - 1) + k1 - 1} pixels, got {image}")
    return m2 * side * side


class LeNet(nn.Module):
    """The network, its weights drawn from ``seed`` (scaled by 1/√fan-in, so activations keep
    their size), in ``dtype`` on ``device``, calling ``ops`` ("ladder" or "torch"), for
    ``image`` x ``image`` inputs (the course's 86; smaller ones for tests in the simulator)."""

    def __init__(
        self,
        ops: str | SimpleNamespace = "ladder",
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        seed: int = 0,
        image: int = IMAGE,
    ) -> None:
        super().__init__()
        self.ops = operators(ops)
        self.image = image
        flat = flat_features(image)
        gen = torch.Generator().manual_seed(seed)

        def weight(*shape: int, fan_in: int) -> nn.Parameter:
            w = torch.randn(shape, generator=gen) / fan_in**0.5
            return nn.Parameter(w.to(device=device, dtype=dtype))

        _, c1, m1, _, _, k1 = CONV1
        _, c2, m2, _, _, k2 = CONV2
        self.conv1 = weight(m1, c1, k1, k1, fan_in=c1 * k1 * k1)
        self.conv2 = weight(m2, c2, k2, k2, fan_in=c2 * k2 * k2)
        self.fc1 = weight(flat, HIDDEN, fan_in=flat)  # (in, out): ladder.ops.linear's layout
        self.fc1_bias = weight(HIDDEN, fan_in=HIDDEN)
        self.fc2 = weight(HIDDEN, CLASSES, fan_in=HIDDEN)
        self.fc2_bias = weight(CLASSES, fan_in=CLASSES)

    def layers(self) -> list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]]:
        """The forward's steps, named as the course's per-layer report names them."""
        ops = self.ops
        return [
            ("conv1", lambda x: ops.conv2d(x, self.conv1)),
            ("relu+pool1", ops.relu_max_pool2d),
            ("conv2", lambda x: ops.conv2d(x, self.conv2)),
            ("relu+pool2", ops.relu_max_pool2d),
            ("fc1+relu", lambda x: F.relu(ops.linear(x.flatten(1), self.fc1, self.fc1_bias))),
            ("fc2", lambda x: ops.linear(x, self.fc2, self.fc2_bias)),
            ("softmax", ops.softmax),
        ]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class probabilities (B, 10) of images ``x`` (B, 1, 86, 86)."""
        side = self.image
        if x.dim() != 4 or tuple(x.shape[1:]) != (CONV1[1], side, side):
            raise ValueError(f"x must be (B, 1, {side}, {side}) images, got {tuple(x.shape)}")
        for _, step in self.layers():
            x = step(x)
        return x
