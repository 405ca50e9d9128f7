"""Exercise 3: a Pre-LN Transformer block from keras.layers parts.

Pre-LN (Xiong et al. 2020; GPT-2) wraps each of the two sublayers as

    x = x + Attention(LN(x))
    x = x + MLP(LN(x))

so the stream itself is never normalised: x_L = x_0 + (the sum of every
sublayer's output). Post-LN puts the norm after the addition,
x = LN(x + F(x)), and has no clean identity path.

Write `PreLNBlock(num_heads, hidden)`: causal self-attention
(keras.layers.MultiHeadAttention with key_dim = width // num_heads and
use_causal_mask=True), then an MLP Dense(hidden, gelu) -> Dense(width),
each inside its own residual addition with its own LayerNormalization
before it, as above. It must also implement `residual_steps()` (the
residual protocol of residual_keras.residual), so that every instrument of
the package measures it.

Check your work:  python -m tracks check THIS_FILE

Hints:
- attention(query, value, use_causal_mask=True) with query = value = LN(x);
- two LayerNormalization layers, one per sublayer, applied to the sublayer's
  input, never to the stream after the addition;
- residual_steps returns two residual_keras.ResidualStep("attention", ...)
  and ("feedforward", ...), each with the branch only (shortcut: identity, no post).
"""

import keras

import residual_keras as rk

EXERCISE = 3


@keras.saving.register_keras_serializable(package="exercises")
class PreLNBlock(keras.layers.Layer):
    def __init__(self, num_heads, hidden, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden = hidden

    def build(self, input_shape):
        raise NotImplementedError

    def call(self, x):
        raise NotImplementedError

    def residual_steps(self, **call_kwargs):
        raise NotImplementedError

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "hidden": self.hidden}
