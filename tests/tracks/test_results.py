"""results.json, typed (tracks/common/results.py): every committed run reads and writes back unchanged.

A run's results.json is read as its track's `RunResults` (tracks/registry.py
names the track, the track names its results type). The format is
versioned: a file without `schema` is version 1, a newer one is refused
in a sentence, and a record without its id, variant or depth is refused
instead of read half.
"""

import json
import pathlib
import re

import pytest

from tracks.common.results import SCHEMA, ModelResult, ResultsFormatError, RunResults, SeedSpread
from tracks.registry import TRACKS, track
from tracks.vision.results import VisionModel, VisionResults

pytestmark = pytest.mark.no_keras_reset  # nothing here builds a model

ROOT = pathlib.Path(__file__).resolve().parents[2]
REFERENCE_RESULTS = sorted((ROOT / "docs" / "reference").rglob("results.json"))


def test_there_are_reference_runs_of_every_track():
    recorded = {json.loads(path.read_text())["track"].removesuffix("-diagnose") for path in REFERENCE_RESULTS}
    assert recorded == set(TRACKS)


@pytest.mark.parametrize("path", REFERENCE_RESULTS, ids=lambda path: path.parent.name)
def test_every_reference_run_reads_typed_and_writes_back_the_same_json(path):
    data = json.loads(path.read_text())
    results = track(data["track"]).results.from_json(data)
    assert results.to_json() == data
    # Typed: every key of the file is a declared field, none left in `extra`.
    assert not results.extra, sorted(results.extra)
    for model in results.models:
        assert isinstance(model, results.MODEL_TYPE) and not model.extra, (model.id, sorted(model.extra))


def test_a_model_reads_its_fields_as_attributes_and_absent_studies_stay_absent():
    entry = {"id": "plain-8", "variant": "plain", "depth": 8, "params": 78042, "diverged": True,
             "diverged_at": "epoch 2", "diverged_epoch": 1, "train_error": None, "seconds": 3.5}
    model = VisionModel.from_json(entry)
    assert (model.id, model.variant, model.depth, model.diverged_at, model.train_error) == (
        "plain-8", "plain", 8, "epoch 2", None)
    assert model.lesion is None and "lesion" not in model.to_json()  # a diverged net has no lesion study
    assert model.to_json() == entry


def test_keys_no_field_declares_are_kept_and_written_back():
    data = {"track": "vision", "models": [{"id": "a-1", "variant": "a", "depth": 1, "newer_study": [1, 2]}],
            "newer_field": {"x": 1}}
    results = VisionResults.from_json(data)
    assert results.extra == {"newer_field": {"x": 1}} and results.models[0].extra == {"newer_study": [1, 2]}
    assert results.to_json() == data


@pytest.mark.parametrize("data, said", [
    ({"schema": SCHEMA + 1, "models": []}, f"schema {SCHEMA + 1}"),
    ({"schema": "1", "models": []}, "schema '1'"),
    ({"track": "vision"}, "no list of models"),
    ({"models": [{"variant": "plain", "depth": 8}]}, "no list of models with ids"),
    ({"models": [{"id": "plain-8"}]}, "('plain-8') has no variant, depth"),
    ([1, 2], "not a JSON object"),
])
def test_what_this_package_cannot_read_is_refused_in_a_sentence(data, said):
    with pytest.raises(ResultsFormatError, match=re.escape(said)):
        RunResults.from_json(data)


def test_a_seeds_run_reads_its_spread_as_attributes():
    data = {"track": "vision", "seeds": [0, 1], "seed_runs": {"0": "seed-0", "1": "seed-1"}, "models": [
        {"id": "plain-8", "variant": "plain", "depth": 8, "params": 10, "seeds": [0, 1], "diverged_seeds": [],
         "diverged": False, "train_error": 0.3, "train_error_std": 0.02, "train_error_per_seed": [0.29, 0.31]}]}
    results = VisionResults.from_json(data)
    (spread,) = results.models
    assert isinstance(spread, SeedSpread) and spread.train_error == 0.3
    assert spread.std("train_error") == 0.02 and spread.per_seed("train_error") == [0.29, 0.31]
    with pytest.raises(AttributeError, match="has no 'test_error'"):
        spread.test_error
    assert results.to_json() == data


def test_variants_and_model_lookup_follow_the_run_order():
    results = RunResults(models=[ModelResult("plain-8", "plain", 8), ModelResult("residual-8", "residual", 8),
                                 ModelResult("plain-20", "plain", 20)])
    assert results.variants == ("plain", "residual")
    assert results.model("plain-20").depth == 20 and results.model("fixup-20") is None
