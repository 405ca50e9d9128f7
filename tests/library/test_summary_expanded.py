"""`model.summary(expand_nested=True)` opens every block (issue 42): a student sees its layers.

Keras expands a layer that has `layers`; the blocks list their sublayers
there (residual_keras/_sublayers.py) without changing how `.keras` files
store them.
"""

import re
import zipfile

import h5py
import keras
import pytest

import residual_keras as rk


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich cuts the table at the terminal's width


def _summary(model):
    lines = []
    model.summary(expand_nested=True, line_length=150, print_fn=lambda line, **_: lines.append(line))
    return "\n".join(lines)


def _nested_rows(text, block):
    """{sublayer name: parameter count} of the rows printed under `block`."""
    rows, inside = {}, False
    for line in text.splitlines():
        if not line.startswith("│"):  # borders and the header
            continue
        raw = line.split("│")[1]
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if cells[0].startswith(f"{block} ("):
            inside = True
            continue
        if inside:
            if not cells[0].startswith("└"):
                break
            if raw.index("└") > 4:  # a sublayer's own sublayer (a projection's conv)
                continue
            name = re.match(r"└ (\S+) \(", cells[0]).group(1)
            rows[name] = int(cells[2].replace(",", "").split()[0])
    return rows


def _residual_mlp():
    inputs = keras.Input((6,))
    block = rk.Residual(keras.layers.Dense(4, name="branch_dense"), shortcut=keras.layers.Dense(4, name="shortcut_dense"),
                        name="block1")
    return keras.Model(inputs, block(inputs))


def test_resnet20_summary_shows_each_blocks_convolutions_with_their_parameters():
    text = _summary(rk.cifar_resnet(20))
    first = _nested_rows(text, "stage1_block1")
    assert first == {"branch1_conv": 16 * 16 * 9, "branch1_norm": 4 * 16,
                     "branch2_conv": 16 * 16 * 9, "branch2_norm": 4 * 16}
    downsampling = _nested_rows(text, "stage2_block1")
    assert downsampling["branch1_conv"] == 16 * 32 * 9 and downsampling["shortcut"] == 0


@pytest.mark.parametrize("make, block, expected", [
    (lambda: rk.cifar_resnet(8, block=rk.blocks.basic(shortcut="B"), width=4), "stage2_block1",
     {"branch1_conv", "branch1_norm", "branch2_conv", "branch2_norm", "shortcut"}),
    (lambda: rk.cifar_resnet(8, block=rk.blocks.fixup(), width=4), "stage1_block1",
     {"bias1", "conv1", "bias2", "bias3", "conv2", "scale", "bias4"}),
    (lambda: rk.transformer_lm(11, 8, 1, embed_dim=8, num_heads=2), "block1",
     {"attention_norm", "feedforward_norm", "attention_qkv", "attention_output", "feedforward_intermediate",
      "feedforward_output"}),
    (lambda: _residual_mlp(), "block1", {"branch_dense", "shortcut_dense"}),
])
def test_every_kind_of_block_opens_in_the_summary(make, block, expected):
    rows = _nested_rows(_summary(make()), block)
    assert expected <= set(rows), rows
    model_params = make().get_layer(block).count_params()
    assert sum(rows.values()) == model_params  # the rows account for every weight of the block


def test_saved_files_keep_each_sublayer_under_its_own_name(tmp_path):
    # Keras' saving walks list-valued attributes: a `layers` list would move every sublayer
    # of a block under "layers/" and break every checkpoint written before.
    path = tmp_path / "model.keras"
    model = rk.cifar_resnet(8, block=rk.blocks.basic(shortcut="B"), width=4)
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        archive.extract("model.weights.h5", tmp_path)
    names = []
    with h5py.File(tmp_path / "model.weights.h5") as weights:
        weights.visit(names.append)
    inside_blocks = [name for name in names if re.match(r"layers/basic_block(_\d+)?/", name)]
    assert inside_blocks and not any("/layers/" in name for name in inside_blocks)
    restored = keras.saving.load_model(path)
    assert len(restored.get_layer("stage2_block1").layers) == 5
