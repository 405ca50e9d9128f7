"""The size of the residual stream after every block (`activation_norms`)."""

import keras
import numpy as np

from residual_keras._types import ArrayLike, BlockNames, Results
from residual_keras.diagnostics import _inputs
from residual_keras.diagnostics._block_search import point_masks
from residual_keras.diagnostics._forward import Forward
from residual_keras.diagnostics._state import instrument
from residual_keras.diagnostics._tensors import _per_example_masked_rms, _to_numpy


@instrument
def activation_norms(
    model: keras.Model, x: ArrayLike, *, training: bool = True, blocks: BlockNames = None
) -> Results:
    """RMS of the residual stream at every stream point, per example.

    `rms[l]` is `sqrt(mean(x_l^2))` over all of one example's entries
    (positions and channels), for x_0 = first block's input and x_l = block
    l's output. Padded positions are left out: where a block is called with
    a padding mask (the Keras mask of `Embedding(mask_zero=True)` or
    `Masking`, or `padding_mask=`), the mean of the stream it reads (and,
    for the last block, of its output) is over that mask's real positions,
    all channels. RMS rather than the total norm, so that downsampling stages
    (fewer positions) do not look like shrinking; option-A shortcuts append
    zero channels, which does lower the RMS of a stage's first output.

    In a residual stack `x_L = x_0 + sum_l f_l`, and independent branches
    add in quadrature: `rms_L^2 ~ rms_0^2 + sum_l rms(f_l)^2`. What that
    gives depends on the branches: BatchNorm branches (batch statistics,
    `training=True`, the default, as in a training step) have unit size, so
    the stream grows like sqrt(L) within a stage; unnormalised He-initialised
    branches are as large as the stream they read, so its variance doubles
    at every block and it grows exponentially (`cifar_resnet(block=blocks.basic(norm="none"))`).

    The model is left as it was (a training-mode pass's BatchNorm statistics
    are written back).

    Args:
        model: a keras.Model of any shape whose blocks implement the
            residual protocol, or any keras.Model with `blocks` naming the
            layers to measure (see `gradient_norms`).
        x: a batch of model inputs, or a dataset whose first batch is used.
        training: bool. Mode of BatchNorm/Dropout. Default True.
        blocks: optional list of layer names (or layers) to use as blocks.

    Returns:
        dict with `model`, `names` (L block names), `depths` (0..L) and
        `rms` (float64 array (L+1, B)).
    """
    x = _inputs.one_batch(x)[0]
    forward = Forward(model, blocks)
    trace = forward.run(x, training=training)
    rows = [_to_numpy(_per_example_masked_rms(point, mask)) for point, mask in zip(trace.points, point_masks(trace))]
    return {
        "model": forward.model_name,
        "names": list(forward.names),
        "depths": np.arange(len(rows)),
        "rms": np.stack(rows).astype("float64"),
    }
