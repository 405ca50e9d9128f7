"""`python -m tracks.toy`: plain vs residual MLPs on two spirals, degradation in a minute or two.

The degradation problem small enough to run live in a lecture: the deep
plain MLP fits its own training points worse than the shallow one, its
residual twin (the same layers, plus the shortcut) does not; the decision
boundaries show it, and every instrument of the other tracks measures it.

    python -m tracks.toy                        # 2 and 20 layers (run times: docs/running.md)
    python -m tracks.toy --preset deep          # depths 2, 8, 32, 64: several minutes
    python -m tracks.toy --depths 4,16 --epochs 5
    python -m tracks.toy --seeds 0,1            # every model once per seed, then mean +- std
    python -m tracks.toy diagnose               # the instruments at initialisation only
"""

from tracks.common.track import Track, TrackParts
from tracks.toy import prepare
from tracks.toy.presets import PRESETS, ToyConfig
from tracks.toy.results import ToyResults


def load_parts() -> TrackParts:
    """Loading, training and reporting: modules that import TensorFlow, imported once the options are checked."""
    from tracks.toy import data, experiment, findings, report

    return TrackParts(
        # Data: prepare.py (loading, the instruments' sample, cost), data.py (the spirals).
        load_data=prepare.load_data,
        fingerprint=data.fingerprint,
        sample_limits=prepare.sample_limits,
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
        findings=findings.toy_findings,
    )


TRACK = Track(
    name="toy",
    usage=__doc__,
    config_cls=ToyConfig,
    presets=PRESETS,
    load_parts=load_parts,
    results=ToyResults,  # results.json, typed: results.py
    parse_source=prepare.parse_source,  # --data: prepare.py
    resources=prepare.resources,  # time, before anything loads: prepare.py
    instrument_options={"jacobian_depths": 4},  # the Jacobian along 4 depths: seconds, not half a minute
    cpu_xla=False,  # measured: tracing dominates these small steps, and XLA adds its compilation
    cpu_graph_optimizer=False,  # Grappler off: faster first steps (measured: docs/maintainers.md)
    diagnose_title="Plain and residual MLPs at initialisation",
    setup_fields={"training": ("epochs",), "diagnose": ("width",)},
)
