"""What a language run's results.json holds for each model and for the run (tracks/common/results.py)."""

import dataclasses
from typing import Optional

from tracks.common.results import ModelResult, RunResults, omitted_if_none


@dataclasses.dataclass
class LanguageModel(ModelResult):
    """One trained character Transformer.

    Attributes:
        warmup: its learning-rate warm-up, in steps.
        steps_trained: steps run (fewer when it diverged); `diverged_step`
            the step it diverged by, or None.
        train_loss: the last interval's running loss; `val_loss` on the whole
            validation split at the end (nats per character); `train_bpc`,
            `val_bpc` the same in bits. None when it diverged.
        tokens_per_second: the training throughput.
        sample: text it generated from the run's prompt.
        stream, decomposition, logit_lens, lesion, sublayers, deletion: the
            trained net's residual stream and lesions (experiment.trained_instruments).
    """

    warmup: Optional[int] = None
    steps_trained: Optional[int] = None
    diverged_step: Optional[int] = None
    train_loss: Optional[float] = None
    val_loss: Optional[float] = None
    train_bpc: Optional[float] = None
    val_bpc: Optional[float] = None
    tokens_per_second: Optional[float] = None
    sample: Optional[str] = None
    stream: Optional[dict] = omitted_if_none()
    decomposition: Optional[dict] = omitted_if_none()
    logit_lens: Optional[dict] = omitted_if_none()
    lesion: Optional[dict] = omitted_if_none()
    sublayers: Optional[dict] = omitted_if_none()
    deletion: Optional[dict] = omitted_if_none()


@dataclasses.dataclass
class LanguageResults(RunResults):
    """A language run: its vocabulary and the unigram baseline of its validation loss."""

    vocab_size: Optional[int] = omitted_if_none()
    unknown_val_chars: Optional[int] = omitted_if_none()
    unigram_loss: Optional[float] = omitted_if_none()

    MODEL_TYPE = LanguageModel
