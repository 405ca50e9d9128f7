"""Every block writes `y = x + f(x)` in its own `call`, and its `residual_steps()` compute the same.

The steps are what the instruments read; the call is what a student reads
and what a model computes. One parametrised test keeps the two equal for
every public block (and the options that change its call) and for a
student's `BlockLayer`: in training and in inference mode, before and after
every weight changes, eagerly, compiled by XLA and under `mixed_bfloat16`.
"""

import ast
import inspect
import pathlib

import numpy as np
import pytest

import keras
import residual_keras as rk
from residual_keras.steps import residual_steps, run_steps

PACKAGE = pathlib.Path(rk.__file__).parent
BACKEND = keras.backend.backend()


class StudentBlock(rk.BlockLayer):
    """A student's block: `y = ReLU(x + W2 GELU(W1 x))`, its call and its steps written by hand."""

    def build(self, input_shape):
        self.dense1 = keras.layers.Dense(2 * input_shape[-1], activation="gelu", dtype=self.dtype_policy)
        self.dense2 = keras.layers.Dense(input_shape[-1], dtype=self.dtype_policy)
        self.dense1.build(input_shape)
        self.dense2.build((*input_shape[:-1], 2 * input_shape[-1]))

    def f(self, x):
        return self.dense2(self.dense1(x))

    def call(self, x):
        return keras.activations.relu(x + self.f(x))

    def residual_steps(self, training=False):
        return [rk.ResidualStep("", branch=self.f, post=keras.activations.relu, training=training)]


def _images(shape=(4, 8, 8, 4)):
    return np.random.default_rng(0).standard_normal(shape).astype("float32") * 2 + 0.5


def _sequences(shape=(2, 6, 8)):
    return np.random.default_rng(1).standard_normal(shape).astype("float32")


def _branch():
    return keras.Sequential([keras.layers.Dense(12, activation="relu"), keras.layers.Dense(8)])


# (make the block, its input): every public block, and each option that changes what its call computes
BLOCKS = {
    "BasicBlock": (lambda: rk.BasicBlock(4), _images),
    "BasicBlock-option-B-stride-2": (lambda: rk.BasicBlock(8, strides=2, shortcut="B"), _images),
    "BasicBlock-option-A-stride-2": (lambda: rk.BasicBlock(8, strides=2), _images),
    "BasicBlock-plain": (lambda: rk.BasicBlock(4, residual=False), _images),
    "BasicBlock-zero-gamma": (lambda: rk.BasicBlock(4, zero_gamma=True), _images),
    "BasicBlock-edsr": (lambda: rk.BasicBlock(4, norm="none", final_activation=False), _images),
    "BottleneckBlock": (lambda: rk.BottleneckBlock(2, strides=2, expansion=4), _images),
    "BottleneckBlock-plain": (lambda: rk.BottleneckBlock(2, expansion=2, residual=False), _images),
    "PreActBasicBlock": (lambda: rk.PreActBasicBlock(8, strides=2, shortcut="B"), _images),
    "PreActBasicBlock-zero-init": (lambda: rk.PreActBasicBlock(4, zero_last_conv=True), _images),
    "PreActBasicBlock-plain-no-norm": (lambda: rk.PreActBasicBlock(4, residual=False, norm="none"), _images),
    "FixupBasicBlock": (lambda: rk.FixupBasicBlock(8, strides=2, num_blocks=3), _images),
    "FixupBasicBlock-no-final-activation": (
        lambda: rk.FixupBasicBlock(4, num_blocks=3, final_activation=False), _images),
    "TransformerBlock-pre": (lambda: rk.TransformerBlock(num_heads=2), _sequences),
    "TransformerBlock-post": (lambda: rk.TransformerBlock(num_heads=2, norm_position="post"), _sequences),
    "TransformerBlock-rezero": (lambda: rk.TransformerBlock(num_heads=2, rezero=True), _sequences),
    "TransformerBlock-plain-post": (
        lambda: rk.TransformerBlock(num_heads=2, residual=False, norm_position="post"), _sequences),
    "TransformerBlock-fused": (lambda: rk.TransformerBlock(num_heads=2, fused_attention=True), _sequences),
    "Residual": (lambda: rk.Residual(_branch()), _sequences),
    "Residual-relu-rezero": (lambda: rk.Residual(_branch(), post="relu", rezero=True), _sequences),
    "Residual-projection-post-ln": (
        lambda: rk.Residual(keras.layers.Dense(5), shortcut=keras.layers.Dense(5, use_bias=False),
                            post=keras.layers.LayerNormalization()), _sequences),
    "Residual-plain": (lambda: rk.Residual(_branch(), residual=False), _sequences),
    "StudentBlock": (StudentBlock, _sequences),
}
# one case of each class, for the compiled and mixed-precision runs (a few seconds each)
ONE_EACH = ["BasicBlock-option-B-stride-2", "BottleneckBlock", "PreActBasicBlock", "FixupBasicBlock",
            "TransformerBlock-post", "Residual-projection-post-ln", "StudentBlock"]


