"""Instruments that measure what the residual connection does to a network.

A residual block computes `x_l = x_{l-1} + f_l(x_{l-1})`, so its Jacobian is

    d x_l / d x_{l-1} = I + d f_l / d x_{l-1}

and through L blocks the chain rule gives

    d x_L / d x_0 = (I + J_L) (I + J_{L-1}) ... (I + J_1),     J_l = d f_l / d x_{l-1}.

Expanding the product, the identity term `I` survives at any depth: the
gradient `dLoss/dx_0 = (d x_L / d x_0)^T dLoss/dx_L` always has a direct path.
A plain stack `x_l = f_l(x_{l-1})` keeps only `J_L ... J_1`, whose norm
behaves like `c^L`: it vanishes for c < 1 and explodes for c > 1.

- Scalar chain, `f(x) = alpha * x` (`scalar_chain`): plain gain `alpha^L`,
  residual gain `(1 + alpha)^L`. alpha = -0.1, L = 50: 1e-50 against
  0.9^50 = 5.15e-3.
- If every `||J_l|| <= eps < 1`, then `(1 - eps)^L <= ||d x_L / d x_0|| <=
  (1 + eps)^L` for the residual stack and `<= eps^L` for the plain one
  (`jacobian_norm`).
- If every branch is 0 at initialisation (zero-gamma BatchNorm, Fixup,
  ReZero), `d x_L / d x_0` is the identity (up to the ReLU and option-A
  shortcuts, which only select and zero-pad): its norm is exactly 1.
- Without normalisation of the stream, `||x_L||^2 ~ ||x_0||^2 + sum_l
  ||f_l||^2`: branches of fixed size make the stream grow like sqrt(L)
  (`activation_norms`).
- Veit, Wilber, Belongie 2016 ("Residual Networks Behave Like Ensembles of
  Relatively Shallow Networks"): deleting one block of a trained residual
  network barely changes its accuracy; deleting a layer of a plain network
  destroys it (`lesion`).
- Transformers: what the attention and feed-forward sublayers write into the
  stream, relative to the stream (`stream_contributions`).

Which layers are "blocks": in a model, every instance of the library's block
classes (`BasicBlock`, `BottleneckBlock`, `FixupBasicBlock`,
`TransformerBlock`), in the model's layer order; pass `blocks=[names or
layers]` to choose others (a student's own residual layer, say). The blocks
must form a chain: block l+1's input is computed from block l's output alone
(other layers in between, such as Dropout, are allowed). The "stream points"
are `x_0` = the first block's input and `x_l` = the output of block l (after
any such in-between layers, i.e. block l+1's input; `x_L` is the last
block's output).

Keras 3 has no backend-agnostic API for gradients of intermediate tensors or
Jacobian-vector products, so `gradient_norms` and `jacobian_norm` use
TensorFlow's autodiff (`tf.GradientTape`, `tf.autodiff.ForwardAccumulator`)
and need the TensorFlow backend; TensorFlow is imported inside those two
functions only. The forward passes use `keras.ops`.

Every instrument returns plain data (a dict of lists, floats and numpy
arrays) that `residual_keras.plots` draws and that `json`-friendly reports
can store. None of them changes the model.
"""

import contextlib
import logging
import math
from fractions import Fraction
from numbers import Rational, Real

import keras
import numpy as np
from keras import ops

from residual_keras._checks import check_positive_int
from residual_keras.fixup import FixupBasicBlock
from residual_keras.resnet_blocks import _ConvBlock

METRICS = ("accuracy", "crossentropy")
_TINY = 1e-300
_EAGER_ITERATIONS = 3  # power iterations run eagerly before tracing a tf.function


# --------------------------------------------------------------------------
# Finding the blocks of a model
# --------------------------------------------------------------------------


def _transformer_block_class():
    """`TransformerBlock`, or None while residual_keras.transformer is absent."""
    try:
        from residual_keras.transformer import TransformerBlock
    except ImportError:
        return None
    return TransformerBlock


def block_classes():
    """The layer classes the instruments treat as residual-stream blocks."""
    classes = [_ConvBlock, FixupBasicBlock]
    transformer_block = _transformer_block_class()
    if transformer_block is not None:
        classes.append(transformer_block)
    return tuple(classes)


def find_blocks(model):
    """The model's library blocks, in the model's (input -> output) layer order."""
    return [layer for layer in model.layers if isinstance(layer, block_classes())]


def _call(layer, x, training):
    """Calls a Keras layer with `training`, any other callable with `x` only."""
    if isinstance(layer, keras.layers.Layer):
        return layer(x, training=training)
    return layer(x)


