"""The tracks' tests run on TensorFlow only: the tracks train with TensorFlow (tf.data,
tf.distribute, tfds), and so do the notebooks, the README, the exercises' grader and the
Docker image, which run them. On JAX or PyTorch (`KERAS_BACKEND=jax pytest`, .ci/run) this
folder is not collected, whatever test a later session adds to it.
"""

import keras

collect_ignore_glob = [] if keras.backend.backend() == "tensorflow" else ["*.py"]