def _perturb(block, seed):
    """Every weight moved by seeded noise (a BatchNorm's variance kept positive), so that no zero hides a term."""
    rng = np.random.default_rng(seed)
    for weight in block.weights:
        value = keras.ops.convert_to_numpy(weight).astype("float32")
        noise = rng.standard_normal(value.shape).astype("float32") * 0.3
        weight.assign(np.abs(value + noise) + 0.1 if "variance" in weight.path else value + noise)


def _call_and_steps(block, x, training):
    """(the block's call on x, its residual steps run on x), in one mode."""
    x = keras.ops.convert_to_tensor(x)
    stream = keras.ops.cast(x, block.compute_dtype)  # what the call's input becomes (Keras casts it)
    return block(x, training=training), run_steps(residual_steps(block, training=training), stream)


def _compiled(function):
    """`function` compiled by XLA: tf.function(jit_compile=True) on TensorFlow, jax.jit on JAX."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(function, jit_compile=True)
    import jax

    return jax.jit(function)


def _assert_equal(call, steps, tolerance, what):
    call = keras.ops.convert_to_numpy(keras.ops.cast(call, "float32"))
    steps = keras.ops.convert_to_numpy(keras.ops.cast(steps, "float32"))
    assert call.shape == steps.shape, what
    scale = max(1.0, float(np.max(np.abs(call))))
    difference = float(np.max(np.abs(call - steps)))
    assert difference <= tolerance * scale, f"{what}: call and steps differ by {difference:.3g}"


def _check(name, run, tolerance=1e-5):
    """Builds the block, then compares call and steps in both modes, before and after the weights change."""
    make, data = BLOCKS[name]
    block, x = make(), data()
    block(x)
    for phase in ("at initialisation", "after every weight changed"):
        for training in (False, True):
            call, steps = run(block, x, training)
            _assert_equal(call, steps, tolerance, f"{name}, training={training}, {phase}")
        _perturb(block, seed=len(name))
    return block


def test_every_public_block_is_covered():
    blocks = {value for value in vars(rk).values()
              if inspect.isclass(value) and issubclass(value, rk.BlockLayer) and value is not rk.BlockLayer}
    covered = {type(make()) for make, _ in BLOCKS.values()} - {StudentBlock}
    assert blocks == covered == {rk.BasicBlock, rk.BottleneckBlock, rk.PreActBasicBlock, rk.FixupBasicBlock,
                                 rk.TransformerBlock, rk.Residual}


@pytest.mark.parametrize("name", list(BLOCKS))
def test_the_steps_compute_what_the_call_computes(name):
    block = _check(name, _call_and_steps)
    assert block.check_steps(BLOCKS[name][1]()) < 1e-4  # the helper a student runs says the same


@pytest.mark.skipif(BACKEND == "torch", reason="XLA: TensorFlow and JAX (jit_compile on PyTorch is torch.compile)")
@pytest.mark.parametrize("name", ONE_EACH)
def test_the_steps_compute_what_the_call_computes_under_xla(name):
    def run(block, x, training):
        def both(x):
            with keras.StatelessScope():  # a BatchNorm's update of its moving statistics stays out of the trace
                return _call_and_steps(block, x, training)

        return _compiled(both)(x)  # compiled anew each time: JAX reads the weights when it traces

    _check(name, run, tolerance=1e-4)


@pytest.mark.parametrize("name", ONE_EACH)
def test_the_steps_compute_what_the_call_computes_under_mixed_bfloat16(name):
    keras.config.set_dtype_policy("mixed_bfloat16")
    block = _check(name, _call_and_steps, tolerance=2e-2)
    assert block.compute_dtype == "bfloat16"
    assert keras.ops.convert_to_numpy(block(BLOCKS[name][1]())).dtype.name == "bfloat16"


def test_a_wrong_step_is_caught_the_guard():
    # the comparison can fail: steps that leave out the final ReLU differ from the call
    class Wrong(StudentBlock):
        def residual_steps(self, training=False):
            return [rk.ResidualStep("", branch=self.f, training=training)]

    block, x = Wrong(), _sequences()
    block(x)
    call, steps = _call_and_steps(block, x, False)
    with pytest.raises(AssertionError, match="differ"):
        _assert_equal(call, steps, 1e-5, "Wrong")
    with pytest.raises(ValueError, match="do not compute what the layer computes"):
        block.check_steps(x)


# the formula is on the page ---------------------------------------------------------------------------------


def _own_call(cls):
    """The `call` method in the class's own body (an AST node), or None."""
    tree = ast.parse(pathlib.Path(inspect.getsourcefile(cls)).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return next((item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "call"),
                        None)
    return None


@pytest.mark.parametrize("cls", [rk.BasicBlock, rk.BottleneckBlock, rk.PreActBasicBlock, rk.FixupBasicBlock,
                                 rk.TransformerBlock, rk.Residual], ids=lambda cls: cls.__name__)
def test_each_block_writes_its_addition_in_its_own_call_in_its_own_module(cls):
    call = _own_call(cls)
    assert call is not None, f"{cls.__name__} writes no call of its own"
    assert any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) for node in ast.walk(call))
    assert inspect.getsourcefile(cls.call) == inspect.getsourcefile(cls)
    assert "+" in inspect.getsource(cls.call) and len(inspect.getsource(cls.call).splitlines()) <= 25


