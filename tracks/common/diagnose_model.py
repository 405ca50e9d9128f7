"""`python -m tracks.X diagnose --model PATH.keras`: the instruments on a student's own saved model.

    python -m tracks.X diagnose --model my_resnet.keras
    python -m tracks.X diagnose --model plain.keras --model residual.keras
    python -m tracks.X diagnose --model edsr.keras --input-shape 48,48,3
    python -m tracks.X diagnose --model gpt.keras --output-index 0

The model is loaded (its residual_keras layers are registered when the
library is imported; `--import MODULE` imports a module that registers the
student's own layers), measured on a batch of the track's data (or on random
inputs of `--input-shape`), and the run directory gets the plots and the
summary.md that `diagnose` writes for the track's own networks: gradient
flow, activation growth, the stream's Jacobian, weight gradients per block.
With two models (a plain one and a residual one, say) every plot compares
them. The models are measured as saved: trained BatchNorm statistics are
kept unless `--calibrate-batchnorm` asks for the batch's statistics.
"""

import argparse
import dataclasses
import functools
import importlib
import math
import pathlib
from typing import Any, NamedTuple

import numpy as np

from tracks.common.command import run_command
from tracks.common.config import path_option, whole
from tracks.common.console import fail, log
from tracks.common.environment import configure_process
from tracks.common.model_file import check_model_file, explain_load_failure
from tracks.common.option_ranges import whole_number
from tracks.common.options import train_parser
from tracks.common.results import SCHEMA
from tracks.common.resume import resolve_config
from tracks.common.run import load
from tracks.common.run_directory import RunDirectory
from tracks.common.track import GridModel, RunContext


def _parser(prog, config_cls, presets, default_preset):
    parser = train_parser(
        f"{prog} diagnose", "Measure gradient flow, activation growth and the stream's Jacobian "
        "of your own saved Keras models (--model PATH.keras, once or twice) on a batch of the "
        "track's data or on random inputs (--input-shape).",
        config_cls, presets, default_preset)
    parser.add_argument("--model", action="append", required=True, metavar="PATH.keras", type=path_option,
                        help="a saved model to measure (give it twice to compare two models)")
    parser.add_argument("--input-shape", default=None, metavar="A,B,...",
                        help="measure on random inputs of this shape (without the batch axis) "
                             "instead of the track's data; token ids for an integer input")
    parser.add_argument("--input-dtype", default=None, metavar="DTYPE",
                        help="dtype of the random inputs (default: the model's input dtype, else "
                             "float32); an integer dtype draws token ids")
    parser.add_argument("--input-range", default=None, metavar="LOW,HIGH",
                        help="draw the random inputs uniformly from [LOW, HIGH) (default: token ids "
                             "from the model's embedding vocabulary, leaving out the padding id 0 "
                             "where it masks zeros; standard normal floats)")
    parser.add_argument("--examples", type=whole, default=16,
                        help="examples in the random batch of --input-shape (default 16)")
    parser.add_argument("--output-index", default=None, metavar="INDEX_OR_NAME",
                        help="for a model with several outputs: the one the loss reads, by position "
                             "(in the order of model.output_names) or by name")
    parser.add_argument("--blocks", default=None, metavar="NAME,NAME,...",
                        help="the layers to measure as blocks (default: every layer that implements the "
                             "residual protocol: the package's blocks, residual_keras.Residual, yours)")
    parser.add_argument("--import", dest="modules", action="append", default=[], metavar="MODULE",
                        help="import this module first (it registers your own layer classes)")
    parser.add_argument("--calibrate-batchnorm", action=argparse.BooleanOptionalAction, default=False,
                        help="set BatchNorm statistics from the batch before the Jacobian "
                             "(default: measure the model with the statistics it was saved with)")
    return parser


def _load(paths, modules):
    """[(label, path, model)]: each saved model, labelled by its file name."""
    import keras

    import residual_keras  # noqa: F401  (registers the library's layers for loading)

    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:  # noqa: BLE001  (not found, or its own code fails: SyntaxError, NameError, ...)
            first_line = (str(error).splitlines() or [""])[0]
            raise ValueError(f"--import {module} failed: {type(error).__name__}: {first_line}") from None
    loaded, labels = [], []
    for path in map(pathlib.Path, paths):
        try:
            model = keras.saving.load_model(path)
        except Exception as error:  # noqa: BLE001  (Keras raises many kinds for a file it cannot read)
            raise ValueError(explain_load_failure(path, error)) from None
        label = path.stem if path.stem not in labels else f"{path.stem}-{len(labels) + 1}"
        labels.append(label)
        loaded.append((label, path, model))
    return loaded