def _single(tensors):
    """A model's only input/output tensor (Keras keeps lists for several)."""
    if isinstance(tensors, (list, tuple)):
        return tensors[0] if len(tensors) == 1 else list(tensors)
    return tensors


class _Chain:
    """A model cut at its blocks: `pre -> (block, between)* -> head`.

    `pre` maps the model input to the first block's input, `between[l]` maps
    block l's output to block l+1's input (None when they are the same
    tensor), `head` maps the last block's output to the model output. Each
    piece is a functional sub-model sharing the model's layers (and weights).
    """

    def __init__(self, model, blocks=None):
        if not isinstance(model, keras.Model):
            raise TypeError(
                f"Expected a keras.Model, got {type(model).__name__}. For a "
                "list of layers use jacobian_norm(layers, x)."
            )
        self.model_name = model.name
        if blocks is None:
            self.blocks = find_blocks(model)
            if not self.blocks:
                raise ValueError(
                    f"Model {model.name!r} has no residual_keras blocks "
                    f"({', '.join(cls.__name__ for cls in block_classes())}); "
                    "pass blocks=[layer names] to choose the layers to measure."
                )
        else:
            if not blocks:
                raise ValueError("blocks must name at least one layer, got [].")
            self.blocks = [
                model.get_layer(block) if isinstance(block, str) else block
                for block in blocks
            ]
        self.names = [block.name for block in self.blocks]
        try:
            self.pre = self._piece(_single(model.inputs), self.blocks[0].input)
            self.between = [
                self._piece(left.output, right.input)
                for left, right in zip(self.blocks[:-1], self.blocks[1:])
            ]
            self.head = self._piece(self.blocks[-1].output, _single(model.outputs))
        except ValueError as error:
            raise ValueError(
                f"The blocks of model {model.name!r} ({', '.join(self.names)}) do "
                "not form a chain: each block's input must be computed from the "
                f"previous block's output alone. Keras said: {error}"
            ) from error

    @staticmethod
    def _piece(inputs, outputs):
        if inputs is outputs:
            return None
        return keras.Model(inputs, outputs)

    @staticmethod
    def _run(piece, x, training):
        return x if piece is None else piece(x, training=training)

    def first_input(self, x, training):
        """`x_0`: the input of the first block."""
        return self._run(self.pre, x, training)

    def step(self, index, x, training, block_fn=None):
        """Block `index` (or `block_fn` instead) and the layers after it."""
        if block_fn is None:
            x = self.blocks[index](x, training=training)
        else:
            x = block_fn(x)
        if index < len(self.between):
            x = self._run(self.between[index], x, training)
        return x

    def output(self, x, training):
        """The model output from the last block's output."""
        return self._run(self.head, x, training)

    def step_functions(self):
        """Functions `x_{l-1} -> x_l` in inference mode, one per block."""
        return [
            (lambda x, index=index: self.step(index, x, False))
            for index in range(len(self.blocks))
        ]


@contextlib.contextmanager
def _quiet_tensorflow_logger():
    """Hides TensorFlow's "triggered tf.function retracing" warning meanwhile."""
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _smallest_normal(dtype):
    """Smallest positive normal number of a float dtype (float32's for bfloat16)."""
    dtype = keras.backend.standardize_dtype(dtype)
    return float(np.finfo(dtype).tiny) if dtype in ("float16", "float64") else 1.2e-38


def _to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def _per_example_norm(x, dtype="float32"):
    """Euclidean norm of each example (all axes but the first)."""
    x = ops.cast(x, dtype)
    return ops.sqrt(ops.sum(ops.square(ops.reshape(x, (ops.shape(x)[0], -1))), axis=1))


def _per_example_rms(x):
    x = ops.cast(x, "float32")
    return ops.sqrt(ops.mean(ops.square(ops.reshape(x, (ops.shape(x)[0], -1))), axis=1))


# --------------------------------------------------------------------------
# The scalar chain: the worked example, exactly
# --------------------------------------------------------------------------


def _exact(number):
    """A Fraction for `number`; floats are read as the decimal they print as."""
    if isinstance(number, str):
        return Fraction(number)
    if isinstance(number, Rational) and not isinstance(number, bool):
        return Fraction(int(number.numerator), int(number.denominator))
    if isinstance(number, Real) and not isinstance(number, bool):
        value = float(number)
        if not math.isfinite(value):
            raise ValueError(f"alpha must be finite, got {number!r}.")
        return Fraction(repr(value))
    raise TypeError(f"alpha must be a real number or a decimal string, got {number!r}.")


