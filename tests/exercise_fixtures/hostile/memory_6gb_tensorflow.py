"""A hostile file: 6 GiB asked of TensorFlow at import (its ResourceExhaustedError is a memory kill too)."""
import keras
EXERCISE = 6
BIG = keras.ops.ones((6 * 2**30 // 4,))
