"""What a vision run's results.json holds for each model and for the run (tracks/common/results.py)."""

import dataclasses
from typing import Optional

from tracks.common.results import ModelResult, RunResults, omitted_if_none


@dataclasses.dataclass
class VisionModel(ModelResult):
    """One trained ResNet.

    Attributes:
        num_classes: the data's classes.
        epochs_trained: epochs run (fewer when it diverged); `diverged_epoch`
            the 0-based epoch it diverged in, or None.
        train_error: the last epoch's running error on augmented batches;
            `val_error` the held-out split's (None without one); `test_error`
            the whole test set's, once at the end. None when it diverged.
        train_errors: the running training error after each epoch (the
            curve that `train_error` ends); absent in runs before 0.3.0.
        warmup_steps: the steps of learning-rate warm-up this net had
            (experiment.warmup_steps_for); absent in runs before 0.3.0.
        images_per_second: the training throughput.
        lesion, ensemble: the trained net with blocks removed, swapped, and
            its gradient by path length (experiment.lesion_study, ensemble_study).
        landscape: the training loss around the trained weights (the deepest
            net, with --landscape-steps); `landscape_seconds` its cost.
    """

    num_classes: Optional[int] = None
    epochs_trained: Optional[int] = None
    diverged_epoch: Optional[int] = None
    train_error: Optional[float] = None
    val_error: Optional[float] = None
    test_error: Optional[float] = None
    train_errors: Optional[list] = omitted_if_none()
    warmup_steps: Optional[int] = omitted_if_none()
    images_per_second: Optional[float] = None
    lesion: Optional[dict] = omitted_if_none()
    ensemble: Optional[dict] = omitted_if_none()
    landscape: Optional[dict] = omitted_if_none()
    landscape_seconds: Optional[float] = omitted_if_none()


@dataclasses.dataclass
class VisionResults(RunResults):
    """A vision run; `train_images`: the training set's size."""

    train_images: Optional[int] = omitted_if_none()

    MODEL_TYPE = VisionModel
