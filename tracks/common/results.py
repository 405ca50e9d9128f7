"""What a run's results.json holds, typed: `RunResults` with one `ModelResult` per trained model.

Each trained model's entry is written with `ModelResult.to_json`
(training.run_grid) and a whole results.json read with
`RunResults.from_json`; every reader (a track's report and findings,
`compare`, `--seeds`, the docs scripts) gets these objects, not the dict.
Each track subclasses `ModelResult` with what it measures and `RunResults`
with its own run-level fields (tracks/<track>/results.py), and names the
latter in its `Track` (`Track.results`).

The format is versioned: a new run writes `SCHEMA` as "schema" (run.py,
seeds.py, diagnose); a results.json without one is version 1, the format
of every run before the field existed (docs/reference/ holds such runs,
read unchanged). A field that is absent stays absent when written back, so
a file read and written again is the same JSON. A key that no field
declares is kept in `extra` and written back: a newer run read by an older
package loses nothing.
"""

import dataclasses
from typing import Any, ClassVar, Optional

SCHEMA = 1


class ResultsFormatError(ValueError):
    """A results.json this package cannot read (a newer schema, or no list of models)."""


def omitted_if_none(default=None):
    """A field written only when it has a value (a study a diverged model does not get)."""
    return dataclasses.field(default=default, metadata={"omit_if_none": True})


def _default(field):
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


class _Record:
    """`from_json`/`to_json` of a dataclass: declared fields typed, the rest kept in `extra`."""

    @classmethod
    def _declared(cls):
        return [field for field in dataclasses.fields(cls) if field.name != "extra" and not field.name.startswith("_")]

    @classmethod
    def _values(cls, data):
        required = [field.name for field in cls._declared()
                    if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING]
        missing = [name for name in required if name not in data]
        if missing:
            raise ResultsFormatError(f"a record of results.json ({data.get('id', '?')!r}) has no "
                                     f"{', '.join(missing)}")
        names = {field.name for field in cls._declared()}
        values = {key: value for key, value in data.items() if key in names}
        extra = {key: value for key, value in data.items() if key not in names}
        return values, extra

    def _json(self):
        """The declared fields, then `extra`.

        A record read from a file writes back the keys it had, and any field
        changed since; one made in code omits its `omitted_if_none` fields
        that are None.
        """
        written = {}
        for field in self._declared():
            value = getattr(self, field.name)
            if self._read is not None:
                if field.name not in self._read and value == _default(field):
                    continue
            elif value is None and field.metadata.get("omit_if_none"):
                continue
            written[field.name] = value
        return {**written, **self.extra}

    def _remember(self, data):
        self._read = frozenset(data)
        return self

    @classmethod
    def from_json(cls, data):
        """The record of `data` (a results.json object); ResultsFormatError if a required field is missing."""
        values, extra = cls._values(data)
        return cls(**values, extra=extra)._remember(data)

    def to_json(self):
        """The JSON object of the record (see `_json`)."""
        return self._json()


@dataclasses.dataclass
class ModelResult(_Record):
    """One trained grid point: what every track records.

    Attributes:
        id, variant, depth: the grid point ("residual-20", "residual", 20).
        params: trainable parameters.
        diverged: the loss became NaN or inf; `diverged_at` says where
            ("epoch 3", "step 500"), None when it did not.
        seconds: the model's wall time (training, evaluation, studies);
            `fit_seconds` training alone, `dynamics_seconds` the training
            dynamics' share of it.
        dynamics: the summary of the training dynamics (instruments.dynamics_summary).
        xla: the training step ran compiled by XLA (measured, not asked for).
        extra: keys of the file that no field declares.
    """

    id: str
    variant: str
    depth: int
    params: Optional[int] = None
    diverged: bool = False
    diverged_at: Optional[str] = None
    seconds: Optional[float] = None
    fit_seconds: Optional[float] = omitted_if_none()
    dynamics_seconds: Optional[float] = omitted_if_none()
    dynamics: Optional[dict] = omitted_if_none()
    xla: Optional[bool] = omitted_if_none()
    extra: dict = dataclasses.field(default_factory=dict, repr=False)
    _read: Optional[frozenset] = dataclasses.field(default=None, init=False, repr=False, compare=False)


