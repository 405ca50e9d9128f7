# residual_keras in a container: both tracks, on an NVIDIA GPU or on a CPU.
#
#   docker build -t residual-keras .                                       # GPU image (CUDA wheels)
#   docker build --build-arg DEVICE=cpu -t residual-keras:cpu .            # CPU image, for laptops
#   docker build --build-arg PREFETCH_DATA=1 -t residual-keras .           # CIFAR-10 + Tiny Shakespeare inside
#   docker run --rm --gpus all -v "$PWD/runs:/home/student/runs" residual-keras \
#       python -m tracks.vision --preset fast
#
# .ci/docker_check builds both images from this file and runs them as
# docs/gpu_and_docker.md says (help, both smoke presets on mounted data, a resume after
# `docker kill`, `compare` against a reference run, the notebooks opened);
# docs/gpu_and_docker.md lists the measured sizes.
#
# Three stages: `runtime` (the base, the user and the dependencies), `course` (the
# students' edition made from the repository by `python -m tracks release`: the
# notebooks without their solutions, the students' pages, the reference runs' numbers)
# and the image itself, which copies the package's sources and the edition's output
# only. The instructor's notebooks, which hold the solutions, are read in `course` and
# reach no layer of the image.
#
# Base image: plain Python, pinned by its full tag (CPython 3.11.14, Debian 12
# "bookworm"). BASE_IMAGE replaces it where no registry is reachable (CI
# builds on a Debian bookworm stand-in made with debootstrap: see
# .ci/docker_check). The GPU stack comes from pip, not from the base image:
# tensorflow[and-cuda] (our `gpu` extra) installs CUDA, cuDNN and NCCL as
# wheels whose versions TensorFlow itself pins, so the host needs only the
# NVIDIA driver and the NVIDIA Container Toolkit (`docker run --gpus all`).
# Recent tensorflow/tensorflow:*-gpu images have shipped a CUDA/cuDNN that
# their TensorFlow cannot use (tensorflow/tensorflow#94593: no GPU visible),
# and CUDA base images would duplicate the libraries the wheels bring.
# A digest (@sha256:...) would pin the base byte for byte; add one with
# `docker buildx imagetools inspect python:3.11.14-slim-bookworm` when you
# build (it was written without access to a registry).
ARG BASE_IMAGE=python:3.11.14-slim-bookworm
FROM ${BASE_IMAGE} AS runtime

# PIP_NO_CACHE_DIR keeps pip's download cache out of the layers (the flag is
# also spelled out on every pip command). pip runs as root on purpose: the
# image's own Python has no system packages to break. TFDS_DATA_DIR is where
# both tracks look for CIFAR-10 and Tiny Shakespeare (and where PREFETCH_DATA
# puts them). HOME and MPLCONFIGDIR: writable for any --user (Docker sets
# HOME to / for a uid the image does not know; Keras and the image-folder
# cache write under HOME).
ENV HOME=/home/student \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    KERAS_BACKEND=tensorflow \
    TFDS_DATA_DIR=/opt/tensorflow_datasets \
    MPLCONFIGDIR=/tmp/matplotlib

# No apt packages are needed: the TensorFlow, CUDA and matplotlib wheels
# bundle their native libraries. uid 1000 matches the first user of most
# Linux hosts; any other uid runs with `--user "$(id -u):$(id -g)"`, so the
# home directory (the working directory, where runs/ goes) is writable by
# every user, like /tmp.
RUN groupadd --gid 1000 student \
    && useradd --create-home --uid 1000 --gid 1000 --shell /bin/bash student \
    && chmod 1777 /home/student \
    && mkdir -p "$TFDS_DATA_DIR" \
    && chown student:student "$TFDS_DATA_DIR"

WORKDIR /opt/residual_keras

# Layer caching. TensorFlow (with its CUDA wheels on the GPU image) is several
# GB; the package's own code is a few hundred kB and changes often. So the
# dependencies are installed from pyproject.toml and the version file alone
# (pyproject reads the version from residual_keras/_version.py): setuptools
# finds no package there (no __init__.py) and builds an empty
# `residual-keras` whose only effect is to pull in every dependency. The
# README pyproject.toml names (PYPI_README.md) is a placeholder here because
# setuptools reads it for the metadata:
# copying the real one would reinstall TensorFlow after every README edit.
# An edit of pyproject.toml or of the version re-runs this layer.
# TensorFlow's C++ headers (tensorflow/include, 430 MB) are removed: they
# serve only to compile custom TensorFlow ops, which nothing here does.
# DEVICE selects the TensorFlow build: gpu, tensorflow[and-cuda] (the `gpu`
# extra, about 7 GB); cpu, plain tensorflow, no CUDA wheels (for laptops).
# Both take the `notebooks` extra (Jupyter), to open the edition's notebooks.
# (DL3013 asks for pinned versions: it takes ".[gpu]", this directory with
# the gpu extra, for a package name. The versions are set in pyproject.toml.)
COPY pyproject.toml ./
COPY residual_keras/_version.py residual_keras/_version.py
ARG DEVICE=gpu
# hadolint ignore=DL3013
RUN case "$DEVICE" in \
        gpu) target=".[gpu,notebooks]" ;; \
        cpu) target=".[notebooks]" ;; \
        *) echo "DEVICE must be gpu or cpu, got '$DEVICE'" >&2; exit 1 ;; \
    esac \
    && touch PYPI_README.md \
    && pip install --no-cache-dir "$target" \
    && pip uninstall --yes residual-keras \
    && rm -rf PYPI_README.md build ./*.egg-info \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && rm -rf "$site/tensorflow/include"

# The students' edition (tracks/exercises/release.py), made from the build
# context: .dockerignore lets in what pip installs and what the edition is
# made from (the notebooks, the students' pages, the reference runs' numbers),
# never solutions/ or the lab sheets. Only /opt/course leaves this stage.
FROM runtime AS course
COPY . /opt/source
WORKDIR /opt/source
RUN python -m tracks release --out /opt/course --without-wheel

FROM runtime
# The real package: fast, --no-deps since they are in. Installed (not
# editable), so `python -m tracks.vision` works from any directory; the
# source stays here to read. Its files named one by one: the notebooks in
# the build context are the instructor's, with their solutions.
COPY pyproject.toml PYPI_README.md LICENSE ./
COPY residual_keras residual_keras
COPY tracks tracks
# hadolint ignore=DL3013
RUN pip install --no-cache-dir --no-deps . \
    && rm -rf build ./*.egg-info
# The students' edition: `compare RUN /opt/course/docs/reference/...`, and the
# notebooks (`jupyter notebook` on a copy: docs/gpu_and_docker.md).
COPY --from=course /opt/course /opt/course

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
