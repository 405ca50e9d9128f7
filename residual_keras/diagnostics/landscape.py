"""The loss around a trained network's weights (`loss_landscape`; Li et al. 2018).

Li, Xu, Taylor, Studer and Goldstein 2018, "Visualizing the Loss Landscape
of Neural Nets": the loss on the plane through the trained weights theta
spanned by two random directions d1 and d2,

    L(theta + a d1 + b d2),     a, b in [-span, span],

with each direction *filter-normalised*: drawn from a normal distribution,
then every filter of every weight (one slice along the weight's last axis:
a convolution's or a dense layer's output unit) rescaled to the norm of the
same filter of theta. A network whose weights can be rescaled without
changing its function (BatchNorm after a convolution) then gets a plane whose
scale means the same for every layer, and two networks' planes can be set
side by side. As in the paper, the weights of one axis (biases, BatchNorm's
gamma and beta, scalars) are left at theta (their direction is 0), and so
are the non-trainable ones (BatchNorm's moving statistics): the loss is the
inference-mode loss, of the model as it predicts.

What is computed from the grid, so that a figure's claim is a measurement:

- `center_loss`: L(theta);
- `edge_rise`: the mean loss on the grid's outer ring minus L(theta): how
  much the loss rises a distance `span` away, on average;
- `curvature`: the second difference of L at theta along each direction
  (in loss per unit of the normalised direction squared), their mean;
- `nonconvex_share`: the share of the grid's inner points where the
  surface's 2 x 2 Hessian (central differences) has a negative eigenvalue
  larger than a tenth of its largest eigenvalue in size: a bowl has none,
  a chaotic surface many (the paper maps the Hessian's own eigenvalue
  ratio; this is its two-dimensional stand-in, measured on the plane shown).
"""

from typing import Optional

import keras
import numpy as np

from residual_keras.checks import check_positive_int
from residual_keras._types import ArrayLike, Batches, LossLike, Results
from residual_keras.diagnostics import _autodiff, _inputs, _losses
from residual_keras.diagnostics._state import instrument
from residual_keras.diagnostics._tensors import _to_numpy

# An inner grid point is non-convex when its Hessian's negative eigenvalue is at least this share of the largest.
NONCONVEX_RATIO = 0.1


def filter_normalised_direction(weights, rng):
    """A random direction for each weight array: per filter (last axis) as large as the weight's own filter.

    Arrays of one axis or none (biases, normalisation parameters, scalars)
    get a zero direction.
    """
    directions = []
    for weight in weights:
        if weight.ndim <= 1:
            directions.append(np.zeros_like(weight))
            continue
        direction = rng.standard_normal(weight.shape)
        axes = tuple(range(weight.ndim - 1))
        filter_norms = np.sqrt(np.sum(np.square(weight), axis=axes, keepdims=True))
        direction_norms = np.sqrt(np.sum(np.square(direction), axis=axes, keepdims=True))
        directions.append(direction * filter_norms / np.maximum(direction_norms, 1e-30))
    return directions


def grid_measures(grid, alphas):
    """center_loss, edge_rise, curvature and nonconvex_share of a (steps, steps) grid of losses."""
    center = len(alphas) // 2
    step = float(alphas[1] - alphas[0])
    ring = np.concatenate([grid[0, :], grid[-1, :], grid[1:-1, 0], grid[1:-1, -1]])
    ring = ring[np.isfinite(ring)]
    second_a = (grid[2:, 1:-1] - 2 * grid[1:-1, 1:-1] + grid[:-2, 1:-1]) / step ** 2
    second_b = (grid[1:-1, 2:] - 2 * grid[1:-1, 1:-1] + grid[1:-1, :-2]) / step ** 2
    cross = (grid[2:, 2:] - grid[2:, :-2] - grid[:-2, 2:] + grid[:-2, :-2]) / (4 * step ** 2)
    mean = (second_a + second_b) / 2
    radius = np.sqrt(((second_a - second_b) / 2) ** 2 + cross ** 2)
    low, high = mean - radius, mean + radius  # the eigenvalues of [[a, c], [c, b]]
    largest = np.maximum(np.abs(low), np.abs(high))
    nonconvex = (low < 0) & (np.abs(low) >= NONCONVEX_RATIO * largest) & (largest > 0)
    finite = np.isfinite(low) & np.isfinite(high)
    return {
        "center_loss": float(grid[center, center]),
        "edge_rise": float(np.mean(ring) - grid[center, center]) if ring.size else float("nan"),
        "curvature": float((second_a[center - 1, center - 1] + second_b[center - 1, center - 1]) / 2),
        "nonconvex_share": float(np.mean(nonconvex[finite])) if finite.any() else float("nan"),
    }