def scalar_chain(alpha, depth):
    """Gains of L scalar blocks `f(x) = alpha * x`: plain and residual, exactly.

    A plain stack `x_l = alpha * x_{l-1}` has gain `d x_L / d x_0 = alpha^L`; a
    residual stack `x_l = x_{l-1} + alpha * x_{l-1}` has `(1 + alpha)^L`. The
    powers are computed exactly with `fractions.Fraction` and rounded once, so
    `scalar_chain(-0.1, 50)["plain_gain"] == 1e-50` holds exactly. A float
    alpha is read as the decimal it prints as (-0.1 means -1/10).

    Args:
        alpha: real number (int, float, Fraction or a decimal string).
        depth: int >= 1. L, the number of blocks.

    Returns:
        dict with `alpha` (float), `depth` (int), `plain_gain` and
        `residual_gain` (floats, signed), and for plotting `depths`
        (0..L) with `plain` and `residual` (float64 arrays of the gains
        after each depth; entries below ~1e-308 underflow to 0).

    Example:
        >>> chain = scalar_chain(-0.1, 50)
        >>> chain["plain_gain"], round(chain["residual_gain"], 10)
        (1e-50, 0.0051537752)
    """
    depth = check_positive_int("depth", depth)
    exact_alpha = _exact(alpha)
    plain = [exact_alpha**power for power in range(depth + 1)]
    residual = [(1 + exact_alpha) ** power for power in range(depth + 1)]
    return {
        "alpha": float(exact_alpha),
        "depth": depth,
        "plain_gain": float(plain[-1]),
        "residual_gain": float(residual[-1]),
        "depths": np.arange(depth + 1),
        "plain": np.array([float(value) for value in plain]),
        "residual": np.array([float(value) for value in residual]),
    }


# --------------------------------------------------------------------------
# Gradient norms along the stream and for every weight
# --------------------------------------------------------------------------


def _default_loss(y_true, y_pred):
    """Mean sparse categorical cross-entropy of logits."""
    return ops.mean(
        keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
    )


def _resolve_loss(loss):
    if loss is None:
        return _default_loss
    if isinstance(loss, str) or isinstance(loss, keras.losses.Loss):
        return keras.losses.get(loss)
    if callable(loss):
        return loss
    raise TypeError(f"loss must be None, a Keras loss or a callable, got {loss!r}.")


