# residual_keras in a container: both tracks, ready for NVIDIA GPUs.
#
#   docker build -t residual-keras .
#   docker build --build-arg PREFETCH_DATA=1 -t residual-keras:data .  # CIFAR-10 + Tiny Shakespeare inside
#   docker run --rm --gpus all -v "$PWD/runs:/home/student/runs" residual-keras \
#       python -m tracks.vision --preset fast
#
# Base image: plain Python, pinned by its full tag (CPython 3.11.14, Debian 12
# "bookworm"). The GPU stack comes from pip, not from the base image:
# tensorflow[and-cuda] (our `gpu` extra) installs CUDA, cuDNN and NCCL as
# wheels whose versions TensorFlow itself pins, so the host needs only the
# NVIDIA driver and the NVIDIA Container Toolkit (`docker run --gpus all`).
# Recent tensorflow/tensorflow:*-gpu images have shipped a CUDA/cuDNN that
# their TensorFlow cannot use (tensorflow/tensorflow#94593: no GPU visible),
# and CUDA base images would duplicate the libraries the wheels bring.
# A digest (@sha256:...) would pin the base byte for byte; add one with
# `docker buildx imagetools inspect python:3.11.14-slim-bookworm` when you
# build (it was written without access to a registry).
FROM python:3.11.14-slim-bookworm

# PIP_NO_CACHE_DIR keeps pip's download cache out of the layers (the flag is
# also spelled out on every pip command). pip runs as root on purpose: the
# image's own Python has no system packages to break. TFDS_DATA_DIR is where
# both tracks look for CIFAR-10 and Tiny Shakespeare (and where PREFETCH_DATA
# puts them). MPLCONFIGDIR: a writable matplotlib cache for any --user.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    KERAS_BACKEND=tensorflow \
    TFDS_DATA_DIR=/opt/tensorflow_datasets \
    MPLCONFIGDIR=/tmp/matplotlib

# No apt packages are needed: the TensorFlow, CUDA and matplotlib wheels
# bundle their native libraries. uid 1000 matches the first user of most
# Linux hosts, so a bind-mounted runs/ directory stays writable.
RUN groupadd --gid 1000 student \
    && useradd --create-home --uid 1000 --gid 1000 --shell /bin/bash student \
    && mkdir -p "$TFDS_DATA_DIR" \
    && chown student:student "$TFDS_DATA_DIR"

WORKDIR /opt/residual_keras

# Layer caching. TensorFlow with its CUDA wheels is several GB; the package's
# own code is a few hundred kB and changes often. So the dependencies are
# installed from pyproject.toml alone: setuptools then finds none of the
# packages (residual_keras*, tracks*) and builds an empty `residual-keras`
# whose only effect is to pull in every dependency of the `gpu` extra. The
# README is a placeholder here because setuptools reads it for the metadata:
# copying the real one would re-download TensorFlow after every README edit.
# The trade-off: an edit of pyproject.toml (a dependency, the version, a
# setting) re-runs this layer.
# (DL3013 asks for pinned versions: it takes ".[gpu]", this directory with
# the gpu extra, for a package name. The versions are set in pyproject.toml.)
COPY pyproject.toml ./
# hadolint ignore=DL3013
RUN touch README.md \
    && pip install --no-cache-dir ".[gpu]"

# The real package, over the empty one: fast, --no-deps since they are in.
# Installed (not editable), so `python -m tracks.vision` works from any
# directory; the source stays here to read.
COPY . .
# hadolint ignore=DL3013
RUN pip install --no-cache-dir --no-deps --force-reinstall ".[gpu]"

# From here on: the unprivileged user created above (uid 1000, "student";
# numeric so that the host and Kubernetes can tell it is not root). Runs go
# to runs/ under the working directory: mount a volume there.
USER 1000:1000
WORKDIR /home/student

# PREFETCH_DATA=1 downloads and prepares CIFAR-10 and Tiny Shakespeare into
# TFDS_DATA_DIR at build time (needs the network then, never at run time);
# the raw downloads are deleted, the prepared records kept. Run as `student`
# so that a run can still add to the directory. Declared here, not at the
# top, so that changing it does not invalidate the layers above.
ARG PREFETCH_DATA=0
RUN if [ "$PREFETCH_DATA" = "1" ]; then \
        python -m tracks.vision prefetch \
        && python -m tracks.language prefetch \
        && rm -rf "$TFDS_DATA_DIR/downloads"; \
    elif [ "$PREFETCH_DATA" != "0" ]; then \
        echo "PREFETCH_DATA must be 0 or 1, got '$PREFETCH_DATA'" >&2; \
        exit 1; \
    fi

# No ENTRYPOINT: whatever follows the image name is the command, so
#   docker run --gpus all IMAGE python -m tracks.vision --preset fast
#   docker run --gpus all IMAGE python -m tracks.language diagnose
#   docker run -it IMAGE bash
# all work as written. The default only prints the vision track's options:
# an image started by mistake must not begin an hour of training.
# No HEALTHCHECK: this is a batch job that exits when done, not a service.
CMD ["python", "-m", "tracks.vision", "--help"]
