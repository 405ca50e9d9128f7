"""`python -m tracks.vision`: plain vs residual ResNets of growing depth on CIFAR-10.

He et al. 2015, figure 6, on your own machine: deeper plain networks train
worse (the degradation problem), deeper residual networks train better.

    python -m tracks.vision                       # the quick CPU preset
    python -m tracks.vision --preset class        # CPU: He et al.'s depths 20 and 56, under 30 minutes
    python -m tracks.vision --preset fast         # GPU: 20/56/110, 30 epochs
    python -m tracks.vision --depths 20,56 --variants plain,residual,fixup
    python -m tracks.vision --resume runs/vision-20261130-101500
    python -m tracks.vision diagnose              # unnormalised nets at 20/56/110 layers, at initialisation
    python -m tracks.vision compare runs/vision-... docs/reference/vision-cifar10-s0   # a run beside the reference
    python -m tracks.vision diagnose --model my_resnet.keras   # the same instruments on your saved model
    python -m tracks.vision prefetch              # download CIFAR-10 for offline runs
"""

from tracks.common.track import Track, TrackParts
from tracks.vision import prepare, source
from tracks.vision.presets import CPU_XLA, PRESETS, VisionConfig
from tracks.vision.results import VisionResults


def load_parts() -> TrackParts:
    """Loading, training and reporting: modules that import TensorFlow, imported once the options are checked."""
    from tracks.vision import data, experiment, findings, report
    from tracks.vision.data import loading

    return TrackParts(
        # Data: prepare.py (loading, checks, cost), data/ (the images).
        load_data=prepare.load_data,
        fingerprint=data.fingerprint,
        check=prepare.check,
        fit_defaults=prepare.fit_defaults,
        sample_limits=prepare.sample_limits,
        data_title=loading.dataset_title,
        run_fields=prepare.run_fields,
        # Models and training: experiment.py.
        grid=experiment.grid,
        build_model=experiment.build_model,
        instrument_batch=experiment.instrument_batch,
        train_one=experiment.train_one,
        # The report: report.py, findings.py.
        subtitle=report.subtitle,
        report=report.report,
        seeds_report=report.seeds_report,
        figures=report.comparison_figures,
        findings=findings.vision_findings,
    )


TRACK = Track(
    name="vision",
    usage=__doc__,
    config_cls=VisionConfig,
    presets=PRESETS,
    load_parts=load_parts,
    results=VisionResults,  # results.json, typed: results.py
    parse_source=source.parse_source,  # --data: source.py
    resources=prepare.resources,  # memory and time, before anything loads: prepare.py
    prefetch=("cifar10", source.CIFAR10_HOST),
    instrument_examples="training images",
    cpu_xla=CPU_XLA,
    diagnose_preset="mechanism",  # `diagnose --preset quick` measures the quick grid instead
    diagnose_title="Vision networks at initialisation",
    setup_fields={"training": ("epochs", "synthetic_faintest"), "diagnose": ("width", "instrument_images")},
)