def gradient_norms(model, x, y=None, *, loss=None, training=True, blocks=None, seed=0):
    """Norms of the loss gradient along the residual stream and for every weight.

    Runs one forward and backward pass and records `||dLoss/dx_l||` at every
    stream point (`x_0` = first block's input, `x_l` = block l's output) and
    `||dLoss/dW||` for every trainable weight. The residual identity path
    keeps `||dLoss/dx_0||` within a modest factor of `||dLoss/dx_L||`; a
    plain stack multiplies L Jacobians.

    BatchNorm mode matters; `training=True` (the default) measures what a
    training step sees: batch statistics, whose own gradient is part of the
    chain. At initialisation:

    - training mode: in a plain BatchNorm network the input gradient
      EXPLODES with depth (each BN divides by the batch standard deviation of
      an input the previous layers have shrunk, and backpropagation through
      the batch statistics amplifies). Measured gains `||dL/dx_0|| /
      ||dL/dx_L||`: 50-block width-8 BasicBlock stack, about 30 residual vs
      6e6 plain; ResNet-56 vs plain-56 (full width, 8 random images), 31 vs
      1.2e4.
    - inference mode (`training=False`, frozen moving statistics: mean 0,
      variance 1 at init): the BNs are nearly identities and the network
      behaves like an unnormalised He-initialised one. The plain gain is
      about 1 at widths 16-64 (He init preserves the variance) and VANISHES
      at width 8 (about 1e-6 through 50 blocks); the residual gain explodes
      instead (about 1.4e3 for ResNet-56), because every block adds its
      branch's variance to the stream.

    Uses `tf.GradientTape` (TensorFlow backend only).

    Args:
        model: keras.Model built from residual_keras blocks (see the module
            docstring; `blocks` chooses others).
        x: a batch of model inputs.
        y: targets for `loss`, or None. With y=None the targets are random
            integer labels (uniform over the last axis of the model output,
            numpy seed `seed`): the loss is then the cross-entropy a network
            sees on data it cannot have learnt, which at initialisation is
            typical of real data.
        loss: None (mean sparse categorical cross-entropy of logits), a Keras
            loss (name or object) or a callable `loss(y_true, y_pred)`;
            per-example values are averaged.
        training: bool. Mode of BatchNorm/Dropout in the pass. Default True.
        blocks: optional list of layer names (or layers) to use as blocks.
        seed: int. Seed of the random labels. Default 0.

    Returns:
        dict with
        - `model` (str) and `names` (L block names);
        - `stream_grad_norms`: float64 array (L+1,), Frobenius norm over the
          whole batch of dLoss/dx_l, l = 0..L;
        - `gain`: `stream_grad_norms[0] / stream_grad_norms[-1]`
          (nan if the latter is 0);
        - `weight_names` (variable paths), `weight_grad_norms` and
          `weight_norms`: one entry per trainable weight, in the model's
          (input -> output) order;
        - `loss` (float) and `training` (bool).
    """
    import tensorflow as tf

    chain = _Chain(model, blocks)
    loss_fn = _resolve_loss(loss)
    x = ops.convert_to_tensor(x)
    weights = list(model.trainable_weights)
    with tf.GradientTape() as tape:
        stream = chain.first_input(x, training)
        tape.watch(stream)  # needed when x_0 is the model input itself
        points = [stream]
        for index in range(len(chain.blocks)):
            stream = chain.step(index, stream, training)
            points.append(stream)
        outputs = chain.output(stream, training)
        targets = y
        if targets is None:
            rng = np.random.default_rng(seed)
            targets = rng.integers(0, outputs.shape[-1], size=tuple(outputs.shape[:-1]))
        value = loss_fn(ops.convert_to_tensor(targets), outputs)
        value = ops.mean(ops.cast(value, "float32"))  # per-example losses -> mean
    gradients = tape.gradient(value, points + weights)
    stream_grads = gradients[: len(points)]
    weight_grads = gradients[len(points) :]

    def norm(tensor):
        if tensor is None:
            return 0.0
        return float(np.linalg.norm(_to_numpy(ops.cast(tensor, "float32")).ravel()))

    stream_norms = np.array([norm(grad) for grad in stream_grads], dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = stream_norms[0] / stream_norms[-1] if stream_norms[-1] else float("nan")
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "stream_grad_norms": stream_norms,
        "gain": float(gain),
        "weight_names": [weight.path for weight in weights],
        "weight_grad_norms": np.array([norm(grad) for grad in weight_grads]),
        "weight_norms": np.array([norm(weight) for weight in weights]),
        "loss": float(_to_numpy(value)),
        "training": bool(training),
    }


# --------------------------------------------------------------------------
# Jacobian spectral norms by power iteration
# --------------------------------------------------------------------------


def _compose(functions):
    def composed(x):
        for function in functions:
            x = function(x)
        return x

    return composed


def _spectral_norm(function, x, v, num_iterations, tolerance, use_tf_function=False):
    """Per-example `||d function / d x||_2` by power iteration on `J^T J`.

    Each iteration is one forward pass with a forward-mode tangent (u = J v,
    `tf.autodiff.ForwardAccumulator`) and one backward pass (J^T u,
    `tf.GradientTape`). Examples are normalised separately, which is exact
    when the function treats examples independently (inference mode). The
    backward pass is seeded with u / ||u|| so that tiny gains (0.2^50) do
    not underflow. With `use_tf_function=True`, iterations after the first
    few (which often suffice) run as a traced `tf.function`, about ten times
    faster than eager on CPU. Returns (sigma (B,) numpy, v,
    iterations used, converged).
    """
    import tensorflow as tf

    def normalise(tensor):
        # Norms in float64: squares of float32 entries near 1e-30 would underflow.
        norms = _per_example_norm(tensor, dtype="float64")
        smallest = _smallest_normal(tensor.dtype)
        divisor = ops.cast(ops.maximum(norms, smallest), tensor.dtype)
        shape = (-1,) + (1,) * (len(tensor.shape) - 1)
        return tensor / ops.reshape(divisor, shape), norms

    def power_step(v):
        with tf.GradientTape() as tape:
            tape.watch(x)
            with tf.autodiff.ForwardAccumulator(x, v) as accumulator:
                y = function(x)
            u = accumulator.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        u_unit, sigma = normalise(u)
        w = tape.gradient(y, x, output_gradients=tf.stop_gradient(u_unit))
        if w is None:  # the output does not depend on x at all
            w = ops.zeros_like(x)
        return normalise(w)[0], sigma

    v, _ = normalise(v)
    previous = None
    step = power_step
    for iteration in range(1, num_iterations + 1):
        if use_tf_function and iteration == _EAGER_ITERATIONS + 1:
            step = tf.function(power_step)  # tracing pays off only when not converged
            with _quiet_tensorflow_logger():  # each estimate traces anew: expected
                v, sigma = step(v)
        else:
            v, sigma = step(v)
        sigma = _to_numpy(sigma).astype("float64")
        if previous is not None:
            change = np.abs(sigma - previous) / np.maximum(np.abs(sigma), _TINY)
            if np.all(change <= tolerance):
                return sigma, v, iteration, True
        previous = sigma
    return sigma, v, num_iterations, False


