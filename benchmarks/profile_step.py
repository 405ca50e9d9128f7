"""Where a ResNet-20 training step spends its time: the top TensorFlow ops of a profiled stretch of steps.

    python benchmarks/profile_step.py                 # the library's BatchNorm (fused on TensorFlow)
    RESIDUAL_KERAS_FUSED_BATCHNORM=0 python benchmarks/profile_step.py   # Keras' own BatchNorm ops

The model, optimizer and input pipeline are those of `benchmarks/throughput.py`
(the vision track's own code, XLA as the track chooses on this machine).
After warm-up steps, `tf.profiler` records `--steps` steps; the host plane's
events are summed per op type (Conv2DBackpropFilter, FusedBatchNormV3, ...)
over every thread, so the shares are of the CPU time the ops took, not of
the wall time.
"""

import argparse
import collections
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# Events of the host plane that are not ops but contain them: counting them would count the ops twice.
FRAMEWORK_SPANS = {"Process", "Run", "RunSync", "ExecutorState::Process", "ExecutorDoneCallback"}


def op_times(log_dir):
    """{op type: total microseconds} from the .xplane.pb files tf.profiler wrote under `log_dir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    totals = collections.Counter()
    for path in pathlib.Path(log_dir).rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            if not plane.name.startswith("/host:CPU"):
                continue
            names = {key: metadata.name for key, metadata in plane.event_metadata.items()}
            for line in plane.lines:
                for event in line.events:
                    name = names.get(event.metadata_id, "")
                    if ":" not in name:  # TF op events are "name:OpType"; the rest are framework spans
                        continue
                    kind = name.rsplit(":", 1)[1].strip()
                    if kind in FRAMEWORK_SPANS or kind.startswith("__inference"):
                        continue  # spans that contain the ops (the executor, the tf.function call)
                    totals[kind] += event.duration_ps / 1e6
    return totals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="profiled steps (default 8)")
    parser.add_argument("--top", type=int, default=8, help="op types listed (default 8)")
    args = parser.parse_args(argv)
    from tracks.common.environment import configure_process, read_environment

    configure_process(read_environment())  # as a track's command does: pools that sleep, before any op
    import tensorflow as tf

    from benchmarks.throughput import vision_setup
    from residual_keras import batchnorm
    from tracks.common.runtime import setup_runtime

    setup_args = argparse.Namespace(xla="auto", precision="auto", steps_per_execution=1)
    config, build, train_ds, _, _ = vision_setup("resnet20", setup_args)
    runtime = setup_runtime(config.precision, config.xla, config.strategy, seed=0)
    model = build(runtime)
    model.fit(train_ds, steps_per_epoch=4, epochs=1, verbose=0)  # compile and warm up
    with tempfile.TemporaryDirectory() as log_dir:
        tf.profiler.experimental.start(log_dir)
        model.fit(train_ds, steps_per_epoch=args.steps, epochs=1, verbose=0)
        tf.profiler.experimental.stop()
        totals = op_times(log_dir)
    total = sum(totals.values())
    print(f"ResNet-20, batch {config.batch_size}, XLA {'on' if runtime.xla else 'off'}, fused BatchNorm "
          f"{'on' if batchnorm.fused_enabled() else 'off'}: {args.steps} steps, {total / 1e3 / args.steps:.0f} ms "
          f"of op time per step (summed over threads)")
    print("| op | ms per step | share |")
    print("| --- | --- | --- |")
    for name, micros in totals.most_common(args.top):
        print(f"| {name} | {micros / 1e3 / args.steps:.1f} | {100 * micros / total:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
