"""`python -m tracks.X diagnose --model PATH.keras`: the instruments on a student's saved models."""

import json

import numpy as np
import pytest

import keras
import residual_keras as rk
from keras import ops
from residual_keras import TokenAndPositionEmbedding, TransformerBlock, cifar_resnet, transformer_lm
from track_helpers import run_cli
from tracks.language.__main__ import main as language_main
from tracks.vision.__main__ import main as vision_main


def _save(model, path):
    model.save(path)
    return path


def test_vision_diagnose_compares_a_plain_and_a_residual_saved_model(tmp_path, capsys):
    keras.utils.set_random_seed(0)
    plain = _save(cifar_resnet(8, block=rk.blocks.plain(), width=4), tmp_path / "plain.keras")
    identity = _save(cifar_resnet(8, block=rk.blocks.zero_gamma_basic(), width=4), tmp_path / "zero_gamma.keras")
    argv = ["diagnose", "--model", plain, "--model", identity, "--data", "synthetic",
            "--instrument-images", "8", "--out", tmp_path / "run"]
    code, out, err = run_cli(vision_main, argv, capsys)
    assert code == 0, err
    for name in ("gradient_flow.png", "activation_growth.png", "jacobian.png", "jacobian_blocks.png",
                 "layer_gradients.png", "summary.md"):
        assert (tmp_path / "run" / name).stat().st_size > 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [m["variant"] for m in results["saved_models"]] == ["plain", "residual"]
    assert results["targets"] == "the data's labels"
    measured = results["measured"]
    # Zero-gamma blocks are their shortcuts: the stream's Jacobian is exactly 1.
    assert measured["zero_gamma"]["jacobian_norm"] == pytest.approx(1.0, abs=1e-4)
    assert measured["plain"]["jacobian_norm"] != pytest.approx(1.0, abs=1e-2)
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "# Your models: plain, zero_gamma" in summary and "no training" in summary
    assert "3 blocks (plain)" in out


