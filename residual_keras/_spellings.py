"""Other libraries' names for our arguments: refused with ours in one line, never aliased.

A student who ports keras-io's `TransformerBlock(embed_dim, num_heads,
ff_dim, rate)`, keras.applications' `block1(x, filters, stride=1,
conv_shortcut=True)` or keras-hub's `ResNetBackbone(use_pre_activation=...)`
would otherwise get Python's generic "unexpected keyword argument". Each
name below is answered with the argument that means the same here, and
where the name comes from. One spelling per concept: none is accepted.
"""

import functools

KERAS_IO = "keras-io's examples"
APPLICATIONS = "keras.applications' ResNet"
KERAS_HUB = "keras-hub"
BEFORE = "residual_keras 0.1 (CHANGELOG.md, 0.2.0)"
BEFORE_0_3 = "residual_keras 0.2 (CHANGELOG.md, 0.3.0)"
TIMM = "timm (where zero_init_last starts the last BatchNorm's gamma at 0)"

# {their name: (what to write here, whose name it is)}
TRANSFORMER_BLOCK = {
    "normalize_first": ('norm_position ("pre" or "post")', KERAS_HUB),
    "ff_dim": ("intermediate_dim", KERAS_IO),
    "latent_dim": ("intermediate_dim", KERAS_IO),
    "rate": ("dropout", KERAS_IO),
    "embed_dim": ("nothing: the width comes from the input", KERAS_IO),
}
TRANSFORMER_BLOCK_CALL = {
    "decoder_padding_mask": ("padding_mask", KERAS_HUB),
    "decoder_attention_mask": ("attention_mask", KERAS_HUB),
    "use_causal_mask": ("causal= when the block is made (default True)", KERAS_HUB),
}
CONV_BLOCK = {
    "stride": ("strides", APPLICATIONS),
    "conv_shortcut": ('shortcut="B" (a 1x1 projection; "A" pads with zeros)', APPLICATIONS),
    "use_pre_activation": ("PreActBasicBlock, a block of its own", KERAS_HUB),
    "zero_init_last": ("zero_gamma=True on BasicBlock and BottleneckBlock (the last BatchNorm's gamma at 0), "
                       "zero_last_conv=True on PreActBasicBlock (the last convolution at 0)", f"{BEFORE_0_3} and {TIMM}"),
}
RESIDUAL = {
    "identity_init": ("rezero (one name for ReZero's scalar on every layer)", BEFORE_0_3),
}
# Renamed in 0.3.0, {old name: the new one}: the arguments (a .keras file of 0.2.0 still holds the old
# name, read as the new one by `renamed_since_0_2`) and the block families (blocks.py answers the old one).
RENAMED_ARGUMENTS = {"identity_init": "rezero", "zero_init_last": "zero_last_conv"}
RENAMED_FAMILIES = {"zero_init_preact": "zero_last_conv_preact"}
FIXUP_BLOCK = {
    "stride": ("strides", APPLICATIONS),
    "conv_shortcut": ("nothing: a Fixup block pads with zeros where the shape changes (option A)",
                      APPLICATIONS),
}
CIFAR_RESNET = {
    "use_pre_activation": ("block=rk.blocks.preact()", KERAS_HUB),
    "block_type": ("block", KERAS_HUB),
    "classes": ("num_classes", APPLICATIONS),
    # our own flags before the named block families
    "residual": ("a block family: residual=False is block=rk.blocks.plain() (or plain_preact())", BEFORE),
    "shortcut": ('an argument of the block family: block=rk.blocks.basic(shortcut="B")', BEFORE),
    "norm": ('an argument of the block family: block=rk.blocks.basic(norm="none"); norm="fixup" is '
             "block=rk.blocks.fixup()", BEFORE),
    "zero_gamma": ("a block family: block=rk.blocks.zero_gamma_basic()", BEFORE),
    "zero_init_last": ("a block family: block=rk.blocks.zero_last_conv_preact()", BEFORE),
}
TRANSFORMER_LM = {
    "vocabulary_size": ("vocab_size", KERAS_HUB),
    "hidden_dim": ("embed_dim", KERAS_HUB),
    "max_sequence_length": ("sequence_length", KERAS_HUB),
    "maxlen": ("sequence_length", KERAS_IO),
    "ff_dim": ("intermediate_dim", KERAS_IO),
    "rate": ("dropout", KERAS_IO),
    "normalize_first": ('norm_position ("pre" or "post")', KERAS_HUB),
}
EMBEDDING = {
    "maxlen": ("sequence_length", KERAS_IO),
    "vocabulary_size": ("vocab_size", KERAS_HUB),
    "embedding_dim": ("embed_dim", KERAS_HUB),
}


def refuse_other_spellings(owner, arguments, spellings):
    """Raises `TypeError` naming our argument for the first of `arguments` that is another library's name."""
    for name in arguments:
        if name in spellings:
            ours, whose = spellings[name]
            raise TypeError(f"{owner}: {name} is the name in {whose}; residual_keras calls it {ours}.")


def renamed_since_0_2(config):
    """A layer's config from a `.keras` file saved by 0.2.0, its renamed arguments given their new names."""
    return {RENAMED_ARGUMENTS.get(key, key): value for key, value in config.items()}


def refuses(spellings):
    """Decorator: the function refuses `spellings` (as `refuse_other_spellings`) before it runs."""
    def decorate(function):
        @functools.wraps(function)
        def checked(*args, **kwargs):
            refuse_other_spellings(f"{function.__name__}()", kwargs, spellings)
            return function(*args, **kwargs)
        return checked
    return decorate


__all__ = ["CIFAR_RESNET", "CONV_BLOCK", "EMBEDDING", "FIXUP_BLOCK", "RENAMED_ARGUMENTS", "RENAMED_FAMILIES",
           "RESIDUAL", "TRANSFORMER_BLOCK", "TRANSFORMER_BLOCK_CALL", "TRANSFORMER_LM", "refuse_other_spellings",
           "refuses", "renamed_since_0_2"]
