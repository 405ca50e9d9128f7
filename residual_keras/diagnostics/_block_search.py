"""Which layers of a model are its residual-stream blocks.

A block is any layer that implements the residual protocol
(`residual_keras.steps`: a `residual_steps` method), the package's own
blocks and a student's alike. `outermost_blocks` walks the model's layers at
any depth (a block inside a nested `Sequential` stage, a functional sub-model
or a subclassed model's attributes counts), in the order Keras lists them;
`blocks` (public: `residual_keras.diagnostics.blocks`) names them as the
instruments' results do. The instruments then run the whole model
(`_forward.Forward`) and order the blocks as the forward pass calls them.
"""

import keras

from residual_keras.steps import ResidualBlock, residual_steps


def _sublayers(layer):
    """The layers directly inside `layer`.

    `Model.layers` lists a model's own layers only; a layer's sublayers
    (a block's convolutions, a student's `Stage(Layer)` holding blocks) have
    no public Keras API, so this one private call stands for it.
    """
    return list(layer._flatten_layers(include_self=False, recursive=False))


def _walk(layer, path=(), stop_at=None):
    """(sublayer, path of names) for every layer inside `layer`, depth first.

    Does not look inside layers for which `stop_at(layer)` is true.
    """
    seen = set()

    def visit(parent, prefix):
        for child in _sublayers(parent):
            if id(child) in seen:
                continue
            seen.add(id(child))
            child_path = prefix + (child.name,)
            yield child, child_path
            if stop_at is None or not stop_at(child):
                yield from visit(child, child_path)

    yield from visit(layer, path)


def all_layers(model):
    """Every layer inside `model`, at any depth, in the order Keras lists them."""
    return [layer for layer, _ in _walk(model)]


def _is_block(layer):
    """A layer that implements the residual protocol (residual_keras.steps)."""
    return isinstance(layer, keras.layers.Layer) and isinstance(layer, ResidualBlock)


def outermost_blocks(model):
    """The blocks inside `model` (layers with `residual_steps`), outermost only, in the order Keras lists them.

    Blocks inside nested models and stages count. For a functional model
    this is the order from input to output; the instruments order the
    blocks as the forward pass really calls them.
    """
    return [layer for layer, _ in _walk(model, stop_at=_is_block) if _is_block(layer)]


def _check_model(model):
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"Expected a keras.Model, got {type(model).__name__}. For a list of "
            "layers use jacobian_norm(layers, x)."
        )


def blocks(model: keras.Model) -> dict[str, keras.layers.Layer]:
    """The blocks the instruments measure in `model`, by the names their results give them.

    A block is a layer that implements the residual protocol
    (`residual_keras.steps`: the package's blocks, `residual_keras.Residual`,
    or a layer of yours with a `residual_steps()` method), found at any depth:
    inside nested `Sequential` stages, functional sub-models and a subclassed
    model's attributes. A block inside another block does not count: the
    outer one is measured.

    Args:
        model: a keras.Model (functional, Sequential or subclassed; it need
            not have been called).

    Returns:
        A dict from each block's name to the layer, in the order Keras lists
        the layers (for a functional model, from input to output); empty
        when no layer of `model` is a block. The names are those of the
        instruments' results (`names`): the layer's name, or its path
        `outer/inner` where a name repeats (nested stages); pass them as
        `blocks=` to measure some of them. The instruments order the blocks
        as the forward pass calls them, which for a subclassed model may
        differ from this order. Each block's `residual` attribute, where it
        has one, says whether it adds its input back (False: a plain twin).

    Example:
        >>> from residual_keras import cifar_resnet
        >>> found = blocks(cifar_resnet(20))
        >>> len(found)
        9
        >>> all(block.residual for block in found.values())
        True
    """
    _check_model(model)
    found = outermost_blocks(model)
    paths = {id(layer): path for layer, path in _walk(model)}
    return dict(zip(_block_names([paths[id(block)] for block in found]), found))


def _block_names(paths):
    """Each block's name, or its path `outer/inner` where names repeat (nested stages)."""
    names = [path[-1] for path in paths]
    return [
        name if names.count(name) == 1 else "/".join(path)
        for name, path in zip(names, paths)
    ]


def resolve_blocks(model, blocks=None):
    """(blocks, names): the blocks of `model` (those of `blocks(model)`), or the layers the argument `blocks` names.

    Args:
        model: a keras.Model.
        blocks: None, or a list of layers of the model or of their names
            (a nested block by its name, or by `outer/inner` where its name
            is not unique).
    """
    _check_model(model)
    walked = list(_walk(model))
    paths = {id(layer): path for layer, path in walked}
    if blocks is None:
        found = outermost_blocks(model)
        if not found:
            raise ValueError(
                f"Model {model.name!r} has no blocks: no layer implements the residual protocol "
                "(the package's blocks, residual_keras.Residual, or a layer of yours with a "
                "residual_steps() method). Wrap your blocks' branches in residual_keras.Residual, "
                "or pass blocks=[layer names] to choose the layers to measure."
            )
    else:
        if not blocks:
            raise ValueError("blocks must name at least one layer, got [].")
        found = [_look_up(model, walked, paths, block) for block in blocks]
        for block in found:
            inside = [other.name for other in found if other is not block
                      and any(layer is block for layer, _ in _walk(other))]
            if inside:
                raise ValueError(
                    f"Block {block.name!r} is inside block {inside[0]!r}: choose either "
                    "the outer block or the blocks inside it."
                )
        if len({id(block) for block in found}) != len(found):
            raise ValueError(f"blocks names a layer twice: {[block.name for block in found]}.")
    return found, _block_names([paths[id(block)] for block in found])


def _look_up(model, walked, paths, block):
    if isinstance(block, keras.layers.Layer):
        if id(block) not in paths:
            raise ValueError(f"Layer {block.name!r} is not inside model {model.name!r}.")
        return block
    if not isinstance(block, str):
        raise TypeError(f"blocks must hold layers or layer names, got {block!r}.")
    matches = [layer for layer, path in walked if block in (layer.name, "/".join(path))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ValueError(f"Model {model.name!r} has no layer named {block!r}.")
    where = ", ".join("/".join(paths[id(layer)]) for layer in matches)
    raise ValueError(
        f"Model {model.name!r} has {len(matches)} layers named {block!r} ({where}): "
        "name one by its path."
    )


def _call(layer, x, training):
    """Calls a Keras layer with `training`, any other callable with `x` only."""
    if isinstance(layer, keras.layers.Layer):
        return layer(x, training=training)
    return layer(x)


def steps_at(forward, trace, position):
    """The residual steps of block `position` as the run `trace` called it (its masks included)."""
    call_args, call_kwargs = trace.calls[position]
    return residual_steps(forward.blocks[position], *call_args, **call_kwargs)


def padding_mask_at(trace, position):
    """The (B, T) padding mask block `position` was called with (a Keras mask or `padding_mask=`), or None."""
    _, call_kwargs = trace.calls[position]
    for key in ("padding_mask", "mask"):
        mask = call_kwargs.get(key)
        if mask is not None:
            return mask
    return None


def point_masks(trace):
    """The (B, T) padding mask of each stream point x_0 .. x_L of `trace` (None where there is none).

    x_l is block l+1's input, read with the mask that block was called with;
    x_L with the last block's.
    """
    masks = [padding_mask_at(trace, position) for position in range(len(trace.inputs))]
    return masks + masks[-1:]
