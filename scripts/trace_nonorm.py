"""Per-step traces of one `nonorm` model: what blows up or dies first (issue 41).

Trains one variant of the `nonorm` preset (same data, same batches in the same
order, same initialisation seed, same optimizer and schedule as
`python -m tracks.vision --preset nonorm`) with a hand-written training step
that records, at every step, before the update:

- the batch loss and accuracy, the learning rate;
- the gradient's global norm and the norms of the classifier's, the stem's
  and the Fixup scalars' gradients;
- each block's branch ratio rms(f(x)) / rms(x) and its output's rms;
- every Fixup scalar's value (stem and head biases, each block's b1..b4, s);
- the logits' standard deviation and largest magnitude, the classifier's
  kernel norm and bias;
- the share of the batch's images whose stream is all zeros at some block's
  input (a ReLU after the addition shut for the whole image).

    python scripts/trace_nonorm.py --variant fixup --seed 0 --trace-epochs 2 --out traces/fixup-s0

writes `trace.csv` and `trace.png` (four panels) there. Options after the
script's own are the track's (`--learning-rate`, `--schedule`, ...) and
change the preset as they would a run.
"""

import argparse
import csv
import dataclasses
import math
import pathlib
import sys


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", required=True, help="a variant of the nonorm preset, e.g. fixup")
    parser.add_argument("--depth", type=int, default=56)
    parser.add_argument("--data", default="synthetic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-epochs", type=int, default=2, help="epochs traced (the schedule is the preset's)")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


def rms(x):
    import tensorflow as tf

    return tf.sqrt(tf.reduce_mean(tf.square(tf.cast(x, tf.float32))))


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    import keras
    import numpy as np
    import tensorflow as tf

    from residual_keras.diagnostics import blocks as model_blocks
    from residual_keras.steps import residual_steps
    from tracks.vision import experiment
    from tracks.vision.data import training_epochs
    from tracks.vision.experiment import VisionSpec
    from tracks.vision.presets import PRESETS
    from tracks.common.run import load
    from tracks.common.track import RunContext
    from tracks.vision.track import TRACK

    changes = {"data": args.data, "seed": args.seed}
    if args.learning_rate is not None:
        changes["learning_rate"] = args.learning_rate
    config = dataclasses.replace(PRESETS["nonorm"], **changes)
    spec = VisionSpec(args.variant, args.depth)
    data = load(TRACK, config)
    epochs = training_epochs(data, config.batch_size, augment=config.augment, seed=config.seed)
    steps_per_epoch = len(data.y_train) // config.batch_size
    keras.utils.set_random_seed(config.seed)  # as the track does before each model
    model = experiment.build_model(spec, RunContext(config, data=data))
    optimizer = experiment.build_optimizer(config, spec, model, steps_per_epoch * config.epochs)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    blocks = model_blocks(model)
    names = list(blocks)
    probe = keras.Model(model.inputs, [blocks[name].input for name in names] + [model.output])
    branches = [residual_steps(blocks[name])[0].branch for name in names]
    scalars = [(layer.name if layer.name in ("stem_bias", "head_bias") else f"{path}/{layer.name}", layer)
               for path, layer in _scalar_layers(model)]
    scalar_ids = {id(layer.variable) for _, layer in scalars}
    classifier = model.get_layer("classifier")

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            outs = probe(x, training=True)
            inputs, logits = outs[:-1], outs[-1]
            loss = loss_fn(y, logits)
            total = loss + tf.add_n(model.losses) if model.losses else loss
        variables = model.trainable_variables
        grads = tape.gradient(total, variables)
        stats = {
            "loss": loss,
            "accuracy": tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                                        tf.cast(y, tf.int32)), tf.float32)),
            "grad_norm": tf.linalg.global_norm(grads),
            "grad_classifier": tf.linalg.global_norm([g for v, g in zip(variables, grads)
                                                      if v.path.startswith("classifier")]),
            "grad_stem": tf.linalg.global_norm([g for v, g in zip(variables, grads)
                                                if v.path.startswith("stem_conv")]),
            "logit_std": tf.math.reduce_std(logits),
            "logit_max": tf.reduce_max(tf.abs(logits)),
            "classifier_kernel": tf.norm(classifier.kernel),
            "classifier_bias_max": tf.reduce_max(tf.abs(classifier.bias)),
        }
        scalar_grads = [g for v, g in zip(variables, grads) if id(v) in scalar_ids]
        if scalar_grads:
            stats["grad_scalars"] = tf.linalg.global_norm(scalar_grads)
        for name, block_input, branch in zip(names, inputs, branches):
            stats[f"ratio/{name}"] = rms(branch(block_input)) / rms(block_input)
        stats["stream_out"] = rms(inputs[-1])
        # An image whose stream is all zeros at some block's input (every ReLU after an addition shut):
        # what the per-image branch ratio of the instruments reads as about 1e30.
        per_image = tf.stack([tf.sqrt(tf.reduce_mean(tf.square(block_input), axis=[1, 2, 3]))
                              for block_input in inputs], axis=1)  # (batch, blocks)
        stats["dead_images"] = tf.reduce_mean(tf.cast(tf.reduce_min(per_image, axis=1) < 1e-6, tf.float32))
        optimizer.apply_gradients(zip(grads, variables))
        return stats

    rows = []
    for epoch in range(args.trace_epochs):
        for x, y in epochs(epoch):
            lr = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
            stats = {key: float(value) for key, value in step(x, y).items()}
            row = {"step": len(rows), "epoch": epoch, "lr": lr, **stats}
            row.update({f"scalar/{name}": float(keras.ops.convert_to_numpy(layer.value)) for name, layer in scalars})
            rows.append(row)
        last = rows[-1]
        print(f"{spec.id} seed {config.seed} epoch {epoch + 1}: loss {last['loss']:.3f} "
              f"acc {np.mean([r['accuracy'] for r in rows[-steps_per_epoch:]]):.3f} "
              f"grad {last['grad_norm']:.3g} max ratio "
              f"{max(last[f'ratio/{n}'] for n in names):.3g} logit std {last['logit_std']:.3g} "
              f"dead images {np.mean([r['dead_images'] for r in rows[-steps_per_epoch:]]):.3f}", flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "trace.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, names, [name for name, _ in scalars], out / "trace.png",
         f"{spec.id}, {config.data} seed {config.seed}, lr {config.learning_rate} {config.schedule}, "
         f"warm-up {config.warmup_steps} (nonorm preset)")


