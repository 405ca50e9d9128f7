"""Other libraries' argument names are refused with ours, in one line (issue 42): never aliased.

The expectations are written here, apart from the library's table
(residual_keras/_spellings.py), so that dropping or changing an answer fails.
"""

import inspect

import numpy as np
import pytest

import residual_keras as rk

KERAS_IO, APPLICATIONS, KERAS_HUB = "keras-io's examples", "keras.applications' ResNet", "keras-hub"
MAKERS = {
    "TransformerBlock": lambda **kw: rk.TransformerBlock(num_heads=2, **kw),
    "BasicBlock": lambda **kw: rk.BasicBlock(4, **kw),
    "BottleneckBlock": lambda **kw: rk.BottleneckBlock(4, **kw),
    "PreActBasicBlock": lambda **kw: rk.PreActBasicBlock(4, **kw),
    "FixupBasicBlock": lambda **kw: rk.FixupBasicBlock(4, num_blocks=3, **kw),
    "TokenAndPositionEmbedding": lambda **kw: rk.TokenAndPositionEmbedding(vocab_size=5, sequence_length=4,
                                                                           embed_dim=2, **kw),
    "cifar_resnet()": lambda **kw: rk.cifar_resnet(8, width=2, **kw),
    "transformer_lm()": lambda **kw: rk.transformer_lm(5, 4, 1, embed_dim=4, num_heads=1, **kw),
}
CONV = [("stride", "strides", APPLICATIONS), ("conv_shortcut", 'shortcut="B"', APPLICATIONS),
        ("use_pre_activation", "PreActBasicBlock", KERAS_HUB)]
CASES = [  # (owner, their name, the start of our answer, whose name it is)
    ("TransformerBlock", "ff_dim", "intermediate_dim", KERAS_IO),
    ("TransformerBlock", "latent_dim", "intermediate_dim", KERAS_IO),
    ("TransformerBlock", "rate", "dropout", KERAS_IO),
    ("TransformerBlock", "embed_dim", "nothing: the width comes from the input", KERAS_IO),
    *[(block, *case) for block in ("BasicBlock", "BottleneckBlock", "PreActBasicBlock") for case in CONV],
    ("FixupBasicBlock", "stride", "strides", APPLICATIONS),
    ("FixupBasicBlock", "conv_shortcut", "nothing: a Fixup block pads with zeros", APPLICATIONS),
    ("TokenAndPositionEmbedding", "maxlen", "sequence_length", KERAS_IO),
    ("cifar_resnet()", "use_pre_activation", "block=rk.blocks.preact()", KERAS_HUB),
    ("cifar_resnet()", "block_type", "block", KERAS_HUB),
    ("cifar_resnet()", "classes", "num_classes", APPLICATIONS),
    ("transformer_lm()", "vocabulary_size", "vocab_size", KERAS_HUB),
    ("transformer_lm()", "hidden_dim", "embed_dim", KERAS_HUB),
    ("transformer_lm()", "max_sequence_length", "sequence_length", KERAS_HUB),
    ("transformer_lm()", "maxlen", "sequence_length", KERAS_IO),
    ("transformer_lm()", "ff_dim", "intermediate_dim", KERAS_IO),
    ("transformer_lm()", "rate", "dropout", KERAS_IO),
    ("transformer_lm()", "normalize_first", "norm_position", KERAS_HUB),
]
CALL_CASES = [("decoder_padding_mask", "padding_mask"), ("decoder_attention_mask", "attention_mask"),
              ("use_causal_mask", "causal=")]


@pytest.mark.parametrize("owner, name, ours, whose", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_another_librarys_name_is_refused_with_ours_in_one_line(owner, name, ours, whose):
    with pytest.raises(TypeError) as refusal:
        MAKERS[owner](**{name: 1})
    message = str(refusal.value)
    assert message.startswith(f"{owner}: {name} is the name in {whose}; residual_keras calls it {ours}")
    assert message.endswith(".") and "\n" not in message


@pytest.mark.parametrize("name, ours", CALL_CASES)
def test_keras_hubs_call_arguments_are_refused_with_ours(name, ours):
    block = rk.TransformerBlock(num_heads=2)
    with pytest.raises(TypeError, match=f"{name} is the name in keras-hub; residual_keras calls it {ours}"):
        block(np.zeros((1, 4, 8), "float32"), **{name: np.ones((1, 4), "bool")})


def test_an_unknown_call_argument_is_still_an_error():
    with pytest.raises(TypeError, match="unexpected arguments \\['colour'\\]"):
        rk.TransformerBlock(num_heads=2)(np.zeros((1, 4, 8), "float32"), colour=1)


def test_no_refused_name_is_one_of_our_own_arguments():
    # A refused name that is also ours would make our own argument unusable.
    targets = {"cifar_resnet()": rk.cifar_resnet, "transformer_lm()": rk.transformer_lm}
    for owner, name, _, _ in CASES:
        accepted = inspect.signature(targets.get(owner) or getattr(rk, owner)).parameters
        assert name not in accepted, (owner, name)


# The names 0.3.0 gave one idea each (issue 49): the old ones refused in one line that names the new one.
RENAMED = [
    ("Residual", lambda **kw: rk.Residual(rk.ScalarScale(), **kw), "identity_init", "rezero"),
    ("PreActBasicBlock", MAKERS["PreActBasicBlock"], "zero_init_last", "zero_gamma=True on BasicBlock"),
    ("BasicBlock", MAKERS["BasicBlock"], "zero_init_last", "zero_gamma=True on BasicBlock"),
]


@pytest.mark.parametrize("owner, make, old, new", RENAMED, ids=[f"{c[0]}-{c[2]}" for c in RENAMED])
def test_a_name_renamed_in_0_3_is_refused_with_the_new_one(owner, make, old, new):
    with pytest.raises(TypeError) as refusal:
        make(**{old: True})
    message = str(refusal.value)
    assert message.startswith(f"{owner}: {old} is the name in residual_keras 0.2") and f"calls it {new}" in message
    assert "\n" not in message


def test_a_renamed_block_family_is_answered_with_its_new_name():
    with pytest.raises(AttributeError, match=r"^residual_keras.blocks.zero_init_preact is the name in residual_keras "
                                             r"0.2 .*now residual_keras.blocks.zero_last_conv_preact.$"):
        rk.blocks.zero_init_preact()
    with pytest.raises(AttributeError, match="has no attribute 'no_such_family'"):
        rk.blocks.no_such_family  # noqa: B018
    assert rk.blocks.zero_last_conv_preact().name.startswith("zero_last_conv_preact(")


def test_rezero_is_one_name_on_every_layer():
    for make in (lambda: rk.Residual(rk.ScalarScale(), rezero=True), lambda: rk.TransformerBlock(num_heads=1, rezero=True)):
        layer = make()
        assert layer.rezero is True and layer.get_config()["rezero"] is True
    assert "rezero" in inspect.signature(rk.transformer_lm).parameters
