"""`python -m tracks.language`: character Transformers, plain vs residual, Pre-LN vs Post-LN.

One command shows that residual connections make deep Transformers
trainable, that Pre-LN trains without warmup where Post-LN struggles (Xiong
et al. 2020), and that ReZero trains without normalisation; every model
writes a sample so you can read the difference.

    python -m tracks.language                            # the quick CPU preset
    python -m tracks.language --preset fast              # GPU: nanoGPT's 6x384
    python -m tracks.language --depths 2,6,12 --variants pre,post --warmup-steps 0,100
    python -m tracks.language --resume runs/language-20261130-101500
    python -m tracks.language sample RUN_DIR --prompt "ROMEO:"
    python -m tracks.language diagnose                   # instruments at initialisation, no training
    python -m tracks.language compare runs/language-... docs/reference/language-tinyshakespeare-s0   # a run beside the reference
    python -m tracks.language diagnose --model gpt.keras # the same instruments on your saved model
    python -m tracks.language prefetch                   # download Tiny Shakespeare for offline runs
"""

import argparse
import sys

from tracks.common import instruments
from tracks.common.cli import (
    announce,
    diagnose_command,
    fail,
    log,
    prefetch_command,
    start_or_resume,
    train_command,
    train_parser,
)
from tracks.common.run_dir import RunFileError, describe_os_error, read_json
from tracks.common.runtime import setup_runtime
from tracks.common.training import run_grid
from tracks.language import experiment, report
from tracks.language.presets import CPU_XLA, PRESETS, LanguageConfig

TRACK = "language"
PROG = "python -m tracks.language"
DEFAULT_PRESET = "quick"

# Measured training throughput of the 4 x 128 baby GPT, tokens/s, for the
# estimate printed before training; other models scale with depth x width^2.
REFERENCE_TOKENS_PER_SECOND = {"cpu": 20000.0, "gpu": 400000.0}


def estimate_seconds(config, accelerator):
    rate = REFERENCE_TOKENS_PER_SECOND["gpu" if accelerator else "cpu"]
    tokens = config.steps * config.batch_size * config.sequence_length
    cost = sum((spec.depth / 4) * (config.embed_dim / 128) ** 2 for spec in experiment.grid(config))
    return tokens * cost / rate * 1.15 + 60  # evaluation, samples; instruments at init


def check_prompt(vocab, prompt):
    unknown = vocab.unknown_characters(prompt)
    if unknown:
        raise ValueError(
            f"the prompt {prompt!r} has characters the model's vocabulary does not know: "
            f"{unknown!r}"
        )


def load_data(config, source=None):
    """The run's text; `source` (a resumed run's resolved source) replaces `config.data`."""
    from tracks.language.data import load_text_data

    return load_text_data(source or config.data, data_dir=config.data_dir, log=log,
                          sequence_length=config.sequence_length)


def prepare(args):
    """Everything that can fail on bad input, before anything is written."""
    from tracks.language.data import fingerprint, parse_source

    return start_or_resume(args, TRACK, LanguageConfig, PRESETS, parse_source=parse_source,
                           load_data=load_data, fingerprint=fingerprint,
                           check=lambda config, data: check_prompt(data.vocab, config.prompt))


def train(config, run, data):
    """Trains a prepared run (once per seed with --seeds), then writes its report."""
    from tracks.common import seeds
    from tracks.language.data import fingerprint

    return seeds.train(config, run, data, train_one_run=train_one_run, load_data=load_data,
                       fingerprint=fingerprint, report=report, plot_banner=plot_banner, log=log)


def train_one_run(config, run, data):
    """Trains the grid of one run (one seed), then writes its report and samples."""
    runtime = setup_runtime(config.precision, config.xla, config.strategy, seed=config.seed,
                            cpu_xla=CPU_XLA)
    data.vocab.save(run.path / "vocab.json")
    specs = experiment.grid(config)
    announce(run, config, runtime, specs, estimate_seconds(config, runtime.accelerator),
             f"{data.name}: {len(data.train_tokens):,} training / {len(data.val_tokens):,} "
             f"validation characters, vocabulary {data.vocab.size}")
    run.update_results(
        track=TRACK, preset=config.preset, dataset=data.name, banner=data.banner,
        vocab_size=data.vocab.size, unknown_val_chars=data.unknown_val_chars,
        unigram_loss=experiment.unigram_loss(data), **runtime.describe(),
    )
    if "initialisation" not in run.read_results():
        run.update_results(initialisation=initial_instruments(config, data, run.path))
    results = run_grid(
        run, specs, lambda spec: experiment.train_one(config, spec, runtime, data, run, log), log=log,
        cost=lambda spec: spec.depth + 2,  # embedding and head cost about two blocks
        seed=config.seed,
    )
    figures = [("Validation loss", "loss_curves.png")]
    banner, subtitle = plot_banner(data), report.run_subtitle(config, data)
    report.plot_loss_curves(run, config, results, run.path / "loss_curves.png", banner, subtitle)
    figures += instruments.instrument_figures(run.path)
    if report.plot_stream(config, results, run.path / "stream.png", banner, subtitle):
        figures.append(("The residual stream after training", "stream.png"))
    figures += report.plot_trained_instruments(config, results, run.path, banner, subtitle)
    report.write_samples(run, config, results)
    report.write_summary(run, config, results, figures, data.banner)
    log(report.terminal_ending(run, results))