def _scalar_layers(model):
    """(block name or "", layer) for every Fixup scalar: the stem's and head's biases, each block's b1..b4, s."""
    from residual_keras.fixup import FixupBasicBlock, ScalarBias, ScalarScale

    found = []
    for layer in model.layers:
        if isinstance(layer, (ScalarBias, ScalarScale)):
            found.append(("", layer))
        elif isinstance(layer, FixupBasicBlock):
            found += [(layer.name, scalar) for scalar in (layer.bias1, layer.bias2, layer.bias3, layer.scale,
                                                          layer.bias4)]
    return found


def plot(rows, names, scalar_names, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    figure, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax = axes[0, 0]
    ax.plot(steps, [r["loss"] for r in rows], label="batch loss")
    ax.plot(steps, [10 * r["lr"] for r in rows], label="10 x learning rate")
    ax.plot(steps, [r["accuracy"] for r in rows], label="batch accuracy", alpha=0.6)
    ax.plot(steps, [r["dead_images"] for r in rows], label="share of images with a zero stream", color="black")
    ax.axhline(math.log(10), color="grey", ls=":", label="ln 10 (chance loss)")
    ax.set_ylim(0, 4)
    ax.set_title("loss, accuracy, learning rate")
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    colours = plt.cm.viridis([i / max(len(names) - 1, 1) for i in range(len(names))])
    for name, colour in zip(names, colours):
        ax.plot(steps, [max(r[f"ratio/{name}"], 1e-8) for r in rows], color=colour, lw=0.8)
    ax.set_yscale("log")
    ax.set_title("branch ratio rms(f(x))/rms(x) per block (dark: first, yellow: last)")
    ax = axes[1, 0]
    for key in ("grad_norm", "grad_classifier", "grad_stem", "grad_scalars", "logit_std", "stream_out"):
        if key in rows[0]:
            ax.plot(steps, [max(abs(r[key]), 1e-12) for r in rows], label=key)
    ax.set_yscale("log")
    ax.set_title("gradient norms, logits' std, rms of the last block's input")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    if scalar_names:
        for name in scalar_names:
            kind = name.rsplit("/", 1)[-1]
            style = {"scale": "-", "bias4": "--", "bias1": ":", "bias2": ":", "bias3": ":"}.get(kind, "-")
            lw = 2.0 if name in ("stem_bias", "head_bias") else 0.6
            ax.plot(steps, [r[f"scalar/{name}"] for r in rows], ls=style, lw=lw,
                    label=name if name in ("stem_bias", "head_bias") else None)
        ax.set_title("Fixup scalars (thick: stem/head bias; solid: s, dashed: b4, dotted: b1-b3)")
        ax.legend(fontsize=8)
    else:
        ax.plot(steps, [r["classifier_kernel"] for r in rows], label="classifier kernel norm")
        ax.plot(steps, [r["classifier_bias_max"] for r in rows], label="max |classifier bias|")
        ax.set_title("classifier")
        ax.legend(fontsize=8)
    for ax in axes.flat:
        ax.set_xlabel("step")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