class _Evaluator:
    """The mean loss of a model over fixed batches, its forward pass compiled.

    On TensorFlow a traced call of the model (a `tf.function`, which also
    reads a distribution strategy's mirrored weights; `predict_on_batch`
    would split a batch over the replicas and return each replica's
    outputs); elsewhere the model's own compiled `predict_on_batch`.
    Neither keeps the Keras mask of a padded output, so each batch's mask
    is taken once from an eager call, and the loss at every grid point is
    over its real positions, as Keras' losses average.
    """

    def __init__(self, model, x, y, batch_size, loss, output_index):
        self.model = model
        self.data = list(_inputs.batches(x, y, batch_size))
        if not self.data:
            raise ValueError("The data yielded no examples.")
        outputs = model(self.data[0][0], training=False)
        self.names = _losses.ordered_outputs(model, outputs)[0]
        output, self.index, self.count = _losses.choose_output(model, outputs, output_index)
        self.objective = _losses.Objective(model, output, self.index, self.count, loss, names=self.names)
        self.masks = [None] * len(self.data)
        if _losses.output_mask(output) is not None:  # padding, which depends on the inputs only
            self.masks = [self._eager_mask(batch_x) for batch_x, _ in self.data]
        self.sizes = np.array([_inputs.batch_length(batch_x) for batch_x, _ in self.data], dtype="float64")
        if keras.backend.backend() == "tensorflow":
            self.forward = _autodiff.trace(lambda batch_x: model(batch_x, training=False))
        else:
            self.forward = model.predict_on_batch

    def _eager_mask(self, batch_x):
        output, _, _ = _losses.choose_output(self.model, self.model(batch_x, training=False), self.index)
        return _losses.output_mask(output)

    def __call__(self):
        total = 0.0
        for (batch_x, batch_y), size, mask in zip(self.data, self.sizes, self.masks):
            outputs = self.forward(batch_x)
            output, _, _ = _losses.choose_output(self.model, outputs, self.index)
            value = float(_to_numpy(self.objective(self.objective.targets(batch_y),
                                                   keras.ops.convert_to_tensor(output), mask)))
            total += size * value
        return total / float(self.sizes.sum())


@instrument
def loss_landscape(
    model: keras.Model,
    x: Batches,
    y: Optional[ArrayLike] = None,
    *,
    steps: int = 15,
    span: float = 1.0,
    seed: int = 0,
    loss: LossLike = None,
    output_index: Optional[int] = None,
    batch_size: int = 256,
) -> Results:
    """The loss on a plane of filter-normalised random directions around the weights (Li et al. 2018).

    Every weight is restored exactly afterwards (the values are written
    back from a copy), and the model is otherwise left as it was.

    Args:
        model: a built keras.Model (any model the other instruments take:
            the loss is the model's own, see `gradient_norms`).
        x: inputs, an (x, y) tuple, or a dataset of (x, y) batches (all of
            it is evaluated at every grid point: choose a few hundred examples).
        y: targets, with array `x`.
        steps: int, odd, >= 3. Grid points per direction (steps x steps
            evaluations of the whole data). Default 15.
        span: float > 0. The grid covers [-span, span] in units of the
            normalised directions (1 = as far as the weights' own norm,
            filter by filter). Default 1.
        seed: int. The seed of the two random directions.
        loss: the loss (see `gradient_norms`); default the model's.
        output_index: for a model with several outputs, the one scored.
        batch_size: int. Examples per forward pass.

    Returns:
        dict with `model`, `alphas` (float64 (steps,): the grid's
        coordinates along each direction), `grid` (float64 (steps, steps):
        `grid[i, j]` = L(theta + alphas[i] d1 + alphas[j] d2); NaN where
        the loss is not finite), `slice` (float64 (steps,): the 1-D slice
        along d1, `grid[:, steps // 2]`), `loss` (the loss used),
        `examples`, `directions` (how many weight arrays move), and the
        measured `center_loss`, `edge_rise`, `curvature` and
        `nonconvex_share` (see the module's docstring).
    """
    if not (isinstance(steps, int) and not isinstance(steps, bool) and steps >= 3 and steps % 2 == 1):
        raise ValueError(f"steps must be an odd integer >= 3 (the grid holds theta at its centre), got {steps!r}.")
    if not (isinstance(span, (int, float)) and not isinstance(span, bool) and 0 < span < np.inf):
        raise ValueError(f"span must be a positive finite number, got {span!r}.")
    check_positive_int("batch_size", batch_size)
    if not model.built:
        raise ValueError(f"Model {model.name!r} is not built: call it on data (or fit it) first.")
    evaluator = _Evaluator(model, x, y, batch_size, loss, output_index)
    variables = list(model.trainable_variables)
    theta = [np.array(_to_numpy(variable), dtype="float64") for variable in variables]
    rng = np.random.default_rng(seed)
    first = filter_normalised_direction(theta, rng)
    second = filter_normalised_direction(theta, rng)
    moving = [(variable, start, d1, d2) for variable, start, d1, d2 in zip(variables, theta, first, second)
              if start.ndim > 1]
    alphas = np.linspace(-span, span, steps)
    grid = np.full((steps, steps), np.nan)
    for i, a in enumerate(alphas):
        for j, b in enumerate(alphas):
            for variable, start, d1, d2 in moving:
                variable.assign((start + a * d1 + b * d2).astype(keras.backend.standardize_dtype(variable.dtype)))
            value = evaluator()
            grid[i, j] = value if np.isfinite(value) else np.nan
    return {
        "model": model.name,
        "alphas": alphas,
        "grid": grid,
        "slice": grid[:, steps // 2].copy(),
        "loss": evaluator.objective.description,
        "examples": int(evaluator.sizes.sum()),
        "directions": len(moving),
        **grid_measures(grid, alphas),
    }
