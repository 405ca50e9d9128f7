"""How much a linear classifier gets from a `nonorm` model's features at initialisation.

A net whose branches start at 0 (Fixup, zero-initialised pre-activation) is,
at step 0, the stem followed by the shortcuts: its pooled features are the
global averages of ReLU(stem conv) in `width` channels (zeros appended at
each stage). If those averages say nothing about the class, the classifier
cannot learn, so no gradient tells the branches which features to grow:
training starts at a saddle that only SGD noise leaves. This script measures
that: a softmax regression fitted to the pooled features (standardised) of
the training images, its training accuracy reported.

    python scripts/probe_init_features.py --variant fixup --data synthetic --seed 0
"""

import argparse
import dataclasses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="fixup")
    parser.add_argument("--depth", type=int, default=56)
    parser.add_argument("--data", default="synthetic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=300, help="full-batch steps of the softmax regression")
    args = parser.parse_args()
    import keras
    import numpy as np

    from tracks.vision import experiment
    from tracks.vision.experiment import VisionSpec
    from tracks.vision.presets import PRESETS
    from tracks.common.run import load
    from tracks.common.track import RunContext
    from tracks.vision.track import TRACK

    config = dataclasses.replace(PRESETS["nonorm"], data=args.data, seed=args.seed)
    data = load(TRACK, config)
    keras.utils.set_random_seed(config.seed)
    model = experiment.build_model(VisionSpec(args.variant, args.depth), RunContext(config, data=data))
    features_model = keras.Model(model.inputs, model.get_layer("pool").output)
    features = features_model.predict(data.normalize(data.x_train), batch_size=250, verbose=0)
    used = features.std(axis=0) > 0
    features = (features[:, used] - features[:, used].mean(0)) / features[:, used].std(0)
    keras.utils.set_random_seed(0)
    probe = keras.Sequential([keras.Input((features.shape[1],)), keras.layers.Dense(data.num_classes)])
    probe.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = probe.fit(features, data.y_train, batch_size=len(features), epochs=args.epochs, verbose=0)
    print(f"{args.variant}-{args.depth} at init, {data.name} seed {args.seed}: {int(used.sum())} non-constant "
          f"pooled features of {len(used)}; linear probe training accuracy "
          f"{history.history['accuracy'][-1]:.3f} (chance {1 / data.num_classes:.3f}), "
          f"loss {history.history['loss'][-1]:.3f}")


if __name__ == "__main__":
    main()
