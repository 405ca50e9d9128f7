"""The estimate of a run against the machine, read without TensorFlow, and `--force`."""

import pytest

from tracks.common.config import ConfigError
from tracks.common.limits import (DAY_SECONDS, Estimate, accelerator_present, machine_memory_bytes,
                                  refuse_beyond_machine)
from tracks.common.options import train_parser
from tracks.common.resume import check_run
from tracks.toy.track import TRACK as TOY
from tracks.vision.track import TRACK as VISION

pytestmark = pytest.mark.no_keras_reset
GIB = 2**30
CPU = (False, "no GPU")


def test_the_memory_is_read_from_meminfo(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal:       16384 kB\nMemFree:        1024 kB\n")
    assert machine_memory_bytes(tmp_path / "meminfo") == 16384 * 1024
    assert machine_memory_bytes(tmp_path / "none") > 0  # os.sysconf where there is no /proc


def test_a_gpu_is_found_by_its_device_file_unless_cuda_visible_devices_hides_it(monkeypatch):
    monkeypatch.setattr("glob.glob", lambda pattern: ["/dev/nvidia0"] if pattern == "/dev/nvidia[0-9]*" else [])
    assert accelerator_present({}) == (True, "/dev/nvidia0 is present")
    assert accelerator_present({"CUDA_VISIBLE_DEVICES": "0"})[0] is True
    assert accelerator_present({"CUDA_VISIBLE_DEVICES": ""}) == (False, "CUDA_VISIBLE_DEVICES='' hides the GPUs")
    assert accelerator_present({"CUDA_VISIBLE_DEVICES": "-1"})[0] is False
    monkeypatch.setattr("glob.glob", lambda pattern: [])
    assert accelerator_present({}) == (False, "no /dev/nvidia*, /dev/dxg or /dev/kfd")


def test_a_run_beyond_the_machine_is_refused_with_its_estimate_unless_forced():
    big = Estimate(data_bytes=3 * GIB, model_bytes=2 * GIB, cpu_seconds=60)
    with pytest.raises(ConfigError, match=r"needs about 5 GiB of memory \(3 GiB of data and 2 GiB of weights"):
        refuse_beyond_machine(big, force=False, memory=4 * GIB, accelerator=CPU)
    refuse_beyond_machine(big, force=True, memory=4 * GIB, accelerator=CPU)
    # With a GPU the model's memory is the GPU's: only the data are set against the host's.
    refuse_beyond_machine(big, force=False, memory=4 * GIB, accelerator=(True, "/dev/nvidia0 is present"))
    slow = Estimate(data_bytes=0, model_bytes=0, cpu_seconds=3 * DAY_SECONDS)
    with pytest.raises(ConfigError, match=r"about 3 days on this CPU \(no GPU found: no GPU\), more than a day"):
        refuse_beyond_machine(slow, force=False, memory=4 * GIB, accelerator=CPU)
    refuse_beyond_machine(slow, force=False, memory=4 * GIB, accelerator=(True, "a GPU"))
    refuse_beyond_machine(Estimate(0, 0, DAY_SECONDS), force=False, memory=4 * GIB, accelerator=CPU)  # a day is fine


def test_the_estimates_grow_with_what_costs(monkeypatch):
    quick = VISION.resources(VISION.presets["quick"])
    assert quick.cpu_seconds < 3600 and quick.data_bytes + quick.model_bytes < GIB  # the CPU preset fits
    assert VISION.resources(VISION.presets["paper"]).cpu_seconds > DAY_SECONDS  # a GPU preset
    deeper = VISION.resources(VISION.presets["quick"].__class__(depths=(110,)))
    assert deeper.model_bytes > VISION.resources(VISION.presets["quick"].__class__(depths=(20,))).model_bytes
    toy = TOY.presets["quick"]
    assert TOY.resources(toy).cpu_seconds * 2 == pytest.approx(
        TOY.resources(toy.__class__(epochs=2 * toy.epochs)).cpu_seconds)


def test_check_run_applies_force(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    parser = train_parser(TOY.prog, TOY.usage, TOY.config_cls, TOY.presets, TOY.default_preset)
    with pytest.raises(ConfigError, match="more than a day"):
        check_run(TOY, parser.parse_args(["--epochs", "100000000"]))
    checked = check_run(TOY, parser.parse_args(["--epochs", "100000000", "--force"]))
    assert checked.config.epochs == 100000000 and checked.run is None and checked.recorded is None


def test_every_track_estimates_every_preset_from_its_config_alone():
    from tracks.language.track import TRACK as LANGUAGE

    for track in (VISION, LANGUAGE, TOY):
        for name, config in track.presets.items():
            estimate = track.resources(config)
            assert isinstance(estimate, Estimate), (track.name, name)
            assert estimate.data_bytes >= 0 and estimate.model_bytes > 0 and estimate.cpu_seconds > 0
            seeds = track.resources(config.__class__(**{**config.__dict__, "seeds": (0, 1, 2), "seed": 0}))
            assert seeds.cpu_seconds == pytest.approx(3 * estimate.cpu_seconds)  # one run per seed


def test_the_head_width_minimum_is_the_librarys():
    from residual_keras.attention import MIN_HEAD_DIM
    from tracks.common.option_ranges import min_head_dim

    assert min_head_dim() == MIN_HEAD_DIM  # read from attention.py without importing Keras


def test_the_estimates_the_maintainers_guide_quotes_are_the_codes():
    """docs/maintainers.md quotes the vision estimate for two presets; the code's must match them."""
    import pathlib
    import re

    from tracks.vision.presets import PRESETS

    guide = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "maintainers.md").read_text()
    found = re.findall(r"for the `(\w+)` (?:preset it gives|grid) ([0-9.]+) min", guide)
    assert {name for name, _ in found} == {"quick", "class"}, found
    for name, minutes in found:
        assert f"{VISION.resources(PRESETS[name]).cpu_seconds / 60:.1f}" == minutes, name
