"""What a toy run's results.json holds for each model (tracks/common/results.py)."""

import dataclasses
from typing import Optional

from tracks.common.results import ModelResult, RunResults, omitted_if_none


@dataclasses.dataclass
class ToyModel(ModelResult):
    """One trained MLP.

    Attributes:
        train_loss, train_accuracy: on all training points at the end;
            `test_accuracy` on the test points. None when it diverged.
        boundary: P(class 1) on a grid of the plane (experiment.boundary).
        lesion, deletion, decomposition, landscape, paths: the deepest
            trained nets taken apart (experiment.trained_studies);
            `studies_seconds` their cost.
    """

    train_loss: Optional[float] = None
    train_accuracy: Optional[float] = None
    test_accuracy: Optional[float] = None
    boundary: Optional[list] = omitted_if_none()
    lesion: Optional[dict] = omitted_if_none()
    deletion: Optional[dict] = omitted_if_none()
    decomposition: Optional[dict] = omitted_if_none()
    landscape: Optional[dict] = omitted_if_none()
    paths: Optional[dict] = omitted_if_none()
    studies_seconds: Optional[float] = omitted_if_none()


@dataclasses.dataclass
class ToyResults(RunResults):
    """A toy run."""

    MODEL_TYPE = ToyModel
