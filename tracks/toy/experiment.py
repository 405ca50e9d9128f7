"""One toy model: an MLP of `depth` layers, plain or residual, trained on the spirals.

Each of the `depth` layers is `LayerNorm -> Dense(width) -> ReLU` (the
LayerNorm without weights of its own: half the variables to trace); the
residual net adds each layer's input back (`rk.Residual`), the plain net does
not: the same weights, only the shortcut differs, as in He et al.'s Figure 6
(where both nets have BatchNorm). A 2 -> width input layer and a width -> 2
classifier sit around the stack.

The trained nets of the deepest depth are then taken apart (`trained_studies`):
Veit et al. 2016's lesions (one layer removed, k layers removed) and paths,
the stream as x_0 plus every layer's output, and Li et al. 2018's loss
landscape; each kept to about a second on these small nets. (Veit et al.'s
swaps of neighbouring layers are left out: 19 more passes of each net, and
lesion.png shows the same contrast; `diagnostics.swap_blocks` measures them.)
"""

import dataclasses
import time

import keras
import numpy as np

import residual_keras as rk
from residual_keras import diagnostics
from tracks.common.instruments import dynamics_summary, jsonable
from tracks.common.training import fit_with_backup
from tracks.toy.results import ToyModel

# The decision boundary is drawn from the model's P(class 1) on this grid over [-LIMIT, LIMIT]^2.
BOUNDARY_POINTS = 41
LIMIT = 1.25
# What the trained nets of the deepest depth are measured with: seconds, not minutes.
REMOVED = (1, 2, 4, 8, 16)  # k layers removed at once (those up to the depth) ...
DELETION_DRAWS = 3  # ... in this many random sets each
PATH_POINTS = 32  # test points whose gradient is split by path length
LANDSCAPE_STEPS = 7  # the loss landscape's grid: 7 x 7 evaluations of the training points ...
LANDSCAPE_SPAN = 0.25  # ... a quarter of the weights' norm each way (at 1, Li et al.'s span, one step leaves the basin)


@dataclasses.dataclass(frozen=True)
class ToySpec:
    variant: str
    depth: int

    @property
    def id(self):
        return f"{self.variant}-{self.depth}"

    @property
    def plain(self):
        """No layer adds its input back (the instruments' c^l line)."""
        return self.variant == "plain"

    @property
    def cost(self):
        """The training time relative to the grid's other models (for the time left)."""
        return self.depth


def grid(config):
    return [ToySpec(variant, depth) for depth in sorted(config.depths) for variant in config.variants]


def build_model(spec, ctx):
    """The (uncompiled) MLP of one grid point: LayerNorm -> Dense -> ReLU layers, each `rk.Residual` or plain."""
    config = ctx.config
    inputs = keras.Input((2,), name="point")
    x = keras.layers.Dense(config.width, name="embed")(inputs)
    for index in range(spec.depth):
        branch = keras.Sequential([keras.layers.LayerNormalization(center=False, scale=False),
                                   keras.layers.Dense(config.width, activation="relu")], name=f"layer{index}")
        x = rk.Residual(branch, residual=spec.variant == "residual", name=f"block{index}")(x)
    logits = keras.layers.Dense(2, name="classifier")(x)
    return keras.Model(inputs, logits, name=spec.id.replace("-", "_"))


def instrument_batch(ctx):
    """(x, y): the first training points, the fixed batch the instruments read."""
    count = ctx.config.instrument_points
    return ctx.data.x_train[:count], ctx.data.y_train[:count]