def calibrate_batchnorm(model, x):
    """Sets every BatchNorm's moving statistics to those of the batch `x`.

    One forward pass in training mode with momentum 0: afterwards inference
    mode computes on `x` exactly what training mode computes, so per-example
    instruments that run in inference mode (`jacobian_norm`) see a normalised
    network. Only the BatchNorm moving statistics of `model` change.

    Returns:
        The number of BatchNormalization layers calibrated.
    """
    norms = [
        layer
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    momenta = [layer.momentum for layer in norms]
    for layer in norms:
        layer.momentum = 0.0
    try:
        model(ops.convert_to_tensor(x), training=True)
    finally:
        for layer, momentum in zip(norms, momenta):
            layer.momentum = momentum
    return len(norms)


def jacobian_norm(
    model_or_layers,
    x,
    *,
    num_iterations=100,
    tolerance=1e-5,
    per_block=True,
    cumulative=False,
    blocks=None,
    seed=0,
    use_tf_function=True,
):
    """Spectral norm of `d x_L / d x_0` (and of each block's Jacobian), per example.

    `x_0` is the first block's input and `x_L` the last block's output. The
    largest singular value is found by power iteration on `J^T J`, each step
    a Jacobian-vector product (forward mode) and a vector-Jacobian product
    (backward mode): the Jacobian itself is never formed, so this works for
    full-size networks. For a residual stack the norm stays near 1 (exactly 1
    when every branch is 0 at initialisation); for a plain stack it behaves
    like `c^L`.

    The model runs in inference mode (BatchNorm with its moving statistics,
    no Dropout), so that examples do not interact and each example's
    Jacobian is a separate matrix: the result has one norm per example. In
    training mode BatchNorm couples the examples of a batch and there is no
    per-example Jacobian. At initialisation the moving statistics are still
    (0, 1), so inference-mode BatchNorm normalises nothing: call
    `calibrate_batchnorm(model, x)` first to measure the network as its first
    training step computes it.

    Uses `tf.autodiff.ForwardAccumulator` and `tf.GradientTape` (TensorFlow
    backend only). float32 cannot represent gains below about 1e-38.

    Power iteration approaches the largest singular value from below, at a
    rate set by the gap to the second one: where many singular values are
    close (BatchNorm ResNets in inference mode at initialisation, say), an
    unconverged estimate is a lower bound. `converged` says whether every
    estimate met `tolerance` within `num_iterations`.

    Args:
        model_or_layers: a keras.Model built from residual_keras blocks, or
            a list of layers/callables applied one after another (block l
            maps x_{l-1} to x_l; Keras layers are called with
            `training=False`).
        x: a batch of inputs: model inputs for a model (x_0 is computed from
            them), x_0 itself for a list.
        num_iterations: int. Maximum power iterations per estimate.
            Default 100.
        tolerance: float. Stop when every example's estimate changes by at
            most this relative amount in one iteration. Default 1e-5.
        per_block: bool. Also compute each block's own Jacobian norm at the
            input it receives. Default True.
        cumulative: bool. Also compute `||d x_l / d x_0||` for every l = 1..L
            (for plotting norm vs depth; costs O(L^2) block evaluations, each
            depth warm-started from the previous one's singular vector).
            Default False.
        blocks: optional list of layer names (or layers) to use as blocks of
            a model.
        seed: int. Seed of the random start vectors. Default 0.
        use_tf_function: bool. Trace each power-iteration step with `tf.function`
            (much faster); False runs eagerly, for callables that cannot be
            traced. Default True.

    Returns:
        dict with `model` (str or None), `names` (L block names), `total`
        (float64 array (B,): ||d x_L / d x_0|| per example), `per_block`
        ((L, B) array or None), `cumulative` ((L, B) array, row l-1 =
        ||d x_l / d x_0||, or None), `iterations` (the most power
        iterations any estimate used) and `converged` (bool: all estimates
        met `tolerance`).
    """
    num_iterations = check_positive_int("num_iterations", num_iterations)
    if isinstance(model_or_layers, keras.Model):
        chain = _Chain(model_or_layers, blocks)
        model_name = chain.model_name
        names = list(chain.names)
        steps = chain.step_functions()
        x0 = chain.first_input(ops.convert_to_tensor(x), False)
    elif isinstance(model_or_layers, (list, tuple)) and model_or_layers:
        if blocks is not None:
            raise ValueError("blocks= applies to a model, not to a list of layers.")
        for layer in model_or_layers:
            if not callable(layer):
                raise TypeError(f"Every block must be callable, got {layer!r}.")
        model_name = None
        names = [
            layer.name if isinstance(layer, keras.layers.Layer) else f"block{i + 1}"
            for i, layer in enumerate(model_or_layers)
        ]
        steps = [
            (lambda x, layer=layer: _call(layer, x, False)) for layer in model_or_layers
        ]
        x0 = ops.convert_to_tensor(x)
    else:
        raise TypeError(
            "model_or_layers must be a keras.Model or a non-empty list of layers/"
            f"callables, got {model_or_layers!r}."
        )
    if "float" not in keras.backend.standardize_dtype(x0.dtype):
        raise TypeError(
            f"The first block's input must be floating point, got dtype {x0.dtype}."
        )

    generator = keras.random.SeedGenerator(seed)
    iterations = 0
    converged = True

    def start_vector(like):
        return keras.random.normal(ops.shape(like), dtype=like.dtype, seed=generator)

    def estimate(function, at, v):
        nonlocal iterations, converged
        sigma, v, used, done = _spectral_norm(
            function, at, v, num_iterations, tolerance, use_tf_function=use_tf_function
        )
        iterations = max(iterations, used)
        converged = converged and done
        return sigma, v

    result = {"model": model_name, "names": names}
    result.update(per_block=None, cumulative=None)
    if cumulative:
        rows = []
        v = start_vector(x0)
        for depth in range(1, len(steps) + 1):
            sigma, v = estimate(_compose(steps[:depth]), x0, v)
            rows.append(sigma)
        result["cumulative"] = np.stack(rows)
        result["total"] = result["cumulative"][-1].copy()
    else:
        result["total"], _ = estimate(_compose(steps), x0, start_vector(x0))
    if per_block:
        rows = []
        stream = x0
        for step in steps:
            sigma, _ = estimate(step, stream, start_vector(stream))
            rows.append(sigma)
            stream = step(stream)
        result["per_block"] = np.stack(rows)
    result["iterations"] = iterations
    result["converged"] = converged
    return result


# --------------------------------------------------------------------------
# Activation norms along the stream
# --------------------------------------------------------------------------


def activation_norms(model, x, *, training=True, blocks=None):
    """RMS of the residual stream at every stream point, per example.

    `rms[l]` is `sqrt(mean(x_l^2))` over all of one example's entries
    (positions and channels), for x_0 = first block's input and x_l = block
    l's output. RMS rather than the total norm, so that downsampling stages
    (fewer positions) do not look like shrinking; option-A shortcuts append
    zero channels, which does lower the RMS of a stage's first output.

    Without normalisation of the stream, `x_L = x_0 + sum_l f_l` and random
    branches of similar size add in quadrature: `rms_L^2 ~ rms_0^2 +
    sum_l rms(f_l)^2`, growth like sqrt(L). `training=True` (the default)
    measures what a training step sees: in a BatchNorm ResNet each branch
    ends in a BN with batch statistics, so every branch has unit-size output
    and the stream grows like sqrt(L) within a stage.

    Args:
        model: keras.Model built from residual_keras blocks.
        x: a batch of model inputs.
        training: bool. Mode of BatchNorm/Dropout. Default True.
        blocks: optional list of layer names (or layers) to use as blocks.

    Returns:
        dict with `model`, `names` (L block names), `depths` (0..L) and
        `rms` (float64 array (L+1, B)).
    """
    chain = _Chain(model, blocks)
    stream = chain.first_input(ops.convert_to_tensor(x), training)
    rows = [_to_numpy(_per_example_rms(stream))]
    for index in range(len(chain.blocks)):
        stream = chain.step(index, stream, training)
        rows.append(_to_numpy(_per_example_rms(stream)))
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "depths": np.arange(len(rows)),
        "rms": np.stack(rows).astype("float64"),
    }


