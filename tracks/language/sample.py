"""`python -m tracks.language sample RUN_DIR`: text from a finished run's best model."""

import pathlib

from tracks.common.config import finite_float, path_option, whole
from tracks.common.console import fail
from tracks.common.environment import configure_process, read_environment
from tracks.common.option_ranges import MAX_SEED
from tracks.common.options import OneLineParser
from tracks.common.results import ResultsFormatError
from tracks.common.run_directory import RunFileError, describe_os_error, read_json
from tracks.language.presets import MAX_SAMPLE_CHARS
from tracks.language.results import LanguageResults


def check_prompt(vocab, prompt):
    """`ValueError` for a prompt with characters the vocabulary does not know."""
    unknown = vocab.unknown_characters(prompt)
    if unknown:
        raise ValueError(
            f"the prompt {prompt!r} has characters the model's vocabulary does not know: "
            f"{unknown!r}"
        )


def sample_command(track, argv):
    """`python -m tracks.language sample RUN_DIR`: generate from the run's best model."""
    parser = OneLineParser(prog=f"{track.prog} sample", description="Generate text from a run's best_model.keras.")
    parser.add_argument("run_dir", type=path_option, help="a finished language run directory")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--num-chars", type=whole, default=300,
                        help=f"characters to generate (0..{MAX_SAMPLE_CHARS:,})")
    parser.add_argument("--temperature", type=finite_float, default=0.8, help="0 = greedy")
    parser.add_argument("--top-k", type=whole, default=None, help="sample among the k most likely (>= 1)")
    parser.add_argument("--seed", type=whole, default=None, help=f"seed for reproducible samples (0..{MAX_SEED})")
    args = parser.parse_args(argv)
    from tracks.language.vocabulary import CharVocabulary

    for option, bad, allowed in (("--num-chars", not 0 <= args.num_chars <= MAX_SAMPLE_CHARS, f"in 0..{MAX_SAMPLE_CHARS:,}"),
                                 ("--temperature", args.temperature < 0, ">= 0 (0 = greedy)"),
                                 ("--top-k", args.top_k is not None and args.top_k < 1, ">= 1"),
                                 ("--seed", args.seed is not None and not 0 <= args.seed <= MAX_SEED,
                                  f"in 0..{MAX_SEED}")):
        if bad:
            return fail(f"{option} must be {allowed}, got {getattr(args, option[2:].replace('-', '_'))}")

    run_dir = pathlib.Path(args.run_dir)
    model_path, vocab_path = run_dir / "best_model.keras", run_dir / "vocab.json"
    if not model_path.exists():
        return fail(not_sampleable(run_dir, track.prog))
    if not vocab_path.exists():
        return fail(f"{run_dir} has best_model.keras but no vocab.json (the characters its ids stand for): "
                    f"{track.prog} --resume {run_dir} writes it again")
    try:
        vocab = CharVocabulary.load(vocab_path)
    except UnicodeDecodeError:
        return fail(f"{vocab_path} is damaged (not UTF-8 text); {track.prog} --resume {run_dir} writes it again")
    except ValueError as error:  # names the file
        return fail(f"{error}; {track.prog} --resume {run_dir} writes it again")
    except OSError as error:
        return fail(f"{describe_os_error(error)}; {track.prog} --resume {run_dir} writes it again")
    try:
        check_prompt(vocab, args.prompt)
        prompt = vocab.encode(args.prompt)
    except ValueError as error:
        return fail(str(error))
    configure_process(read_environment())
    import keras

    from residual_keras import generate

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


def not_sampleable(run_dir, prog):
    """Why a directory without best_model.keras has nothing to sample from."""
    results_path = run_dir / "results.json"
    if not results_path.exists():
        return f"{run_dir} has no best_model.keras: not a finished language run"
    try:
        track = read_json(results_path, "").get("track")
    except (RunFileError, AttributeError):
        track = None
    if isinstance(track, str) and track.split("-")[0] != "language":
        return (f"{run_dir} is a {track!r} run, not a language run: there is no language model to sample; "
                f"sample from a run of {prog}")
    try:
        models = LanguageResults.from_json(read_json(results_path, "")).models
    except (RunFileError, ResultsFormatError):
        return f"{run_dir} has no best_model.keras, and its results.json is damaged"
    seed_runs = sorted(path.name for path in run_dir.glob("seed-*") if (path / "best_model.keras").exists())
    if seed_runs:
        return (f"{run_dir} is a run over several seeds: each seed's run has its own best model; sample "
                f"from one of them, e.g. {prog} sample {run_dir / seed_runs[0]}")
    if models and all(m.diverged for m in models):
        return (f"every model of {run_dir} diverged ({len(models)} of {len(models)}): there is no "
                f"trained model to sample from; try a lower --learning-rate or warmup")
    return (f"{run_dir} has no best_model.keras yet ({len(models)} models finished): not a finished "
            f"language run; continue it with {prog} --resume {run_dir}")


__all__ = ["check_prompt", "not_sampleable", "sample_command"]
