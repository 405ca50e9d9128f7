"""What tests/library/test_transformer.py and tests/library/test_attention.py share: an input, the variants, small builders."""

import numpy as np
import pytest

import keras
from autodiff import BACKEND
from residual_keras.models import transformer_lm
from residual_keras.transformer import TransformerBlock

X = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")  # (B, T, C)
NEEDS_XLA = pytest.mark.skipif(BACKEND == "torch", reason="PyTorch has no XLA here")

VARIANTS = {
    "pre": {},
    "post": {"norm_position": "post"},
    "plain-pre": {"residual": False},
    "plain-post": {"residual": False, "norm_position": "post"},
    "rezero": {"rezero": True},
}


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def built_block(**kwargs):
    """A TransformerBlock with 4 heads, built for X."""
    block = TransformerBlock(num_heads=4, **kwargs)
    block.build(X.shape)
    return block


def tiny_lm(**kwargs):
    """A 2-layer, 16-wide language model over 11 tokens, context 8."""
    return transformer_lm(11, 8, 2, embed_dim=16, num_heads=2, **kwargs)