# --------------------------------------------------------------------------
# Lesion study (Veit et al. 2016)
# --------------------------------------------------------------------------


def _lesioned_block(block, input_shape):
    """(function without the block's branch, description) or (None, reason).

    Residual CNN blocks become `ReLU(shortcut(x))`, Transformer blocks the
    identity; a plain block (no shortcut) becomes the identity where its
    output has its input's shape, and cannot be removed otherwise.
    """
    transformer_block = _transformer_block_class()
    if isinstance(block, _ConvBlock) and block.residual:

        def shortcut_only(x):
            if block.shortcut_layer is not None:
                x = block.shortcut_layer(x, training=False)
            return ops.relu(x)

        return shortcut_only, "ReLU(shortcut(x))"
    if isinstance(block, FixupBasicBlock):

        def fixup_shortcut_only(x):
            if block.shortcut_layer is not None:
                x = block.shortcut_layer(block.bias1(x))
            return ops.relu(x)

        return fixup_shortcut_only, "ReLU(shortcut(x))"
    if transformer_block is not None and isinstance(block, transformer_block):
        # Also skips a Post-LN block's LayerNorms, which sit on the stream.
        return (lambda x: x), "identity"
    output_shape = tuple(block.output.shape)
    if tuple(input_shape) == output_shape:
        return (lambda x: x), "identity"
    return None, f"shape changes {tuple(input_shape)} -> {output_shape}"