def test_language_diagnose_on_a_gpt_with_two_outputs(tmp_path, capsys):
    tokens = keras.Input((16,), dtype="int32")
    x = TokenAndPositionEmbedding(vocab_size=110, sequence_length=16, embed_dim=16, name="tokens_and_positions")(tokens)
    x = TransformerBlock(num_heads=2, intermediate_dim=32, rezero=True, name="first")(x)
    x = TransformerBlock(num_heads=2, intermediate_dim=32, rezero=True, name="second")(x)
    gpt = keras.Model(tokens, [keras.layers.Dense(110)(x), x], name="gpt")
    path = _save(gpt, tmp_path / "gpt.keras")
    base = ["diagnose", "--model", path, "--data", "pydoc", "--preset", "smoke"]
    code, _, err = run_cli(language_main, [*base, "--out", tmp_path / "refused"], capsys)
    assert code == 2 and "2 outputs" in err and "output_index" in err
    code, _, err = run_cli(language_main, [*base, "--output-index", "0", "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    measured = json.loads((tmp_path / "run" / "results.json").read_text())["measured"]
    assert measured["gpt"]["jacobian_norm"] == pytest.approx(1.0, abs=1e-4)  # ReZero: the identity


def test_diagnose_model_says_what_to_pass_instead(tmp_path, capsys):
    small = _save(cifar_resnet(8, width=4, input_shape=(8, 8, 3)), tmp_path / "small.keras")
    code, _, err = run_cli(vision_main, ["diagnose", "--model", small, "--data", "synthetic",
                                         "--out", tmp_path / "a"], capsys)
    assert code == 2 and "--input-shape 8,8,3" in err
    code, _, err = run_cli(vision_main, ["diagnose", "--model", small, "--input-shape", "8,8,3",
                                         "--examples", "4", "--out", tmp_path / "b"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "b" / "results.json").read_text())["targets"] == "random labels"
    code, _, err = run_cli(vision_main, ["diagnose", "--model", tmp_path / "missing.keras"], capsys)
    assert code == 2 and "no such file" in err
    lm = _save(transformer_lm(20, 16, 1, embed_dim=8, num_heads=2), tmp_path / "lm.keras")
    code, _, err = run_cli(language_main, ["diagnose", "--model", lm, "--data", "pydoc",
                                           "--preset", "smoke", "--out", tmp_path / "c"], capsys)
    assert code == 2 and "reads 20" in err and "--input-shape 16" in err


def _text_classifier(units=1):
    tokens = keras.Input((16,), dtype="int32")
    x = TokenAndPositionEmbedding(vocab_size=50, sequence_length=16, embed_dim=8, mask_zero=True)(tokens)
    x = TransformerBlock(num_heads=2, causal=False, name="block1")(x)
    x = TransformerBlock(num_heads=2, causal=False, name="block2")(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(tokens, keras.layers.Dense(units, activation="sigmoid" if units == 1 else None)(x),
                       name="classifier")


def test_a_text_model_is_measured_on_ids_from_its_vocabulary_and_a_nan_is_a_failure(tmp_path, capsys):
    model = _text_classifier()
    model.compile(loss="binary_crossentropy")
    path = _save(model, tmp_path / "classifier.keras")
    base = ["diagnose", "--model", path, "--input-shape", "16"]
    code, _, err = run_cli(language_main, [*base, "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    measured = json.loads((tmp_path / "run" / "results.json").read_text())["measured"]["classifier"]
    assert measured["loss"] > 0 and measured["gradient_gain"] > 0
    # Token id 0 only: every position is padding, the pooled output is 0/0.
    code, _, err = run_cli(language_main, [*base, "--input-range", "0,1", "--out", tmp_path / "padding"],
                           capsys)
    assert code == 1 and "not numbers (NaN" in err and err.count("\n") == 1
    assert not (tmp_path / "padding").exists()  # nothing written
    code, _, err = run_cli(language_main, [*base, "--input-dtype", "int32", "--input-range", "5,3",
                                           "--out", tmp_path / "bad"], capsys)
    assert code == 2 and "LOW < HIGH" in err and not (tmp_path / "bad").exists()


def test_output_index_by_name_on_a_dict_model_and_the_lock_is_released(tmp_path, capsys):
    from tracks.common.run_directory import RunDirectory

    images = keras.Input((8, 8, 3))
    x = cifar_resnet(8, width=4, input_shape=(8, 8, 3))(images)
    model = keras.Model(images, {"cls": x, "aux": keras.layers.Dense(1, name="aux")(x)}, name="two_heads")
    model.compile(loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "aux": "mse"})
    path = _save(model, tmp_path / "two_heads.keras")
    base = ["diagnose", "--model", path, "--input-shape", "8,8,3", "--examples", "4"]
    code, _, err = run_cli(vision_main, [*base, "--output-index", "cls", "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    measured = json.loads((tmp_path / "run" / "results.json").read_text())["measured"]["two_heads"]
    assert measured["loss"] > 0 and all(norm > 0 for norm in measured["block_weight_grad_norms"])
    RunDirectory(tmp_path / "run", "vision-diagnose").lock()  # free again: the command released it
    # By position, in the order of model.output_names, not the dict's order: Keras sorts a dict's keys
    # (0 'aux', 1 'cls') and names each output by its layer (the second is the nested 'resnet8').
    assert model.output_names == ["aux", "resnet8"] and list(model.output) == ["cls", "aux"]
    code, _, err = run_cli(vision_main, [*base, "--output-index", "1", "--out", tmp_path / "second"], capsys)
    assert code == 0, err
    second = json.loads((tmp_path / "second" / "results.json").read_text())["measured"]["two_heads"]
    for key in ("loss", "gradient_gain", "stream_grad_norms", "block_weight_grad_norms"):
        assert second[key] == pytest.approx(measured[key], rel=1e-6), key
    code, _, err = run_cli(vision_main, [*base, "--output-index", "0", "--out", tmp_path / "first"], capsys)
    assert code == 2 and "random class labels, which the loss of model.compile (mse)" in err, err
    assert not (tmp_path / "first").exists()
    code, _, err = run_cli(vision_main, [*base, "--out", tmp_path / "refused"], capsys)
    assert code == 2 and "2 outputs (0 'aux'" in err and not (tmp_path / "refused").exists()


@keras.saving.register_keras_serializable(package="test_diagnose_model")
class SqrtGateBlock(keras.layers.Layer):
    """y = x + sqrt(s) * Dense(x), with s >= 0 starting at 0, where d sqrt(s) / ds is infinite."""

    def build(self, input_shape):
        self.dense = keras.layers.Dense(input_shape[-1], name="dense")
        self.dense.build(input_shape)
        self.s = self.add_weight(name="s", shape=(), initializer="zeros")

    def branch(self, x):
        return ops.sqrt(self.s) * self.dense(x)

    def call(self, x):
        return x + self.branch(x)

    def residual_steps(self, **unused):
        return [rk.ResidualStep("", branch=self.branch)]


def test_a_weight_gradient_that_is_not_finite_is_a_failure(tmp_path, capsys):
    inputs = keras.Input((8,))
    x = SqrtGateBlock(name="gate2")(SqrtGateBlock(name="gate1")(keras.layers.Dense(8, name="stem")(inputs)))
    path = _save(keras.Model(inputs, keras.layers.Dense(3)(x), name="gated"), tmp_path / "gated.keras")
    # The loss and the stream's gradient are finite (the blocks are the identity); d loss / d s is not.
    code, _, err = run_cli(vision_main, ["diagnose", "--model", path, "--input-shape", "8", "--examples", "4",
                                         "--out", tmp_path / "run"], capsys)
    assert code == 1 and "the measurements of gated are not numbers (NaN" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_no_gradient_is_a_failure_only_where_the_loss_is_zero(tmp_path, capsys):
    # A classifier over one class (a student's Dense(1) head): its log-softmax is exactly 0, so the
    # loss is 0 and no gradient reaches any block, whatever the blocks do. That measures nothing.
    backbone = cifar_resnet(8, width=4, input_shape=(8, 8, 3))
    head = keras.layers.Dense(1, name="one_class")(backbone.get_layer("pool").output)
    one_class = keras.Model(backbone.input, head, name="one_class")
    one_class.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    path = _save(one_class, tmp_path / "one_class.keras")
    code, _, err = run_cli(vision_main, ["diagnose", "--model", path, "--input-shape", "8,8,3", "--examples", "4",
                                         "--out", tmp_path / "nothing"], capsys)
    assert code == 1 and "the measurements of one_class measure nothing: the loss is 0" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "nothing").exists()
    # Fixup starts its classifier at 0: no gradient reaches a block, but the loss (ln 10) is measured.
    fixup = _save(cifar_resnet(8, block=rk.blocks.fixup(), width=4, input_shape=(8, 8, 3)), tmp_path / "fixup.keras")
    code, _, err = run_cli(vision_main, ["diagnose", "--model", fixup, "--input-shape", "8,8,3", "--examples", "4",
                                         "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    measured = json.loads((tmp_path / "run" / "results.json").read_text())["measured"]["fixup"]
    assert measured["gradient_gain"] is None and not any(measured["block_weight_grad_norms"])
    assert measured["loss"] == pytest.approx(np.log(10), rel=1e-5)
    assert "undefined" in (tmp_path / "run" / "summary.md").read_text()


@pytest.mark.parametrize("failure, code, said", [
    (None, 0, ""),
    (OSError(28, "No space left on device", "gradient_flow.png"), 2, "gradient_flow.png: No space left on device"),
    (ValueError("a model of an unknown kind"), 2, "a model of an unknown kind"),
    (KeyboardInterrupt(), 130, "interrupted; nothing was kept"),
])
def test_diagnose_model_releases_its_lock_however_it_ends(tmp_path, capsys, monkeypatch, failure, code, said):
    """diagnose --model runs through the same command path as training: one line, the lock released."""
    from tracks.common import instruments
    from tracks.common.run_directory import RunDirectory

    created = []
    create = RunDirectory.create.__func__

    def remember(cls, *args, **kwargs):
        created.append(create(cls, *args, **kwargs))
        return created[-1]

    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(RunDirectory, "create", classmethod(remember))
    if failure is not None:
        monkeypatch.setattr(instruments, "at_initialisation", broken)
    path = _save(cifar_resnet(8, width=4, input_shape=(8, 8, 3)), tmp_path / "small.keras")
    result, _, err = run_cli(vision_main, ["diagnose", "--model", path, "--input-shape", "8,8,3", "--examples", "4",
                                           "--out", tmp_path / "run"], capsys)
    assert result == code and said in err, err
    assert len(created) == 1 and not created[0].locked
    if failure is None:
        assert (tmp_path / "run" / "summary.md").exists()
    else:
        assert err.count("\n") == 1 and not (tmp_path / "run").exists()  # nothing half-measured is kept


def _rewritten(path, target, change):
    """A copy of the archive `path` at `target` whose config.json went through `change(text) -> text`."""
    import zipfile

    with zipfile.ZipFile(path) as source, zipfile.ZipFile(target, "w") as copy:
        for name in source.namelist():
            data = source.read(name)
            copy.writestr(name, change(data.decode()) if name == "config.json" else data)
    return target


@keras.saving.register_keras_serializable(package="StudentLayers")
class Doubled(keras.layers.Layer):
    """A student's own layer, registered while this module is imported."""

    def call(self, x):
        return 2 * x


def test_diagnose_model_names_an_unknown_layer_and_missing_custom_objects(tmp_path, capsys, monkeypatch):
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="head")(Doubled(name="doubled")(inputs)))
    path = _save(model, tmp_path / "student.keras")
    base = ["diagnose", "--input-shape", "4", "--examples", "4"]

    future = _rewritten(path, tmp_path / "future.keras", lambda text: text.replace('"Dense"', '"DenseFromTheFuture"'))
    code, _, err = run_cli(vision_main, [*base, "--model", future, "--out", tmp_path / "a"], capsys)
    assert code == 2 and err.count("\n") == 1 and not (tmp_path / "a").exists()
    assert f"--model {future}: unknown layer DenseFromTheFuture (keras.layers): this Keras" in err

    monkeypatch.delitem(keras.saving.get_custom_objects(), "StudentLayers>Doubled")  # a module not imported
    code, _, err = run_cli(vision_main, [*base, "--model", path, "--out", tmp_path / "b"], capsys)
    assert code == 2 and err.count("\n") == 1 and not (tmp_path / "b").exists()
    assert f"--model {path}: missing custom objects StudentLayers>Doubled (module {__name__}): pass --import" in err
