"""A wrong answer to exercise 3, written as a BlockLayer: the norm after each addition (Post-LN)."""
# expect: identity: the output is normalised

import keras

import residual_keras as rk

EXERCISE = 3


@keras.saving.register_keras_serializable(package="exercises")
class PreLNBlock(rk.BlockLayer):
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
        return self.attention(x, x, use_causal_mask=True)  # F(x): no norm inside

    def feedforward(self, x):
        return self.mlp_out(self.mlp_in(x))

    def call(self, x):
        x = self.attention_norm(x + self.attend(x))  # LN(x + Attention(x))
        return self.mlp_norm(x + self.feedforward(x))  # LN(x + MLP(x))

    def residual_steps(self, training=False, **call_kwargs):  # the call's Post-LN steps, described rightly
        return [rk.ResidualStep("attention", self.attend, post=self.attention_norm, training=training),
                rk.ResidualStep("feedforward", self.feedforward, post=self.mlp_norm, training=training)]

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "hidden": self.hidden}
