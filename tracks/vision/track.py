"""`python -m tracks.vision`: plain vs residual ResNets of growing depth on CIFAR-10.

He et al. 2015, figure 6, on your own machine: deeper plain networks train
worse (the degradation problem), deeper residual networks train better.

    python -m tracks.vision                       # the quick CPU preset
    python -m tracks.vision --preset fast         # GPU: 20/56/110, 30 epochs
    python -m tracks.vision --depths 20,56 --variants plain,residual,fixup
    python -m tracks.vision --resume runs/vision-20261130-101500
    python -m tracks.vision diagnose              # unnormalised nets at 20/56/110 layers, at initialisation
    python -m tracks.vision compare runs/vision-... docs/reference/vision-cifar10-s0   # a run beside the reference
    python -m tracks.vision diagnose --model my_resnet.keras   # the same instruments on your saved model
    python -m tracks.vision prefetch              # download CIFAR-10 for offline runs
"""

from tracks.common.track import Track, part
from tracks.vision.results import VisionResults
from tracks.vision.presets import CPU_XLA, PRESETS, VisionConfig
from tracks.vision.source import CIFAR10_HOST

TRACK = Track(
    name="vision",
    usage=__doc__,
    config_cls=VisionConfig,
    presets=PRESETS,
    # Data: tracks/vision/source.py (--data), plan.py (loading, checks, cost), data/ (the images).
    parse_source=part("tracks.vision.source:parse_source"),
    load_data=part("tracks.vision.plan:load_data"),
    fingerprint=part("tracks.vision.data:fingerprint"),
    check=part("tracks.vision.plan:check"),
    sample_limits=part("tracks.vision.plan:sample_limits"),
    data_title=part("tracks.vision.data.sources:dataset_title"),
    resources=part("tracks.vision.plan:resources"),
    run_fields=part("tracks.vision.plan:run_fields"),
    prefetch=("cifar10", CIFAR10_HOST),
    # Models and training: experiment.py.
    grid=part("tracks.vision.experiment:grid"),
    build_model=part("tracks.vision.experiment:build_model"),
    instrument_batch=part("tracks.vision.experiment:instrument_batch"),
    instrument_examples="training images",
    train_one=part("tracks.vision.experiment:train_one"),
    cpu_xla=CPU_XLA,
    # The report: report.py, findings.py.
    subtitle=part("tracks.vision.report:subtitle"),
    report=part("tracks.vision.report:report"),
    seeds_report=part("tracks.vision.report:seeds_report"),
    figures=part("tracks.vision.report:comparison_figures"),
    results=VisionResults,  # results.json, typed: results.py
    findings=part("tracks.vision.findings:vision_findings"),
    diagnose_preset="mechanism",  # `diagnose --preset quick` measures the quick grid instead
    diagnose_title="Vision networks at initialisation",
)
