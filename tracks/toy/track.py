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

from tracks.common.track import Track, part
from tracks.toy.results import ToyResults
from tracks.toy.presets import PRESETS, ToyConfig

TRACK = Track(
    name="toy",
    usage=__doc__,
    config_cls=ToyConfig,
    presets=PRESETS,
    # Data: data.py (the spirals), plan.py (loading, the instruments' sample, cost).
    parse_source=part("tracks.toy.data:parse_source"),
    load_data=part("tracks.toy.plan:load_data"),
    fingerprint=part("tracks.toy.data:fingerprint"),
    sample_limits=part("tracks.toy.plan:sample_limits"),
    resources=part("tracks.toy.plan:resources"),
    # Models and training: experiment.py.
    grid=part("tracks.toy.experiment:grid"),
    build_model=part("tracks.toy.experiment:build_model"),
    instrument_batch=part("tracks.toy.experiment:instrument_batch"),
    instrument_options={"jacobian_depths": 4},  # the Jacobian along 4 depths: seconds, not half a minute
    train_one=part("tracks.toy.experiment:train_one"),
    cpu_xla=False,  # measured: tracing dominates these small steps, and XLA adds its compilation
    cpu_graph_optimizer=False,  # Grappler off: faster first steps (measured: docs/maintainers.md)
    # The report: report.py, findings.py.
    subtitle=part("tracks.toy.report:subtitle"),
    report=part("tracks.toy.report:report"),
    seeds_report=part("tracks.toy.report:seeds_report"),
    figures=part("tracks.toy.report:comparison_figures"),
    results=ToyResults,  # results.json, typed: results.py
    findings=part("tracks.toy.findings:toy_findings"),
    diagnose_title="Plain and residual MLPs at initialisation",
)
