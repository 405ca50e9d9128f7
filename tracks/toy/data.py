"""Two interleaved spirals in the plane: a data set a shallow MLP fits and a deep plain one struggles with."""

import dataclasses
import hashlib

import numpy as np



@dataclasses.dataclass(frozen=True, eq=False)
class SpiralData:
    """Points (float32, (N, 2)) and their class (int32, 0 or 1); the test points are drawn apart."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    banner: str | None = None

    @property
    def title(self):
        return "two spirals"

    plot_banner = None  # the points are always drawn: no fallback to warn of

    @property
    def description(self):
        """The line `data: ...` printed before training."""
        return f"two spirals, {len(self.y_train)} training and {len(self.y_test)} test points"


def spirals(points, noise, seed, turns=1.5):
    """`points` points on two spirals of `turns` turns, half a turn apart, with Gaussian `noise`."""
    rng = np.random.default_rng(seed)
    radius = np.sqrt(rng.uniform(0, 1, points))  # uniform density over the disc
    label = rng.integers(0, 2, points)
    angle = radius * turns * 2 * np.pi + np.pi * label
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    x += rng.normal(0, noise, x.shape)
    return x.astype("float32"), label.astype("int32")


def load(config):
    """The training points (from the run's seed) and as many test points (another draw)."""
    x_train, y_train = spirals(config.points, config.noise, config.seed)
    x_test, y_test = spirals(config.points, config.noise, config.seed + 10_000)
    return SpiralData("spirals", x_train, y_train, x_test, y_test)


def fingerprint(data):
    digest = hashlib.sha256()
    for array in (data.x_train, data.y_train, data.x_test, data.y_test):
        digest.update(np.ascontiguousarray(array).tobytes())
    return {"source": data.name, "train_points": len(data.y_train), "sha256": digest.hexdigest()}
