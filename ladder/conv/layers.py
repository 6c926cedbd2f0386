"""The two layers of the course's network (a modified LeNet-5 on Fashion-MNIST) that the
convolution ladder is measured on, as sizes (B, C, M, H, W, K) with a batch of 10,000 images.

Their own module so that the problem, the rungs and the per-layer report (``summary``) all
take them from below.
"""

CONV1 = (10000, 1, 4, 86, 86, 7)
CONV2 = (10000, 4, 16, 40, 40, 7)
LAYERS = {"conv1": CONV1, "conv2": CONV2}
