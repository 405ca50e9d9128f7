"""scripts/trace_nonorm.py: the per-step trace of one nonorm model (issue 41's failure analysis)."""

import csv
import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "trace_nonorm.py"


@pytest.mark.slow  # one epoch of a depth-8 net on the synthetic set (about 20 s on 2 cores)
def test_the_trace_starts_fixup_at_the_identity_and_records_every_block_and_scalar(tmp_path):
    spec = importlib.util.spec_from_file_location("trace_nonorm", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--variant", "fixup", "--depth", "8", "--trace-epochs", "1", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(tmp_path / "trace.csv")))
    assert len(rows) == 5000 // 64  # one epoch of the preset's batches
    blocks = [key for key in rows[0] if key.startswith("ratio/")]
    assert len(blocks) == 3  # depth 8: one block per stage
    # Step 0 is recorded before the first update: every branch is exactly 0, every image alive.
    assert all(float(rows[0][key]) == 0.0 for key in blocks)
    assert float(rows[0]["dead_images"]) == 0.0
    # The stem's and head's biases and five scalars per block, s starting at 1.
    scalars = [key for key in rows[0] if key.startswith("scalar/")]
    assert len(scalars) == 2 + 5 * 3
    assert float(rows[0]["scalar/stage1_block1/scale"]) == pytest.approx(1.0)
    # The branches leave 0 once the classifier has moved.
    assert max(float(rows[-1][key]) for key in blocks) > 0
    assert (tmp_path / "trace.png").stat().st_size > 0
