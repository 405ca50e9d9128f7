"""Other libraries' argument names are refused with ours, in one line (issue 42): never aliased."""

import numpy as np
import pytest

import residual_keras as rk
from residual_keras import _spellings

MAKERS = {
    "TransformerBlock": (lambda **kw: rk.TransformerBlock(num_heads=2, **kw), _spellings.TRANSFORMER_BLOCK),
    "BasicBlock": (lambda **kw: rk.BasicBlock(4, **kw), _spellings.CONV_BLOCK),
    "BottleneckBlock": (lambda **kw: rk.BottleneckBlock(4, **kw), _spellings.CONV_BLOCK),
    "PreActBasicBlock": (lambda **kw: rk.PreActBasicBlock(4, **kw), _spellings.CONV_BLOCK),
    "FixupBasicBlock": (lambda **kw: rk.FixupBasicBlock(4, num_blocks=3, **kw), _spellings.FIXUP_BLOCK),
    "TokenAndPositionEmbedding": (
        lambda **kw: rk.TokenAndPositionEmbedding(vocab_size=5, sequence_length=4, embed_dim=2, **kw),
        _spellings.EMBEDDING),
    "cifar_resnet()": (lambda **kw: rk.cifar_resnet(8, width=2, **kw), _spellings.CIFAR_RESNET),
    "transformer_lm()": (lambda **kw: rk.transformer_lm(5, 4, 1, embed_dim=4, num_heads=1, **kw),
                         _spellings.TRANSFORMER_LM),
}
CASES = [(owner, name) for owner, (_, table) in MAKERS.items() for name in table]
EXPECTED_NAMES = {  # what the issue lists, at least: a test that fails if one is dropped from a table
    "ff_dim", "rate", "embed_dim", "stride", "conv_shortcut", "use_pre_activation", "maxlen"}


def test_every_spelling_the_issue_names_is_answered():
    assert EXPECTED_NAMES <= {name for _, name in CASES}


@pytest.mark.parametrize("owner, name", CASES, ids=[f"{owner}-{name}" for owner, name in CASES])
def test_another_librarys_name_is_refused_with_ours_in_one_line(owner, name):
    make, table = MAKERS[owner]
    ours, whose = table[name]
    with pytest.raises(TypeError) as refusal:
        make(**{name: 1})
    message = str(refusal.value)
    assert message == f"{owner}: {name} is the name in {whose}; residual_keras calls it {ours}."
    assert "\n" not in message


@pytest.mark.parametrize("name", list(_spellings.TRANSFORMER_BLOCK_CALL))
def test_keras_hubs_call_arguments_are_refused_with_ours(name):
    block = rk.TransformerBlock(num_heads=2)
    x = np.zeros((1, 4, 8), "float32")
    with pytest.raises(TypeError, match=f"{name} is the name in keras-hub; residual_keras calls it "
                                        f"{_spellings.TRANSFORMER_BLOCK_CALL[name][0].split(' ')[0]}"):
        block(x, **{name: np.ones((1, 4), "bool")})


def test_an_unknown_call_argument_is_still_an_error():
    with pytest.raises(TypeError, match="unexpected arguments \\['colour'\\]"):
        rk.TransformerBlock(num_heads=2)(np.zeros((1, 4, 8), "float32"), colour=1)


def test_our_own_names_are_not_in_any_table():
    # A refused name that is also ours would make our own argument unusable.
    import inspect

    for owner, (make, table) in MAKERS.items():
        target = {"cifar_resnet()": rk.cifar_resnet, "transformer_lm()": rk.transformer_lm}.get(
            owner, getattr(rk, owner, None))
        accepted = set(inspect.signature(target).parameters)
        assert not accepted & set(table), (owner, accepted & set(table))
