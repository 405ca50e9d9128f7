"""The package version, in a module of its own: the Docker image installs the dependencies from
pyproject.toml and this file alone, before the code, so a code change does not reinstall TensorFlow."""

__version__ = "0.2.0"
