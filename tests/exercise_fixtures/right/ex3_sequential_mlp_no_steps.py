"""A right answer to exercise 3 another way: a keras.layers.Layer, its MLP a Sequential, no residual_steps() (the optional extra)."""

import keras

EXERCISE = 3


@keras.saving.register_keras_serializable(package="exercises")
class PreLNBlock(keras.layers.Layer):
    def __init__(self, num_heads, hidden, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden = hidden

    def build(self, input_shape):
        width = input_shape[-1]
        self.ln_1 = keras.layers.LayerNormalization()
        self.attn = keras.layers.MultiHeadAttention(self.num_heads, width // self.num_heads)
        self.ln_2 = keras.layers.LayerNormalization()
        self.mlp = keras.Sequential([keras.layers.Dense(self.hidden, activation="gelu"), keras.layers.Dense(width)])
        self.ln_1.build(input_shape)
        self.attn.build(input_shape, input_shape)
        self.ln_2.build(input_shape)
        self.mlp.build(input_shape)

    def call(self, x, training=None):
        h = self.ln_1(x)
        x = x + self.attn(h, h, use_causal_mask=True, training=training)
        x = x + self.mlp(self.ln_2(x), training=training)
        return x

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "hidden": self.hidden}