def plot_banner(data):
    return "PYDOC FALLBACK DATA, NOT TINY SHAKESPEARE" if data.banner else None


def initial_instruments(config, data, out_dir):
    """The gradient, activation and Jacobian plots of every grid model at initialisation."""
    import keras

    models, seen = [], set()
    for spec in experiment.grid(config):
        if (spec.variant, spec.depth) in seen:
            continue  # warmup changes training, not the model at initialisation
        seen.add((spec.variant, spec.depth))
        keras.utils.set_random_seed(config.seed)
        label = f"{spec.variant}-{spec.depth}"
        models.append((label, spec.variant, spec.depth, experiment.build_model(config, spec, data.vocab.size)))
    x, y = experiment.instrument_batch(config, data)
    subtitle = f"{report.run_subtitle(config, data)}; at initialisation, {len(x)} validation windows"
    return instruments.at_initialisation(models, x, out_dir, y=y, banner=plot_banner(data), subtitle=subtitle,
                                         log=log)


def sample(argv):
    """`python -m tracks.language sample RUN_DIR`: generate from the run's best model."""
    parser = argparse.ArgumentParser(prog="python -m tracks.language sample",
                                     description="Generate text from a run's best_model.keras.")
    parser.add_argument("run_dir", help="a finished language run directory")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--num-chars", type=int, default=300, help="characters to generate")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=None, help="sample among the k most likely")
    parser.add_argument("--seed", type=int, default=None, help="seed for reproducible samples")
    args = parser.parse_args(argv)
    import pathlib

    import keras

    from residual_keras import generate
    from tracks.language.vocabulary import CharVocabulary

    run_dir = pathlib.Path(args.run_dir)
    model_path, vocab_path = run_dir / "best_model.keras", run_dir / "vocab.json"
    if not model_path.exists() or not vocab_path.exists():
        return fail(not_sampleable(run_dir))
    try:
        vocab = CharVocabulary.load(vocab_path)
    except ValueError as error:  # names the file
        return fail(f"{error}; {PROG} --resume {run_dir} writes it again")
    except OSError as error:
        return fail(f"{describe_os_error(error)}; {PROG} --resume {run_dir} writes it again")
    try:
        check_prompt(vocab, args.prompt)
        prompt = vocab.encode(args.prompt)
        if args.num_chars < 0:
            raise ValueError(f"--num-chars must be >= 0, got {args.num_chars}")
    except ValueError as error:
        return fail(str(error))
    try:
        model = keras.saving.load_model(model_path)
    except Exception as error:  # a damaged zip, a foreign file: Keras raises many kinds
        return fail(f"{model_path} cannot be loaded ({type(error).__name__}); it is damaged: "
                    f"restore it from a copy or train the run again")
    try:
        ids = generate(model, prompt, args.num_chars, temperature=args.temperature,
                       top_k=args.top_k, seed=args.seed)
    except ValueError as error:
        return fail(str(error))
    print(args.prompt + vocab.decode(ids[len(prompt):]))
    return 0


def not_sampleable(run_dir):
    """Why a directory without best_model.keras has nothing to sample from."""
    results_path = run_dir / "results.json"
    if not results_path.exists():
        return f"{run_dir} has no best_model.keras and vocab.json: not a finished language run"
    try:
        models = read_json(results_path, "")["models"]
    except (RunFileError, TypeError, KeyError):
        return f"{run_dir} has no best_model.keras, and its results.json is damaged"
    seed_runs = sorted(path.name for path in run_dir.glob("seed-*") if (path / "best_model.keras").exists())
    if seed_runs:
        return (f"{run_dir} is a run over several seeds: each seed's run has its own best model; sample "
                f"from one of them, e.g. {PROG} sample {run_dir / seed_runs[0]}")
    if models and all(isinstance(m, dict) and m.get("diverged") for m in models):
        return (f"every model of {run_dir} diverged ({len(models)} of {len(models)}): there is no "
                f"trained model to sample from; try a lower --learning-rate or warmup")
    return (f"{run_dir} has no best_model.keras yet ({len(models)} models finished): not a finished "
            f"language run; continue it with {PROG} --resume {run_dir}")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sample"]:
        return sample(argv[1:])
    if argv[:1] == ["diagnose"]:
        from tracks.language.data import fingerprint, parse_source

        return diagnose_command(PROG, TRACK, LanguageConfig, PRESETS, DEFAULT_PRESET, argv[1:],
                                parse_source=parse_source, load_data=load_data, fingerprint=fingerprint,
                                initial_instruments=initial_instruments,
                                title="Character Transformers at initialisation",
                                instrument_batch=experiment.instrument_batch, banner_of=plot_banner)
    if argv[:1] == ["prefetch"]:
        return prefetch_command(PROG, "tiny_shakespeare", argv[1:])
    if argv[:1] == ["compare"]:
        from tracks.common.compare import compare_command
        from tracks.language.findings import language_findings

        return compare_command(PROG, TRACK, argv[1:], report.comparison_figures,
                               lambda results, config: language_findings(results, config.get("variants") or ()))
    args = train_parser(PROG, __doc__, LanguageConfig, PRESETS, DEFAULT_PRESET).parse_args(argv)
    return train_command(PROG, lambda: prepare(args), train)


if __name__ == "__main__":
    sys.exit(main())
