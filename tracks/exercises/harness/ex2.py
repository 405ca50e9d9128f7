"""Exercise 2's probes: the student's `identity_block` at initialisation, its gradients, its outputs."""

import numpy as np

from .values import assign_by_shape, plain, weights_of


def _block(module, inputs):
    return module.identity_block(inputs["width"], inputs["hidden"])


def probe_identity(module, inputs):
    """block(x) at initialisation: inputs of several scales in both modes, and a (batch, seq, width) input."""
    block, x = _block(module, inputs), np.asarray(inputs["x"], "float32")
    found = {"scaled": [plain(block(np.float32(scale) * x)) for scale in inputs["scales"]],
             "training": plain(block(x, training=True))}
    found["x3"] = plain(_block(module, inputs)(np.asarray(inputs["x3"], "float32")))
    return found


def probe_gradients(module, inputs):
    """The initial weights and the gradients of sum(upstream * block(x)) on them, through the block's own call."""
    import tensorflow as tf

    block, x = _block(module, inputs), np.asarray(inputs["x"], "float32")
    block(x)
    weights = block.trainable_weights
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.constant(inputs["upstream"], "float32") * block(x, training=True))
    gradients = tape.gradient(loss, weights)
    found = weights_of(block)
    for entry, gradient, weight in zip(found, gradients, weights):
        entry["gradient"] = plain(gradient) if gradient is not None else np.zeros(weight.shape).tolist()
    return found


def probe_other_weights(module, inputs):
    """The block with the grader's weights, on x in both modes and on a (batch, seq, width) input."""
    block, x = _block(module, inputs), np.asarray(inputs["x"], "float32")
    block(x)
    found = {"assigned": assign_by_shape(block, inputs["new"]), "inference": plain(block(x, training=False)),
             "training": plain(block(x, training=True))}
    block3, x3 = _block(module, inputs), np.asarray(inputs["x3"], "float32")
    block3(x3)
    assign_by_shape(block3, inputs["new"])
    found["x3"] = plain(block3(x3))
    return found


PROBES = {"identity": probe_identity, "gradients": probe_gradients, "other_weights": probe_other_weights}