@dataclasses.dataclass
class SeedSpread(_Record):
    """One model of a `--seeds` run: its final numbers as mean, std and per seed (seeds_report.aggregate_models).

    Attributes:
        id, variant, depth, params: as `ModelResult`.
        seeds: the seeds it trained on; `diverged_seeds` those where it diverged.
        diverged: it diverged on at least one seed.
    The track's own fields are attributes too, read from the file as written
    (seeds_report.aggregate_models): those that do not change with the seed
    (`warmup`), and each final number as its mean under its own name
    (`train_error`), so that a report draws a `--seeds` run with the code
    that draws one run; `std` and `per_seed` give the spread.
    """

    id: str
    variant: str
    depth: int
    params: Optional[int] = None
    seeds: list = dataclasses.field(default_factory=list)
    diverged_seeds: list = dataclasses.field(default_factory=list)
    diverged: bool = False
    extra: dict = dataclasses.field(default_factory=dict, repr=False)
    _read: Optional[frozenset] = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __getattr__(self, name):
        extra = self.__dict__.get("extra") or {}
        if name in extra:
            return extra[name]
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('id')!r} has no {name!r}")

    def std(self, metric):
        return self.extra.get(f"{metric}_std")

    def per_seed(self, metric):
        return self.extra.get(f"{metric}_per_seed") or []


@dataclasses.dataclass
class RunResults(_Record):
    """A run's results.json: the run-level fields, the instruments at initialisation, its models.

    Attributes:
        track: the track's name, or "<name>-diagnose" for a `diagnose` run.
        models: one `ModelResult` (of the track's type) per finished model, in
            training order; a `--seeds` run's top level holds `SeedSpread`s.
        initialisation: {model label: the instruments' numbers at initialisation}.
        dataset, dataset_title, banner: the data (name, as a reader names it,
            the fallback's warning or None).
        preset, device, precision, replicas, strategy, xla, versions,
            thread_spinning, cpu_settings: how the run ran (runtime.Runtime.describe;
            cpu_settings: the CPU's kind and TensorFlow's oneDNN setting, cpu_settings.cpu_settings_in_effect).
        seeds, seed_runs: a `--seeds` run's seeds and their directories.
        best_model: {"id", "val_loss"} of the model saved as best_model.keras.
        schema: the format's version (SCHEMA).
        extra: keys of the file that no field declares.

    A track's subclass adds its own run-level fields (`Track.run_fields`)
    and sets `MODEL_TYPE`, the class of its models.
    """

    track: Optional[str] = None
    models: list = dataclasses.field(default_factory=list)
    initialisation: dict = omitted_if_none()
    dataset: Optional[str] = omitted_if_none()
    dataset_title: Optional[str] = omitted_if_none()
    banner: Optional[str] = None
    preset: Optional[str] = omitted_if_none()
    device: Optional[str] = omitted_if_none()
    precision: Optional[str] = omitted_if_none()
    replicas: Optional[int] = omitted_if_none()
    strategy: Optional[str] = omitted_if_none()
    xla: Optional[bool] = omitted_if_none()
    versions: Optional[dict] = omitted_if_none()
    thread_spinning: Any = omitted_if_none()
    cpu_settings: Optional[dict] = omitted_if_none()
    seeds: Optional[list] = omitted_if_none()
    seed_runs: Optional[dict] = omitted_if_none()
    best_model: Optional[dict] = omitted_if_none()
    schema: Optional[int] = omitted_if_none()
    extra: dict = dataclasses.field(default_factory=dict, repr=False)
    _read: Optional[frozenset] = dataclasses.field(default=None, init=False, repr=False, compare=False)

    MODEL_TYPE: ClassVar[type] = ModelResult

    @classmethod
    def from_json(cls, data):
        """The results of `data` (a results.json's dict), its models read as `MODEL_TYPE`.

        Raises:
            ResultsFormatError: a schema newer than this package's, or models that are not records with ids.
        """
        if not isinstance(data, dict):
            raise ResultsFormatError("results.json is not a JSON object")
        schema = data.get("schema", 1)
        if not isinstance(schema, int) or schema > SCHEMA:
            raise ResultsFormatError(f"results.json has schema {schema!r}; this residual_keras reads "
                                     f"schema {SCHEMA} and older: update residual_keras to read it")
        models = data.get("models")
        if not isinstance(models, list) or not all(isinstance(m, dict) and "id" in m for m in models):
            raise ResultsFormatError("results.json has no list of models with ids")
        values, extra = cls._values(data)
        entry_type = SeedSpread if "seed_runs" in data else cls.MODEL_TYPE
        values["models"] = [entry_type.from_json(model) for model in models]
        return cls(**values, extra=extra)._remember(data)

    def to_json(self):
        written = self._json()
        written["models"] = [model.to_json() for model in self.models]
        return written

    @property
    def variants(self):
        """The variants the run trained, in its grid's order (the order of their first models)."""
        return tuple(dict.fromkeys(model.variant for model in self.models))

    def model(self, model_id):
        """The model with this id, or None."""
        return next((model for model in self.models if model.id == model_id), None)


__all__ = ["ModelResult", "ResultsFormatError", "RunResults", "SCHEMA", "SeedSpread", "omitted_if_none"]
