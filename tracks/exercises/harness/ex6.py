"""Exercise 6's probes: the student's path counts at the grader's L and k, and the instrument on a small ResNet."""

from .values import plain


def probe_resnet(module, inputs):
    return [plain(module.resnet_paths(L)) for L in inputs["resnet"]]


def probe_transformer(module, inputs):
    return [plain(module.transformer_paths(L)) for L in inputs["transformer"]]


def probe_lengths(module, inputs):
    row, big = inputs["row"], inputs["big"]
    return {"row": [plain(module.paths_of_length(row, k)) for k in range(row + 1)],
            "big": [plain(module.paths_of_length(big, k)) for k in inputs["big_ks"]]}


def probe_instrument(module, inputs):
    import keras
    import numpy as np

    import residual_keras as rk

    keras.utils.set_random_seed(inputs["data_seed"] % 2**31)
    model = rk.cifar_resnet(inputs["depth"], width=4, input_shape=(8, 8, 3))
    rng = np.random.default_rng(inputs["data_seed"])
    x = rng.standard_normal((4, 8, 8, 3)).astype("float32")
    y = rng.integers(0, 10, size=4)
    return {"counted": plain(module.path_count_from_the_instrument(model, x, y)),
            "formula": plain(module.resnet_paths(3 * ((inputs["depth"] - 2) // 6)))}


PROBES = {"resnet": probe_resnet, "transformer": probe_transformer, "lengths": probe_lengths,
          "instrument": probe_instrument}