def _batches(data, batch_size):
    """(x, y) numpy batches from a tuple of arrays or an iterable of batches."""
    if isinstance(data, tuple) and len(data) == 2:
        x, y = data
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"x and y differ in length: {len(x)} != {len(y)}.")
        for start in range(0, len(x), batch_size):
            yield x[start : start + batch_size], y[start : start + batch_size]
        return
    for batch in data:
        if not (isinstance(batch, (tuple, list)) and len(batch) >= 2):
            raise ValueError(
                "dataset_or_xy must be (x, y) arrays or yield (x, y) batches; got "
                f"an element of type {type(batch).__name__}."
            )
        yield _to_numpy(batch[0]), _to_numpy(batch[1])


def _resolve_metric(metric):
    if callable(metric):
        return getattr(metric, "__name__", "metric"), metric
    if metric == "accuracy":

        def accuracy(y_true, y_pred):
            if y_true.shape == y_pred.shape:  # one-hot targets
                y_true = np.argmax(y_true, axis=-1)
            return float(np.mean(np.argmax(y_pred, axis=-1) == y_true))

        return "accuracy", accuracy
    if metric == "crossentropy":

        def crossentropy(y_true, y_pred):
            return float(_to_numpy(_default_loss(y_true, y_pred)))

        return "crossentropy", crossentropy
    raise ValueError(
        f"Unknown metric={metric!r}. Accepted: {', '.join(map(repr, METRICS))} "
        "or a callable metric(y_true, y_pred) -> float on numpy arrays."
    )


