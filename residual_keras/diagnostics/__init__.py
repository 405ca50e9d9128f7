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
- How the stream grows depends on its branches (`activation_norms`):
  independent branches of a fixed size add in quadrature,
  `||x_L||^2 ~ ||x_0||^2 + sum_l ||f_l||^2` (sqrt(L) growth: BatchNorm
  branches within a stage); unnormalised He-initialised branches as large as
  the stream double its variance at every block (exponential growth,
  `cifar_resnet(block=blocks.basic(norm="none"))`; tests/library/test_diagnostics.py measures both).
- Veit, Wilber, Belongie 2016 ("Residual Networks Behave Like Ensembles of
  Relatively Shallow Networks"): n blocks unroll into 2^n paths; their
  lesion experiments delete one block (`lesion`), k blocks at once
  (`delete_blocks`) or swap adjacent blocks (`swap_blocks`), and measure
  which path lengths carry the gradient (`path_gradients`).
- Transformers: what the attention and feed-forward sublayers write into the
  stream, relative to the stream (`stream_contributions`); the stream as the
  sum of every sublayer's output (`stream_decomposition`); the loss of the
  stream read out at every depth (`logit_lens`); removing one sublayer
  (`lesion_sublayers`); the rank of what the blocks have written into the
  stream, x_L - x_0 (`stream_delta_rank`: 0 when every block starts as the
  identity, rising as they train); the loss on a plane of random directions
  around the trained weights (`loss_landscape`, Li et al. 2018).

Which layers are "blocks": every layer in the model that implements the
residual protocol (`residual_keras.steps`: a `residual_steps()` method
saying how the layer is built from residual additions `post(shortcut(x) +
branch(x))`), at any depth (inside nested `Sequential` stages, functional
sub-models, a subclassed model's attributes), ordered as the forward pass
calls them. The package's blocks (`BasicBlock`, `BottleneckBlock`,
`PreActBasicBlock`, `FixupBasicBlock`, `TransformerBlock`) implement it, and
so does `residual_keras.Residual`, which makes any branch a block; a
student's own layer that implements it gets every instrument.
`blocks(model)` lists them, by the names the instruments' results use. Pass
`blocks=[names or layers]` to choose others. The "stream points" are `x_0` =
the first block's input, `x_l` = block l+1's input (the output of block l
after any layers in between, such as Dropout) and `x_L` = the last block's
output.

Any model shape works: functional models with one or several outputs
(`output_index=` says which one the loss reads: a position in the order of
`model.output_names`, or an output's name; `y` a dict keyed by output name),
skips around the blocks (EDSR's global skip), nested models and stages,
Sequential and subclassed models (called once first if they never were),
masked inputs (each block's masks are used as the block used them, and the
norms of the stream are over the real positions of those masks).
The instruments run the whole model and intercept its blocks' calls, to
record the stream points or to replace a block (lesions, paths, the
Jacobian's x_0), instead of cutting the model into pieces (`_forward`).
What cannot be measured (a block called twice in one pass, a model whose
call the interception cannot see) raises one ValueError that names the
block in the way and the workaround.

One calling convention (`_inputs`): `instrument(model, x, y)` with arrays,
or `instrument(model, dataset)` with a `tf.data.Dataset` (or any iterable)
of `(x, y)` batches: the instruments that measure one batch use its first,
the lesion family averages over all of it (and takes an `(x, y)` tuple).

The loss and the metric come from the model (`_losses`, `_metrics`):
`loss=` if given, else the loss of `model.compile`, else the cross-entropy
that fits the output (logits or probabilities; binary for one unit, and per
unit for a multi-label output: several sigmoids, or logits against
multi-hot targets); where none fits (an image output with neither `y` nor
`loss`) the instruments refuse. The lesions' default metric is accuracy
only for a classifier's output (element-wise for a multi-label one); a
regression or an image output is scored by its loss. Padding follows Keras'
own masking: where the output carries a Keras mask (a per-token output
after `Embedding(mask_zero=True)` or `Masking`), the loss is the mean over
its real positions, as `keras.losses.SparseCategoricalCrossentropy()(y,
model(x))`, `fit` and `evaluate` compute it, and the accuracy counts those
positions only; an explicit `padding_mask=` is no Keras mask, and there
every position of the output counts, as in Keras' loss.

No instrument changes its model: every variable (weights, BatchNorm
statistics, seed generators) is as before the call (`_state`; a
training-mode pass's BatchNorm updates are written back).
`calibrate_batchnorm` is the one exception: it exists to set the BatchNorm
statistics. And every instrument measures in float32 on a GPU too: its
float32 products are not done in TensorFloat-32, which TensorFlow and JAX
use by default on NVIDIA GPUs since Ampere (`_precision`).

Keras 3 has no backend-agnostic API for gradients of intermediate tensors or
Jacobian-vector products, so the gradient instruments (`gradient_norms`,
`jacobian_norm`, `path_gradients`, `TrainingDynamics`) ask one small module,
`_autodiff`, which uses the backend's own autodiff (TensorFlow, JAX or
PyTorch); the results agree across backends (tests/library/test_cross_backend.py).
The forward passes use `keras.ops`.

Every instrument returns plain data (a dict of lists, floats and numpy
arrays) that `residual_keras.plots` draws and that `json`-friendly reports
can store.

One instrument a module: `gradients`, `jacobian`, `activations`, `lesion`,
`paths`, `stream`, `rank`, `landscape`, `scalar_chain`, `calibration`, `dynamics` (during
training); `_block_search` finds the blocks (`blocks`), `_forward` runs the model with their
calls intercepted, `_inputs` reads the data, `_losses` chooses the loss and `_metrics` the
metric, `_state` restores the variables, `_precision` keeps products in float32,
`_autodiff` differentiates.
"""

from residual_keras.diagnostics._block_search import blocks
from residual_keras.diagnostics._losses import choose_output
from residual_keras.diagnostics._precision import full_float32
from residual_keras.diagnostics.activations import activation_norms
from residual_keras.diagnostics.calibration import calibrate_batchnorm
from residual_keras.diagnostics.dynamics import TrainingDynamics
from residual_keras.diagnostics.gradients import gradient_norms
from residual_keras.diagnostics.jacobian import jacobian_norm
from residual_keras.diagnostics.landscape import loss_landscape
from residual_keras.diagnostics.lesion import delete_blocks, lesion, lesion_sublayers, swap_blocks
from residual_keras.diagnostics.paths import path_gradients
from residual_keras.diagnostics.rank import stream_delta_rank
from residual_keras.diagnostics.scalar_chain import scalar_chain
from residual_keras.diagnostics.stream import logit_lens, stream_contributions, stream_decomposition

__all__ = [
    "TrainingDynamics",
    "activation_norms",
    "blocks",
    "calibrate_batchnorm",
    "choose_output",
    "delete_blocks",
    "full_float32",
    "gradient_norms",
    "jacobian_norm",
    "lesion",
    "lesion_sublayers",
    "logit_lens",
    "loss_landscape",
    "path_gradients",
    "scalar_chain",
    "stream_contributions",
    "stream_decomposition",
    "stream_delta_rank",
    "swap_blocks",
]
