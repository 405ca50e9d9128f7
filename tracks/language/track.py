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

from tracks.common.track import Track, part
from tracks.language.results import LanguageResults
from tracks.language.presets import CPU_XLA, PRESETS, LanguageConfig
from tracks.language.sample import sample_command
from tracks.language.source import TINY_SHAKESPEARE, TINY_SHAKESPEARE_HOST

TRACK = Track(
    name="language",
    usage=__doc__,
    config_cls=LanguageConfig,
    presets=PRESETS,
    # Data: source.py (--data), plan.py (loading, checks, cost), data.py (the texts), vocabulary.py.
    parse_source=part("tracks.language.source:parse_source"),
    load_data=part("tracks.language.plan:load_data"),
    fingerprint=part("tracks.language.data:fingerprint"),
    check=part("tracks.language.plan:check"),
    sample_limits=part("tracks.language.plan:sample_limits"),
    data_title=part("tracks.language.data:dataset_title"),
    resources=part("tracks.language.plan:resources"),
    run_fields=part("tracks.language.plan:run_fields"),
    prefetch=(TINY_SHAKESPEARE, TINY_SHAKESPEARE_HOST),
    # Models and training: experiment.py (pipeline.py: the batches).
    grid=part("tracks.language.experiment:grid"),
    build_model=part("tracks.language.experiment:build_model"),
    instrument_batch=part("tracks.language.experiment:instrument_batch"),
    instrument_examples="validation windows",
    train_one=part("tracks.language.experiment:train_one"),
    cpu_xla=CPU_XLA,
    # The report: report.py, findings.py; `sample` generates from a run's best model (sample.py).
    subtitle=part("tracks.language.report:subtitle"),
    report=part("tracks.language.report:report"),
    seeds_report=part("tracks.language.report:seeds_report"),
    figures=part("tracks.language.report:comparison_figures"),
    results=LanguageResults,  # results.json, typed: results.py
    findings=part("tracks.language.findings:language_findings"),
    commands={"sample": sample_command},
    diagnose_title="Character Transformers at initialisation",
)
