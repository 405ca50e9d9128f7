"""A wrong answer to exercise 3: the attention reads the stream, not LN(x)."""
# expect: attention: it must read LN(x)

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
        width = input_shape[-1]
        self.attention_norm = keras.layers.LayerNormalization(name="attention_norm")
        self.attention = keras.layers.MultiHeadAttention(self.num_heads, width // self.num_heads, name="attention")
        self.mlp_norm = keras.layers.LayerNormalization(name="mlp_norm")
        self.mlp_in = keras.layers.Dense(self.hidden, activation="gelu", name="mlp_in")
        self.mlp_out = keras.layers.Dense(width, name="mlp_out")
        self.attention_norm.build(input_shape)
        self.attention.build(input_shape, input_shape)
        self.mlp_norm.build(input_shape)
        self.mlp_in.build(input_shape)
        self.mlp_out.build((*input_shape[:-1], self.hidden))

    def attend(self, x):
        h = x  # no LayerNorm before the attention
        return self.attention(h, h, use_causal_mask=True)  # F(LN(x))

    def feedforward(self, x):
        return self.mlp_out(self.mlp_in(self.mlp_norm(x)))  # MLP(LN(x))

    def call(self, x):
        x = x + self.attend(x)  # x + Attention(LN(x))
        return x + self.feedforward(x)  # x + MLP(LN(x))

    def residual_steps(self, **call_kwargs):
        return [rk.ResidualStep("attention", self.attend), rk.ResidualStep("feedforward", self.feedforward)]

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "hidden": self.hidden}
