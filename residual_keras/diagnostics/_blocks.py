"""Finding a model's residual blocks and cutting it at them.

The instruments see a model as a chain `pre -> (block, between)* -> head`
(see `_Chain`): x_0 is the first block's input, x_l block l's output.
"""

import keras

from residual_keras.fixup import FixupBasicBlock
from residual_keras.preact_blocks import PreActBasicBlock
from residual_keras.resnet_blocks import _ConvBlock
from residual_keras.transformer import TransformerBlock


def block_classes():
    """The layer classes the instruments treat as residual-stream blocks."""
    return (_ConvBlock, PreActBasicBlock, FixupBasicBlock, TransformerBlock)


def residual_parts(block):
    """(branch, shortcut, after) with `block(x) == after(shortcut(x) + branch(x))`, or None.

    For the library's residual conv blocks in inference mode: `after` is the
    ReLU of the original block (`BasicBlock`, `BottleneckBlock`,
    `FixupBasicBlock`) or the identity (`PreActBasicBlock`). None for a plain
    block and for every other layer. Lesions keep `after(shortcut(x))`;
    Veit et al.'s paths go through either `branch` or `shortcut`.
    """
    if isinstance(block, FixupBasicBlock):
        return block.branch, block.shortcut_path, keras.ops.relu
    if isinstance(block, (_ConvBlock, PreActBasicBlock)) and block.residual:
        after = (lambda x: x) if isinstance(block, PreActBasicBlock) else keras.ops.relu
        return (
            lambda x: block.branch(x, training=False),
            lambda x: block.shortcut_path(x, training=False),
            after,
        )
    return None


def find_blocks(model):
    """The model's library blocks, in the model's (input -> output) layer order."""
    return [layer for layer in model.layers if isinstance(layer, block_classes())]


def _call(layer, x, training):
    """Calls a Keras layer with `training`, any other callable with `x` only."""
    if isinstance(layer, keras.layers.Layer):
        return layer(x, training=training)
    return layer(x)


def _single(tensors):
    """A model's only input/output tensor (Keras keeps lists for several)."""
    if isinstance(tensors, (list, tuple)):
        return tensors[0] if len(tensors) == 1 else list(tensors)
    return tensors


class _Chain:
    """A model cut at its blocks: `pre -> (block, between)* -> head`.

    `pre` maps the model input to the first block's input, `between[l]` maps
    block l's output to block l+1's input (None when they are the same
    tensor), `head` maps the last block's output to the model output. Each
    piece is a functional sub-model sharing the model's layers (and weights).
    """

    def __init__(self, model, blocks=None):
        if not isinstance(model, keras.Model):
            raise TypeError(
                f"Expected a keras.Model, got {type(model).__name__}. For a "
                "list of layers use jacobian_norm(layers, x)."
            )
        self.model_name = model.name
        if blocks is None:
            self.blocks = find_blocks(model)
            if not self.blocks:
                raise ValueError(
                    f"Model {model.name!r} has no residual_keras blocks "
                    f"({', '.join(cls.__name__ for cls in block_classes())}); "
                    "pass blocks=[layer names] to choose the layers to measure."
                )
        else:
            if not blocks:
                raise ValueError("blocks must name at least one layer, got [].")
            self.blocks = [
                model.get_layer(block) if isinstance(block, str) else block
                for block in blocks
            ]
        self.names = [block.name for block in self.blocks]
        try:
            self.pre = self._piece(_single(model.inputs), self.blocks[0].input)
            self.between = [
                self._piece(left.output, right.input)
                for left, right in zip(self.blocks[:-1], self.blocks[1:])
            ]
            self.head = self._piece(self.blocks[-1].output, _single(model.outputs))
        except ValueError as error:
            raise ValueError(
                f"The blocks of model {model.name!r} ({', '.join(self.names)}) do "
                "not form a chain: each block's input must be computed from the "
                f"previous block's output alone. Keras said: {error}"
            ) from error

    @staticmethod
    def _piece(inputs, outputs):
        if inputs is outputs:
            return None
        return keras.Model(inputs, outputs)

    @staticmethod
    def _run(piece, x, training):
        return x if piece is None else piece(x, training=training)

    def first_input(self, x, training):
        """`x_0`: the input of the first block."""
        return self._run(self.pre, x, training)

    def step(self, index, x, training, block_fn=None):
        """Block `index` (or `block_fn` instead) and the layers after it."""
        if block_fn is None:
            x = self.blocks[index](x, training=training)
        else:
            x = block_fn(x)
        if index < len(self.between):
            x = self._run(self.between[index], x, training)
        return x

    def output(self, x, training):
        """The model output from the last block's output."""
        return self._run(self.head, x, training)

    def step_functions(self):
        """Functions `x_{l-1} -> x_l` in inference mode, one per block."""
        return [
            (lambda x, index=index: self.step(index, x, False))
            for index in range(len(self.blocks))
        ]
