"""The two command-line tracks (vision, language) and their shared run machinery.

The tracks train with TensorFlow (tf.data pipelines, tf.distribute
strategies, tfds), so they run Keras on its TensorFlow backend; the library,
`residual_keras`, works on every Keras backend. Importing `tracks` chooses
the TensorFlow backend when Keras has not been imported yet: with another
backend chosen (KERAS_BACKEND or keras.json) it says so in one line and
uses TensorFlow. Once Keras runs on another backend in this process (a
notebook, a test session) the tracks cannot run there, and the import stops
with an `ImportError` saying why.
"""

import json
import os
import sys

# Keep TensorFlow's C++ info and warning messages out of a student's terminal
# (errors still show). The few lines TensorFlow prints while it loads, before
# its logging starts, cannot be silenced this way. Set before TensorFlow loads.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

WHY_TENSORFLOW = ("the tracks train with TensorFlow (tf.data, tf.distribute), while the residual_keras "
                  "layers and models work on any Keras backend")


def _configured_backend():
    """The backend a user chose: KERAS_BACKEND, else keras.json's, else None."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    try:
        with open(os.path.join(home, "keras.json")) as handle:
            return json.load(handle).get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def use_tensorflow_backend():
    """Makes Keras use TensorFlow in this process, or raises `ImportError` when it cannot."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        backend = keras.backend.backend()
        if backend != "tensorflow":
            raise ImportError(
                f"Keras already runs on the {backend} backend in this process, and {WHY_TENSORFLOW}. "
                f"Run the tracks in a new process (they choose TensorFlow themselves)."
            )
        return
    chosen = _configured_backend()
    if chosen and chosen != "tensorflow":
        print(f"note: Keras backend {chosen!r} chosen, but {WHY_TENSORFLOW}: this run uses TensorFlow.",
              file=sys.stderr, flush=True)
    os.environ["KERAS_BACKEND"] = "tensorflow"


use_tensorflow_backend()
