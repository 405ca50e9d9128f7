"""The command-line tracks (vision, language, toy) and their shared run machinery.

The tracks train with TensorFlow (tf.data pipelines, tf.distribute
strategies, tfds), so they run Keras on its TensorFlow backend; the library,
`residual_keras`, works on every Keras backend. Importing `tracks`, or a
track, has no effect on the process: no environment variable, no
TensorFlow, no Keras. A command checks its arguments and its environment
first, then `tracks.common.environment.configure_process` chooses the TensorFlow
backend (saying so in one line when another one was chosen) and sets up
TensorFlow, once.
"""
