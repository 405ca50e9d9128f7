"""One fresh initializer per variable.

A Keras 3 initializer created without a seed picks one when it is created and
then draws the same numbers at every call: two kernels of one shape built
from the same instance would start identical (conv1 == conv2 in a block).
A copy made from the config of an unseeded initializer picks a new seed
(keras-hub does the same).
"""


def clone_initializer(initializer):
    """A fresh copy of `initializer` for one more variable."""
    return initializer.__class__.from_config(initializer.get_config())