def _own_method(cls, name):
    """The method `name` in the class's own body (an AST node), or None."""
    tree = ast.parse(pathlib.Path(inspect.getsourcefile(cls)).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return next((item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == name), None)
    return None


def _self_attributes(function, kind):
    """The names X of `self.X = ...` (kind "assigned") or of `self.X(...)` (kind "called") in a method."""
    if kind == "assigned":
        nodes = [node for node in ast.walk(function) if isinstance(getattr(node, "ctx", None), ast.Store)]
    else:
        nodes = [node.func for node in ast.walk(function) if isinstance(node, ast.Call)]
    return {node.attr for node in nodes
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"}


CIFAR_BLOCKS = {
    rk.BasicBlock: lambda: rk.BasicBlock(8, strides=2, shortcut="B"),
    rk.BottleneckBlock: lambda: rk.BottleneckBlock(2, strides=2, shortcut="B"),
    rk.PreActBasicBlock: lambda: rk.PreActBasicBlock(8, strides=2, shortcut="B"),
    rk.FixupBasicBlock: lambda: rk.FixupBasicBlock(8, strides=2, num_blocks=3),
}


@pytest.mark.parametrize("cls", list(CIFAR_BLOCKS), ids=lambda cls: cls.__name__)
def test_a_cifar_block_makes_its_layers_in_its_own_build_and_applies_them_in_its_own_branch(cls):
    # timm's BasicBlock: the layers made in the block's class, f one method beside call that applies them itself
    build, branch = _own_method(cls, "build"), _own_method(cls, "branch")
    assert build is not None and branch is not None, f"{cls.__name__} writes its own build and branch"
    block = CIFAR_BLOCKS[cls]()
    block(_images())
    made = {name for name in _self_attributes(build, "assigned") if isinstance(getattr(block, name), keras.layers.Layer)}
    assert {id(layer) for layer in block.layers} == {id(getattr(block, name)) for name in made}
    applied = _self_attributes(branch, "called")
    assert applied - {"activation"} == made - {"shortcut_layer"}, "branch applies each layer itself, nothing else"
    between = [base for base in cls.__mro__[1:cls.__mro__.index(rk.BlockLayer)]]
    assert [base.__name__ for base in between] in ([], ["ConvBlockBase"])


def test_no_class_derives_call_from_its_steps():
    sources = {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}
    assert not [path for path, text in sources.items() if "__init_subclass__" in text or "__signature__" in text]
    assert "call" not in vars(rk.BlockLayer)


def test_a_block_layer_without_call_is_refused_by_keras():
    class OnlySteps(rk.BlockLayer):
        def residual_steps(self, training=False):
            return [rk.ResidualStep("", branch=lambda x: x)]

    with pytest.raises(NotImplementedError, match="call"):
        OnlySteps()(np.ones((2, 3), "float32"))


def test_a_layer_without_steps_names_the_protocol():
    class OnlyCall(rk.BlockLayer):
        def call(self, x):
            return x + 1

    with pytest.raises(TypeError, match="residual_steps"):
        OnlyCall().check_steps(np.ones((2, 3), "float32"))


def test_the_call_signatures_keras_reads():
    # Keras passes `training` and `mask` by the call's parameter names
    parameters = inspect.signature(rk.TransformerBlock.call).parameters
    assert list(parameters)[:7] == ["self", "inputs", "training", "padding_mask", "attention_mask", "mask",
                                    "return_attention_scores"]
    assert parameters["training"].default is None
    assert list(inspect.signature(rk.BasicBlock.call).parameters) == ["self", "inputs", "training"]
    assert list(inspect.signature(rk.Residual.call).parameters) == ["self", "inputs", "training", "mask"]


def test_training_reaches_the_steps_batchnorm_uses_batch_statistics_only_in_training():
    block = rk.BasicBlock(4)
    x = _images() * 3 + 2
    inference = keras.ops.convert_to_numpy(block(x, training=False))
    training = keras.ops.convert_to_numpy(block(x, training=True))
    assert np.max(np.abs(training - inference)) > 1e-2  # batch statistics differ from the moving ones at init
    assert all(step.training is True for step in residual_steps(block, training=True))


def test_the_attention_scores_come_with_the_output():
    block = rk.TransformerBlock(num_heads=2)
    x = _sequences((2, 5, 8))
    y, scores = block(x, return_attention_scores=True)
    assert tuple(y.shape) == (2, 5, 8) and tuple(scores.shape) == (2, 2, 5, 5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(y), keras.ops.convert_to_numpy(block(x)), atol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras.ops.sum(scores, axis=-1)), 1.0, atol=1e-5)


@pytest.mark.skipif(BACKEND == "torch", reason="jit_compile=True means torch.compile on PyTorch")
@pytest.mark.parametrize("name", ["BasicBlock", "FixupBasicBlock", "TransformerBlock-pre"])
def test_a_model_of_blocks_trains_with_xla_on(name):
    # Keras silently turns XLA off for a layer that cannot be compiled (model.jit_compile becomes False)
    make, data = BLOCKS[name]
    x = data()
    inputs = keras.Input(x.shape[1:])
    pooled = keras.layers.Flatten()(make()(inputs))
    model = keras.Model(inputs, keras.layers.Dense(2)(pooled))
    model.compile("sgd", "mse", jit_compile=True)
    history = model.fit(x, np.zeros((len(x), 2), "float32"), epochs=2, verbose=0)
    assert model.jit_compile is True
    assert all(np.isfinite(history.history["loss"]))