def epochs_of(config, data):
    """epoch -> the finite dataset of that epoch: `steps_per_epoch` batches, shuffled by (seed, epoch)."""
    import tensorflow as tf

    def epoch_data(epoch):
        rng = np.random.default_rng([config.seed, epoch])
        order = np.concatenate([rng.permutation(len(data.y_train))
                                for _ in range(-(-config.steps_per_epoch * config.batch_size // len(data.y_train)))])
        order = order[:config.steps_per_epoch * config.batch_size]
        return tf.data.Dataset.from_tensor_slices((data.x_train[order], data.y_train[order])).batch(config.batch_size)

    return epoch_data


def scores(model, x, y):
    """(mean cross-entropy, accuracy) on all of `x` in one call (`evaluate` would trace a function first)."""
    logits = model(x, training=False)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, logits)
    predicted = np.argmax(keras.ops.convert_to_numpy(logits), axis=-1)
    return float(keras.ops.convert_to_numpy(loss)), float(np.mean(predicted == y))


def boundary(model):
    """P(class 1) of the model on the BOUNDARY_POINTS x BOUNDARY_POINTS grid, rounded (rows: y, columns: x)."""
    axis = np.linspace(-LIMIT, LIMIT, BOUNDARY_POINTS, dtype="float32")
    grid_x, grid_y = np.meshgrid(axis, axis)
    points = np.stack([grid_x.ravel(), grid_y.ravel()], axis=1)
    probability = keras.ops.convert_to_numpy(keras.ops.softmax(model(points, training=False)))[:, 1]
    return np.round(probability.reshape(grid_x.shape), 3).tolist()


def trained_studies(spec, model, ctx):
    """A trained net taken apart: what results.json keeps of it (about a second each).

    - lesion, deletion (Veit et al. 2016): test accuracy with each layer
      removed, with k random layers removed at once;
    - paths (Veit et al., residual nets only: a plain net has one path): the
      gradient at the first layer's input carried by paths of each length;
    - decomposition: x_L against x_0 plus every layer's branch output (exact
      for `x + f(x)`; a plain layer replaces the stream instead);
    - landscape (Li et al. 2018): the training loss on a plane of two random
      directions around the trained weights.
    """
    config, data = ctx.config, ctx.data
    test, points = (data.x_test, data.y_test), len(data.y_test)
    studies = {
        "lesion": diagnostics.lesion(model, test, metric="accuracy", batch_size=points),
        "deletion": diagnostics.delete_blocks(model, test, num_removed=[k for k in REMOVED if k <= spec.depth],
                                              draws=DELETION_DRAWS, metric="accuracy", batch_size=points,
                                              seed=config.seed),
        "decomposition": diagnostics.stream_decomposition(model, instrument_batch(ctx)[0]),
        "landscape": diagnostics.loss_landscape(model, data.x_train, data.y_train, steps=LANDSCAPE_STEPS,
                                                span=LANDSCAPE_SPAN, seed=config.seed, batch_size=len(data.y_train)),
    }
    if spec.variant != "plain":
        studies["paths"] = diagnostics.path_gradients(model, data.x_test[:PATH_POINTS], data.y_test[:PATH_POINTS],
                                                      seed=config.seed)
    return jsonable(studies)


def train_one(spec, ctx):
    """Trains one grid point; returns its results entry (losses, boundary, dynamics; the deepest: its studies)."""
    config, data, runtime, run, log = ctx.config, ctx.data, ctx.runtime, ctx.run, ctx.log
    epoch_data = ctx.shared("epochs", lambda: epochs_of(config, data))  # the same batches for every model
    with runtime.strategy.scope():
        model = build_model(spec, ctx)
        model.compile(optimizer=keras.optimizers.Adam(config.learning_rate),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                      jit_compile=runtime.xla,
                      steps_per_execution=runtime.steps_per_execution(config.steps_per_execution))
    params = rk.count_trainable_params(model)
    log(f"{spec.id}: {params:,} trainable parameters, {config.epochs} epochs x {config.steps_per_epoch} steps")
    x, y = instrument_batch(ctx)
    dynamics = rk.TrainingDynamics(x, y, path=run.path / "dynamics" / f"{spec.id}.csv")
    start = time.perf_counter()
    outcome = fit_with_backup(model, epoch_data, run=run, model_id=spec.id, epochs=config.epochs,
                              extra_callbacks=[dynamics], log=log, verbose=0)
    diverged = outcome["diverged_epoch"]
    result = ToyModel(
        id=spec.id, variant=spec.variant, depth=spec.depth, params=params,
        diverged=diverged is not None,
        diverged_at=None if diverged is None else f"epoch {diverged + 1}",
        dynamics=dynamics_summary(rk.TrainingDynamics.read_csv(dynamics.path)),
        fit_seconds=outcome["seconds"], dynamics_seconds=dynamics.seconds,
    )
    if diverged is None:
        # The whole training set once more at the end (the last epoch's running mean lags the weights).
        train_loss, train_accuracy = scores(model, data.x_train, data.y_train)
        _, test_accuracy = scores(model, data.x_test, data.y_test)
        result = dataclasses.replace(result, train_loss=train_loss, train_accuracy=train_accuracy,
                                     test_accuracy=test_accuracy, boundary=boundary(model))
        if spec.depth == max(config.depths):
            started = time.perf_counter()
            result = dataclasses.replace(result, **trained_studies(spec, model, ctx))
            result.studies_seconds = time.perf_counter() - started
            log(f"{spec.id}: lesions, paths, stream and loss landscape in {result.studies_seconds:.1f} s")
    result.seconds = time.perf_counter() - start
    log(f"{spec.id}: training loss {result.train_loss if result.train_loss is not None else 'NaN'}")
    return result
