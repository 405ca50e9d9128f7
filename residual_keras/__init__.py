"""residual_keras: residual connections, y = x + f(x), as Keras 3 layers.

The Jacobian of a residual block is I + df/dx, so the gradient keeps an
identity path through any depth; a plain stack multiplies L Jacobians and
vanishes or explodes. This package gives the layers to build both kinds of
network side by side (`Residual` makes any branch a block), the builders of
the networks the course trains, and instruments that measure the
difference on any model whose blocks follow the residual protocol
(`residual_keras.steps`).
"""

from residual_keras import blocks, diagnostics, models, plots
from residual_keras.diagnostics import (
    TrainingDynamics,
    activation_norms,
    calibrate_batchnorm,
    delete_blocks,
    full_float32,
    gradient_norms,
    jacobian_norm,
    lesion,
    lesion_sublayers,
    logit_lens,
    loss_landscape,
    path_gradients,
    scalar_chain,
    stream_contributions,
    stream_decomposition,
    stream_delta_rank,
    swap_blocks,
)
from residual_keras.embedding import TokenAndPositionEmbedding
from residual_keras.fixup import FixupBasicBlock, ScalarBias, ScalarScale
from residual_keras.generate import generate
from residual_keras.models import cifar_resnet, count_trainable_params, transformer_lm
from residual_keras.preact_blocks import PreActBasicBlock
from residual_keras.residual import Residual
from residual_keras.steps import BlockLayer, ResidualStep, check_residual_steps
from residual_keras.resnet_blocks import BasicBlock, BottleneckBlock
from residual_keras.shortcuts import PadShortcut, ProjectionShortcut
from residual_keras.transformer import TransformerBlock
from residual_keras._version import __version__

__all__ = [
    "BasicBlock",
    "BlockLayer",
    "BottleneckBlock",
    "FixupBasicBlock",
    "PadShortcut",
    "PreActBasicBlock",
    "ProjectionShortcut",
    "Residual",
    "ResidualStep",
    "ScalarBias",
    "ScalarScale",
    "TokenAndPositionEmbedding",
    "TrainingDynamics",
    "TransformerBlock",
    "activation_norms",
    "blocks",
    "calibrate_batchnorm",
    "check_residual_steps",
    "cifar_resnet",
    "count_trainable_params",
    "delete_blocks",
    "diagnostics",
    "full_float32",
    "generate",
    "gradient_norms",
    "jacobian_norm",
    "lesion",
    "lesion_sublayers",
    "logit_lens",
    "loss_landscape",
    "models",
    "path_gradients",
    "plots",
    "scalar_chain",
    "stream_contributions",
    "stream_decomposition",
    "stream_delta_rank",
    "swap_blocks",
    "transformer_lm",
]
