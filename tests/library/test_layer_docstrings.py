"""Every public layer's docstring reads like keras.io's (issue 42): Args, Call arguments, Example."""

import inspect

import keras
import pytest

import residual_keras as rk

LAYERS = sorted(name for name in rk.__all__
                if inspect.isclass(getattr(rk, name)) and issubclass(getattr(rk, name), keras.layers.Layer))


def test_the_public_layers_are_found():
    assert {"BasicBlock", "TransformerBlock", "Residual", "TokenAndPositionEmbedding"} <= set(LAYERS)


@pytest.mark.parametrize("name", LAYERS)
def test_a_public_layer_documents_its_arguments_its_call_and_an_example(name):
    doc = inspect.getdoc(getattr(rk, name)) or ""
    sections = [line for line in doc.splitlines() if line.endswith(":") and not line.startswith(" ")]
    for section in ("Args:", "Call arguments:", "Example:"):
        assert section in sections, f"{name}: no {section} section"
    assert sections.index("Args:") < sections.index("Call arguments:") < sections.index("Example:")
    example = doc.split("Example:", 1)[1]
    assert ">>>" in example, f"{name}: the example has no code"