def _parse_shape(text):
    try:
        shape = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise ValueError(f"--input-shape expects positive integers such as 32,32,3; got {text!r}")
    return shape


def _output_index(text):
    """--output-index as a position (an integer) or an output's name."""
    if text is None:
        return None
    text = text.strip()
    position = whole_number(text, signed=True)
    return text if position is None else position


def _chosen_output(model, outputs, output_index):
    """The output the loss reads, chosen as the instruments choose it."""
    from residual_keras.diagnostics import choose_output

    return choose_output(model, outputs, output_index)


def _layers(layer):
    """`layer` and every layer inside it reachable through `.layers` (nested models and stages)."""
    found = [layer]
    for inner in getattr(layer, "layers", None) or []:
        found += _layers(inner)
    return found


def _vocabulary(model):
    """(lowest, highest + 1) token id the model's first embedding reads, or None.

    From a `keras.layers.Embedding` (`input_dim`) or the package's
    `TokenAndPositionEmbedding` (`vocab_size`); with `mask_zero=True`, 0 is
    padding and is left out, so that no example is all padding.
    """
    import keras

    from residual_keras import TokenAndPositionEmbedding

    for layer in _layers(model):
        if isinstance(layer, TokenAndPositionEmbedding):
            size, mask_zero = layer.vocab_size, layer.mask_zero
        elif isinstance(layer, keras.layers.Embedding):
            size, mask_zero = layer.input_dim, layer.mask_zero
        else:
            continue
        return (1 if mask_zero else 0), int(size)
    return None


def _parse_range(text):
    """(low, high) of --input-range: finite, LOW < HIGH, and HIGH - LOW a finite float (NumPy draws from it)."""
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"--input-range expects LOW,HIGH such as 1,20000 or -1,1; got {text!r}") from None
    if not math.isfinite(high - low):  # also NaN or infinite bounds
        raise ValueError(f"--input-range needs finite LOW and HIGH less than about 1.8e308 apart (a float's "
                         f"range); got {text!r}")
    if not low < high:
        raise ValueError(f"--input-range needs LOW < HIGH; got {text!r}")
    return low, high


def _random_batch(model, shape, examples, dtype, value_range, seed):
    """Random inputs: token ids from the model's vocabulary for an integer input, else floats.

    Args:
        dtype: None (the model's input dtype, else float32) or a dtype name.
        value_range: None or --input-range's (low, high) (`_parse_range`).
    """
    import keras

    rng = np.random.default_rng(seed)
    inputs = getattr(model, "inputs", None)
    if dtype is None:
        dtype = keras.backend.standardize_dtype(inputs[0].dtype) if inputs else "float32"
    try:
        dtype = keras.backend.standardize_dtype(dtype)
    except ValueError:
        raise ValueError(f"--input-dtype {dtype!r} is not a dtype (int32, float32, ...)") from None
    low_high = value_range
    if "int" not in dtype:
        if low_high is None:
            return rng.normal(size=(examples, *shape)).astype(dtype)
        return rng.uniform(*low_high, size=(examples, *shape)).astype(dtype)
    if low_high is None:
        low_high = _vocabulary(model)
        if low_high is None:
            raise ValueError(
                f"model {model.name!r} takes integer inputs but has no Embedding layer to read its "
                "vocabulary from: pass --input-range LOW,HIGH (the token ids to draw)")
    low, high = int(low_high[0]), int(low_high[1])
    if high <= low:
        raise ValueError(f"--input-range leaves no integer to draw in [{low}, {high})")
    limits = np.iinfo(dtype)
    if low < limits.min or high > limits.max + 1:
        raise ValueError(f"--input-range [{low}, {high}) does not fit {dtype} ({limits.min}..{limits.max})")
    return rng.integers(low, high, size=(examples, *shape)).astype(dtype)


def _declared_length(model):
    """The model's fixed or learned context length (models of token sequences), or None."""
    from residual_keras import TokenAndPositionEmbedding

    inputs = getattr(model, "inputs", None)
    if inputs and len(inputs[0].shape) == 2 and isinstance(inputs[0].shape[1], int):
        return inputs[0].shape[1]
    for layer in model.layers:
        if isinstance(layer, TokenAndPositionEmbedding):
            return layer.sequence_length
    return None


