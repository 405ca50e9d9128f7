"""A wrong answer to exercise 3: the number of heads and the key size swapped (heads x size is the width either
way, so the parameter count is the same)."""
# expect: attention: the number of heads first

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
        self.attention = keras.layers.MultiHeadAttention(width // self.num_heads, self.num_heads, name="attention")
        self.mlp_norm = keras.layers.LayerNormalization(name="mlp_norm")
        self.mlp_in = keras.layers.Dense(self.hidden, activation="gelu", name="mlp_in")
        self.mlp_out = keras.layers.Dense(width, name="mlp_out")
        self.attention_norm.build(input_shape)
        self.attention.build(input_shape, input_shape)
        self.mlp_norm.build(input_shape)
        self.mlp_in.build(input_shape)
        self.mlp_out.build((*input_shape[:-1], self.hidden))

    def attend(self, h):
        return self.attention(h, h, use_causal_mask=True)  # causal self-attention on h = LN(x)

    def mlp(self, h):
        return self.mlp_out(self.mlp_in(h))

    def call(self, x):
        x = x + self.attend(self.attention_norm(x))  # x = x + Attention(LN(x))
        x = x + self.mlp(self.mlp_norm(x))  # x = x + MLP(LN(x))
        return x

    def residual_steps(self, training=False):  # optional: the same two additions, for the instruments
        return [rk.ResidualStep("attention", lambda x: self.attend(self.attention_norm(x)), training=training),
                rk.ResidualStep("feedforward", lambda x: self.mlp(self.mlp_norm(x)), training=training)]

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "hidden": self.hidden}
