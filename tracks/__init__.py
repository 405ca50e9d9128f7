"""The two command-line tracks (vision, language) and their shared run machinery."""

import os

# Keep TensorFlow's C++ info and warning messages out of a student's terminal
# (errors still show). The few lines TensorFlow prints while it loads, before
# its logging starts, cannot be silenced this way. Set before TensorFlow loads.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