def _track_batch(config, data, model, instrument_batch, output_index):
    """(x, y) from the track's data, shaped for `model`; y None where its labels do not fit."""
    length = _declared_length(model)
    if length is not None and hasattr(config, "sequence_length") and length < config.sequence_length:
        config = dataclasses.replace(config, sequence_length=length)
    x, y = instrument_batch(RunContext(config, data=data))
    inputs = getattr(model, "inputs", None)
    if inputs and len(inputs) == 1:
        expected = tuple(inputs[0].shape[1:])
        if len(expected) != x.ndim - 1 or any(
                size is not None and size != got for size, got in zip(expected, x.shape[1:])):
            raise ValueError(
                f"model {model.name!r} takes inputs of shape {expected}; the track's data has "
                f"{tuple(x.shape[1:])}. Pass --input-shape {','.join(str(s or 32) for s in expected)} "
                "to measure it on random inputs.")
    if np.issubdtype(x.dtype, np.integer):  # token ids: the model must know every one of them
        known = _vocabulary(model)
        if known is None:
            probe = model(np.zeros_like(x[:1]), training=False)
            known = (0, _chosen_output(model, probe, output_index)[0].shape[-1])
        vocabulary = known[1]
        if int(x.max()) >= vocabulary:
            raise ValueError(
                f"the track's data has token ids up to {int(x.max())}; model {model.name!r} "
                f"reads {vocabulary}. Pass --input-shape {x.shape[1]} to measure it on random ids.")
    return x, y


def _labels_fit(model, x, y, output_index):
    """Whether the data's integer labels can be targets of the model's output."""
    if y is None or not np.issubdtype(np.asarray(y).dtype, np.integer):
        return False
    output = _chosen_output(model, model(x[:1], training=False), output_index)[0]
    return len(output.shape) >= 2 and int(np.max(y)) < output.shape[-1]


def _describe(model, blocks):
    """("plain" or "residual", number of blocks): plain when no block adds its input back."""
    from residual_keras import diagnostics

    if blocks:
        return "residual", len(blocks)
    found = list(diagnostics.blocks(model).values())
    plain = bool(found) and all(getattr(block, "residual", True) is False for block in found)
    return ("plain" if plain else "residual"), len(found)


class _Measurement(NamedTuple):
    """What `diagnose --model` measures, checked and loaded before its run directory is made."""

    loaded: list  # [(label, path, model)]
    x: Any
    y: Any  # the data's labels, or None for random ones
    shape: Any  # the --input-shape, or None (the track's data)
    data: Any  # the track's data, or None (random inputs)


def diagnose_saved_models(track, argv, environment):
    """The `diagnose --model` command of a `Track`; returns the exit code.

    It runs as every command that writes a run does (`command.run_command`):
    the models and the batch are loaded and checked before the run directory
    is made, the run's lock is released however the measurement ends, and
    an interrupted or failed measurement leaves nothing behind. The options
    and the files are checked before TensorFlow loads (`configure_process`).
    """
    prog = f"{track.prog} diagnose"
    args = _parser(track.prog, track.config_cls, track.presets,
                   track.diagnose_preset or track.default_preset).parse_args(argv)
    if args.resume:
        return fail("diagnose does not resume: it trains nothing")
    if len(args.model) > 2:
        return fail(f"--model is given {len(args.model)} times; measure one model, or compare two")
    blocks = [name.strip() for name in args.blocks.split(",") if name.strip()] if args.blocks else None
    output_index = _output_index(args.output_index)
    return run_command(prog, functools.partial(_prepare, track, args, environment, output_index),
                       functools.partial(_measure, track, blocks, output_index, args), resumable=False)


def _prepare(track, args, environment, output_index):
    """(config, run, measurement): the options, the models and the batch checked, then the run directory made."""
    config = resolve_config(args, f"{track.name}-diagnose", track.config_cls, track.presets).config
    if args.examples < 1:
        raise ValueError(f"--examples must be >= 1, got {args.examples}")
    if args.input_shape is None and (args.input_dtype or args.input_range):
        raise ValueError("--input-dtype and --input-range describe random inputs: give --input-shape too")
    shape = None if args.input_shape is None else _parse_shape(args.input_shape)
    value_range = None if args.input_range is None else _parse_range(args.input_range)
    for path in args.model:
        check_model_file(path)
    configure_process(environment)
    loaded = _load(args.model, args.modules)
    data = None
    if args.input_shape is None:
        config = dataclasses.replace(config, data=track.parse_source(config.data))
        data = load(track, config, trains=False)  # --model: no training option applies
    batches = []
    for _, _, model in loaded:
        if shape is not None:
            batches.append((_random_batch(model, shape, args.examples, args.input_dtype,
                                          value_range, config.seed), None))
        else:
            x, y = _track_batch(config, data, model, track.parts.instrument_batch, output_index)
            batches.append((x, y if _labels_fit(model, x, y, output_index) else None))
    x, y = batches[0]
    if any(other.shape != x.shape for other, _ in batches):
        raise ValueError("the two models take inputs of different shapes "
                         f"({', '.join(str(other.shape[1:]) for other, _ in batches)}); "
                         "compare models that read the same data")
    if any(labels is None for _, labels in batches):
        y = None  # random labels for both, so that their losses compare
    run = RunDirectory.create(f"{track.name}-diagnose", config, out=args.out)
    return config, run, _Measurement(loaded, x, y, shape, data)


