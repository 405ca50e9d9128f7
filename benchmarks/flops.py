"""Floating-point work of one training step, counted from the architecture, and the machine's fp32 peak.

    python benchmarks/flops.py      # the peak alone (JSON): numpy's and TensorFlow's matrix products

Counting convention: a multiply-add is 2 FLOPs; only convolutions and matrix
products are counted (normalisation, activations, additions and the optimizer
are a few % of the total and left out); a training step costs 3x the forward
pass (the backward pass computes the gradient of each product twice: with
respect to its input and to its weights).
"""

import time

import numpy as np

TRAINING_OVER_FORWARD = 3


def cifar_resnet_forward_flops(depth, width=16, projection_shortcuts=True, image_size=32, classes=10):
    """Forward FLOPs per image of He et al.'s CIFAR ResNet (depth 6n + 2).

    Three stages of n basic blocks (two 3x3 convolutions each) at widths w, 2w,
    4w on maps of size s, s/2, s/4; the first block of stages 2 and 3 halves
    the map with stride 2 and, with projection shortcuts (option B), adds a
    1x1 convolution; option A shortcuts cost nothing.
    """
    if (depth - 2) % 6:
        raise ValueError(f"depth must be 6n + 2, got {depth}")
    blocks = (depth - 2) // 6
    macs = image_size**2 * 9 * 3 * width  # the stem: 3x3, 3 -> w channels
    channels_in = width
    for stage in range(3):
        channels = width * 2**stage
        pixels = (image_size // 2**stage) ** 2
        macs += pixels * 9 * channels_in * channels  # first convolution of the stage
        macs += pixels * 9 * channels * channels * (2 * blocks - 1)  # the other 2n - 1
        if projection_shortcuts and channels_in != channels:
            macs += pixels * channels_in * channels  # 1x1 projection
        channels_in = channels
    macs += channels_in * classes  # the classifier after global pooling
    return 2 * macs


def char_gpt_forward_flops(layers, width, sequence_length, vocabulary, mlp_ratio=4):
    """Forward FLOPs per token of a GPT block stack (nanoGPT's count).

    Per layer and token: query/key/value and output projections 4 d^2 MACs,
    the MLP 2 r d^2, attention scores and the weighted sum of values 2 T d
    (every key position counted, as dense attention computes them); then the
    output projection to the vocabulary d V. Embedding lookups cost nothing.
    """
    per_layer = (4 + 2 * mlp_ratio) * width**2 + 2 * sequence_length * width
    return 2 * (layers * per_layer + width * vocabulary)


PEAK_SIZES = (1024, 4096)  # square matrices: a cache-sized product and a large one
PEAK_LIBRARIES = ("numpy", "tensorflow")


def _matmul(library, size):
    """A float32 size x size matrix product in `library`, as a function of no arguments."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    if library == "numpy":
        return lambda: a @ b
    if library == "tensorflow":
        import tensorflow as tf

        a, b = tf.constant(a), tf.constant(b)
        product = tf.function(tf.linalg.matmul, autograph=False)
        return lambda: product(a, b).numpy()
    raise ValueError(f"unknown library {library!r}; accepted: {', '.join(PEAK_LIBRARIES)}")


def fp32_matmul_peak(seconds=6.0, sizes=PEAK_SIZES, slot=1.0, libraries=PEAK_LIBRARIES):
    """GFLOP/s of float32 matrix products, per library and size: best and median of `slot`-second slots.

    Both libraries use every core the process may use: numpy through its
    BLAS (OpenBLAS in the wheels), TensorFlow through oneDNN, the library the
    models run on. They differ by up to 2x on one machine (an AMD EPYC with
    AVX-512: OpenBLAS 220-230 GFLOP/s at every size, oneDNN 358 at 1024 and
    464 at 4096), so the machine's peak is the best of every library and
    size: what it demonstrably sustains on dense fp32 arithmetic. `seconds`
    is spent on each (library, size).
    """
    measured = {}
    for library in libraries:
        for size in sizes:
            product = _matmul(library, size)
            product()  # load the BLAS and its threads (TensorFlow: trace the function) before timing
            rates, end = [], time.perf_counter() + seconds
            while time.perf_counter() < end:
                count, start = 0, time.perf_counter()
                while time.perf_counter() - start < slot:
                    product()
                    count += 1
                rates.append(2 * size**3 * count / (time.perf_counter() - start) / 1e9)
            measured[f"{library} {size}"] = {"best_gflops": round(max(rates), 1),
                                             "median_gflops": round(float(np.median(rates)), 1),
                                             "slots": [round(rate, 1) for rate in rates]}
    best = max(measured, key=lambda name: measured[name]["best_gflops"])
    return {"best_gflops": measured[best]["best_gflops"], "median_gflops": measured[best]["median_gflops"],
            "best_of": best, "measured": measured}


if __name__ == "__main__":
    # A fresh process for the peak (throughput.py): TensorFlow's thread pools stay out of the benchmark's process.
    import json

    print(json.dumps(fp32_matmul_peak()))


__all__ = ["TRAINING_OVER_FORWARD", "char_gpt_forward_flops", "cifar_resnet_forward_flops", "fp32_matmul_peak"]
