"""Shared fixtures. Importing ladder first chooses GPU or simulator for the whole session."""

import numpy as np
import pytest

import ladder  # noqa: F401
from ladder.core import device

ON_GPU = device.gpu_available()
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU; runs on the GPU machine")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
