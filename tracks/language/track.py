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

from tracks.common.track import Track, TrackParts
from tracks.language import prepare, source
from tracks.language.presets import CPU_XLA, PRESETS, LanguageConfig
from tracks.language.results import LanguageResults
from tracks.language.sample import sample_command


def load_parts() -> TrackParts:
    """Loading, training and reporting: modules that import TensorFlow, imported once the options are checked."""
    from tracks.language import data, experiment, findings, report

    return TrackParts(
        # Data: prepare.py (loading, checks, cost), data.py (the texts), vocabulary.py.
        load_data=prepare.load_data,
        fingerprint=data.fingerprint,
        check=prepare.check,
        fit_defaults=prepare.fit_defaults,
        sample_limits=prepare.sample_limits,
        data_title=data.dataset_title,
        run_fields=prepare.run_fields,
        # Models and training: experiment.py (pipeline.py: the batches).
        grid=experiment.grid,
        build_model=experiment.build_model,
        instrument_batch=experiment.instrument_batch,
        train_one=experiment.train_one,
        # The report: report.py, findings.py.
        subtitle=report.subtitle,
        report=report.report,
        seeds_report=report.seeds_report,
        figures=report.comparison_figures,
        findings=findings.language_findings,
    )


TRACK = Track(
    name="language",
    usage=__doc__,
    config_cls=LanguageConfig,
    presets=PRESETS,
    load_parts=load_parts,
    results=LanguageResults,  # results.json, typed: results.py
    parse_source=source.parse_source,  # --data: source.py
    resources=prepare.resources,  # memory and time, before anything loads: prepare.py
    prefetch=(source.TINY_SHAKESPEARE, source.TINY_SHAKESPEARE_HOST),
    instrument_examples="validation windows",
    cpu_xla=CPU_XLA,
    commands={"sample": sample_command},  # generates from a run's best model: sample.py
    diagnose_title="Character Transformers at initialisation",
    setup_fields={"training": ("steps",), "diagnose": ("embed_dim", "init", "layer_norm_epsilon",
                                                       "instrument_sequences", "sequence_length")},
)
