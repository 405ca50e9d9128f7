"""The instruments' sample sizes against small data: a preset's is lowered, a user's refused.

A preset's 100 lesion images must not stop a smoke run on a folder of 80 test
images (the Docker check's data), while `--lesion-images 100` typed by the
user on that folder is refused in one line before anything is written.
"""

import types

import pytest

from tracks.common.resume import fit_samples
from tracks.common.track import RunContext
from tracks.language.track import TRACK as LANGUAGE
from tracks.toy.track import TRACK as TOY
from tracks.vision.track import TRACK as VISION

pytestmark = pytest.mark.no_keras_reset

SMALL = {
    "vision": (VISION, types.SimpleNamespace(name="folder:/data", y_train=[0] * 40, y_test=[0] * 8)),
    "language": (LANGUAGE, types.SimpleNamespace(name="text:/t.txt", val_tokens=[0] * 70, train_tokens=[0] * 900)),
    "toy": (TOY, types.SimpleNamespace(name="spirals", y_train=[0] * 10, y_test=[0] * 10)),
}


def _oversized(track, data):
    config = track.presets["smoke"]
    limits = track.parts.sample_limits(RunContext(config, data=data))
    return config, [(field, available) for field, available, _ in limits if getattr(config, field) > available]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_preset_sizes_are_lowered_to_the_data(name, capsys):
    track, data = SMALL[name]
    config, oversized = _oversized(track, data)
    assert oversized, "the small data must be smaller than a smoke sample for this test to mean anything"
    fitted = fit_samples(track, config, data, given={})
    printed = "".join(capsys.readouterr())
    for field, available in oversized:
        assert getattr(fitted, field) == available
        assert (f"--{field.replace('_', '-')}: the preset's {getattr(config, field)} is more than the "
                f"{available} ") in printed
    # Nothing else changed.
    assert {k: v for k, v in vars(fitted).items() if k not in dict(oversized)} == \
           {k: v for k, v in vars(config).items() if k not in dict(oversized)}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_sizes_the_user_gave_are_refused(name):
    track, data = SMALL[name]
    config, oversized = _oversized(track, data)
    field, available = oversized[0]
    with pytest.raises(ValueError, match=f"--{field.replace('_', '-')} {getattr(config, field)} is more than the "
                                         f"{available} .*; lower it"):
        fit_samples(track, config, data, given={field: getattr(config, field)})


def test_sizes_that_fit_are_kept(capsys):
    track, data = SMALL["vision"]
    config = track.presets["smoke"]
    big = types.SimpleNamespace(name="cifar10", y_train=[0] * 50_000, y_test=[0] * 10_000)
    assert fit_samples(track, config, big, given={}) is config
    assert capsys.readouterr().out == ""