def lesion(model, dataset_or_xy, *, metric="accuracy", batch_size=64, blocks=None):
    """Metric of the intact model and with each single block removed (Veit et al. 2016).

    Removing a residual block keeps its shortcut and drops its branch:
    `x_l = ReLU(shortcut(x_{l-1}))` for `BasicBlock`/`BottleneckBlock`/
    `FixupBasicBlock`, `x_l = x_{l-1}` for a `TransformerBlock` (for Post-LN
    this also skips the block's LayerNorms). A plain block (or any other
    layer passed in `blocks`) is replaced by the identity where its output
    has its input's shape; where the shape changes it cannot be removed and
    its entry is None. Everything runs in inference mode; the model itself is
    never modified (the lesioned forward pass calls the other layers
    directly).

    Args:
        model: keras.Model built from residual_keras blocks.
        dataset_or_xy: `(x, y)` numpy arrays, or an iterable of `(x, y)`
            batches (a `tf.data.Dataset`, a list...).
        metric: "accuracy" (argmax of the output against integer or one-hot
            targets; for a language model over all positions),
            "crossentropy" (mean sparse categorical cross-entropy of logits)
            or a callable `metric(y_true, y_pred)` on numpy arrays returning
            a float. Per-batch values are averaged weighted by batch size.
            Default "accuracy".
        batch_size: int. Batch size when given arrays. Default 64.
        blocks: optional list of layer names (or layers) to use as blocks.

    Returns:
        dict with `model`, `names` (L block names), `metric` (its name),
        `intact` (float), `lesioned` (L floats, None where a block cannot be
        removed) and `removed_as` (L strings: what replaced each block, or
        why it could not be removed).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    chain = _Chain(model, blocks)
    metric_name, metric_fn = _resolve_metric(metric)
    replacements = [
        _lesioned_block(block, block.input.shape) for block in chain.blocks
    ]
    totals = np.zeros(len(chain.blocks) + 1)
    count = 0
    for x, y in _batches(dataset_or_xy, batch_size):
        points = [chain.first_input(ops.convert_to_tensor(x), False)]
        for index in range(len(chain.blocks)):
            points.append(chain.step(index, points[-1], False))
        totals[0] += len(x) * metric_fn(y, _to_numpy(chain.output(points[-1], False)))
        for index, (replacement, _) in enumerate(replacements):
            if replacement is None:
                continue
            stream = chain.step(index, points[index], False, block_fn=replacement)
            for later in range(index + 1, len(chain.blocks)):
                stream = chain.step(later, stream, False)
            totals[index + 1] += len(x) * metric_fn(
                y, _to_numpy(chain.output(stream, False))
            )
        count += len(x)
    if count == 0:
        raise ValueError("dataset_or_xy yielded no examples.")
    means = totals / count
    return {
        "model": chain.model_name,
        "names": list(chain.names),
        "metric": metric_name,
        "intact": float(means[0]),
        "lesioned": [
            None if replacement is None else float(means[index + 1])
            for index, (replacement, _) in enumerate(replacements)
        ],
        "removed_as": [description for _, description in replacements],
    }


# --------------------------------------------------------------------------
# What each Transformer sublayer writes into the stream
# --------------------------------------------------------------------------


def _join(block, stream, branch, norm):
    """The stream after one sublayer, as `TransformerBlock.call` composes it.

    residual: `x + branch` (Pre-LN and ReZero) or `LN(x + branch)` (Post-LN);
    plain twin: `branch` (pre) or `LN(branch)` (post).
    """
    stream = branch if block.residual is False else stream + branch
    if block.norm_position == "post" and block.residual != "rezero":
        stream = norm(stream)
    return stream


def stream_contributions(model, x, *, training=False, blocks=None):
    """Per Transformer block, how much attention and feed-forward add to the stream.

    For block l with input `x` (B, T, C): the attention sublayer writes
    `a = attention_branch(x)` and the stream becomes `h` (`x + a` for Pre-LN
    and ReZero, `LN(x + a)` for Post-LN); the feed-forward sublayer then
    writes `m = feedforward_branch(h)`. The result gives, per example,

        attention   = ||a|| / ||x||        feedforward = ||m|| / ||h||

    with norms over all positions and channels of one sequence: the size of
    each update relative to the stream it is added to. ReZero blocks start at
    exactly 0; Pre-LN blocks with GPT-2's scaled output projections start
    small; in a plain twin the "update" replaces the stream.

    Args:
        model: keras.Model with `TransformerBlock`s (e.g. `transformer_lm`).
        x: a batch of model inputs (token ids for `transformer_lm`).
        training: bool. Dropout mode. Default False.
        blocks: optional list of layer names (or layers); each must be a
            `TransformerBlock`.

    Returns:
        dict with `model`, `names` (L block names), `attention` and
        `feedforward` (float64 arrays (L, B): relative sizes as above),
        `attention_rms` and `feedforward_rms` ((L, B): RMS of `a` and `m`)
        and `stream_rms` ((L+1, B): RMS of the stream entering each block
        and leaving the last one).
    """
    transformer_block = _transformer_block_class()
    if transformer_block is None:
        raise ImportError("stream_contributions needs residual_keras.transformer.")
    chain = _Chain(model, blocks)
    for block in chain.blocks:
        if not isinstance(block, transformer_block):
            raise TypeError(
                "stream_contributions measures TransformerBlocks; block "
                f"{block.name!r} is a {type(block).__name__}."
            )
    keys = ("attention", "feedforward", "attention_rms", "feedforward_rms")
    rows = {key: [] for key in keys}
    stream = chain.first_input(ops.convert_to_tensor(x), training)
    stream_rms = [_to_numpy(_per_example_rms(stream))]

    def ratio(update, base):
        return _to_numpy(_per_example_norm(update)) / np.maximum(
            _to_numpy(_per_example_norm(base)), _TINY
        )

    for index, block in enumerate(chain.blocks):
        attention = block.attention_branch(stream, training=training)
        middle = _join(block, stream, attention, block.attention_norm)
        feedforward = block.feedforward_branch(middle, training=training)
        rows["attention"].append(ratio(attention, stream))
        rows["feedforward"].append(ratio(feedforward, middle))
        rows["attention_rms"].append(_to_numpy(_per_example_rms(attention)))
        rows["feedforward_rms"].append(_to_numpy(_per_example_rms(feedforward)))
        # Continue with the block's own output (identical to joining m to h).
        stream = chain.step(index, stream, training)
        stream_rms.append(_to_numpy(_per_example_rms(stream)))
    result = {"model": chain.model_name, "names": list(chain.names)}
    result.update({key: np.stack(rows[key]).astype("float64") for key in keys})
    result["stream_rms"] = np.stack(stream_rms).astype("float64")
    return result