def _measure(track, blocks, output_index, args, config, run, measurement):
    """The instruments on the loaded models, into `run`; the exit code (the run is discarded on failure)."""
    from tracks.common import instrument_report, instruments
    from tracks.common.runtime import setup_runtime

    loaded, x, y, shape, data = measurement
    banner = None if data is None else data.plot_banner
    setup_runtime("fp32", "off", "none", seed=config.seed)
    targets = "the data's labels" if y is not None else "random labels"
    models, described = [], []
    for label, path, model in loaded:
        variant, depth = _describe(model, blocks)
        # Each model is a series of its own; a plain model also gets the c^l reference line.
        models.append(GridModel(label, label, depth, model, plain=variant == "plain"))
        described.append({"id": label, "path": str(path), "variant": variant, "blocks": depth})
        log(f"{label}: {path}, {depth} blocks ({variant}); {targets} for the loss")
    try:
        summary = instruments.at_initialisation(
            models, x, run.path, y=y, banner=banner, log=log, calibrate=args.calibrate_batchnorm,
            output_index=output_index, blocks=blocks, depth_scaling=False,
            jacobian_iterations=SAVED_MODEL_JACOBIAN_ITERATIONS, jacobian_tolerance=1e-3)
    except (ValueError, TypeError) as error:
        run.discard()
        return fail(f"{error} (diagnose --model measures classifiers and next-token models with "
                    "the data's labels or random ones; a model that needs targets of its own is "
                    "measured from Python: residual_keras.diagnostics.gradient_norms(model, x, y))")
    broken = {}  # {what is wrong: [labels]}
    for label, values in summary.items():
        problem = _measurement_problem(values)
        if problem is not None:
            broken.setdefault(problem, []).append(label)
    if broken:
        run.discard()
        fail("; ".join(f"the measurements of {', '.join(labels)} {problem}" for problem, labels in broken.items())
             + "; nothing was written")
        return 1
    run.update_results(schema=SCHEMA, track=f"{track.name}-diagnose", dataset=None if data is None else data.name,
                       banner=None if data is None else data.banner, saved_models=described,
                       targets=targets, measured=summary)
    where = (f"random inputs of shape {shape}" if shape is not None
             else f"a batch of the {track.name} track's data ({data.title})")
    calibration = ("BatchNorm statistics set from the batch" if args.calibrate_batchnorm
                   else "any BatchNorm statistics as saved")
    instrument_report.write_diagnose_summary(
        run, f"Your models: {', '.join(label for label, _, _ in loaded)}", summary,
        None if data is None else data.banner,
        description=f"The saved models ({', '.join(str(p) for _, p, _ in loaded)}) measured as they "
                    f"are, no training, on {where}; {calibration}; the loss reads {targets}.\n")
    log(f"done: {run.path / 'summary.md'}")
    return 0


# Power iterations for a saved model's Jacobian: students' models are small, so run to tolerance.
SAVED_MODEL_JACOBIAN_ITERATIONS = 50


def _measurement_problem(values):
    """What makes a model's measurement no measurement (the end of a sentence), or None.

    Its loss, its stream gradients and its blocks' weight gradients must be
    finite numbers (None after `jsonable`: NaN or infinite). A loss of
    exactly 0 from which no gradient reaches any block measures nothing.
    No gradient with a loss above 0 is a measurement: a head that starts at
    0 (Fixup's) passes none back at initialisation, and the summary says so
    (the gain is "undefined").
    """
    loss = values.get("loss")
    gradients = [*(values.get("stream_grad_norms") or []), *(values.get("block_weight_grad_norms") or [])]
    if loss is None or any(norm is None for norm in gradients):
        return ("are not numbers (NaN or infinite: the model's loss or its gradient on this batch is not "
                "finite; a batch of padding only, or a model that overflows, does this)")
    if loss == 0 and not any(gradients):
        return ("measure nothing: the loss is 0 and no gradient reaches any block (the output the loss reads "
                "does not depend on the blocks, or matches its targets exactly; see --output-index)")
    return None
