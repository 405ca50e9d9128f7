"""What is wrong with a `--model` file, in one line: missing, not a zip, not a Keras archive, unknown classes.

A `.keras` file is a zip archive holding `metadata.json`, `config.json` (the
model's classes and their arguments) and `model.weights.h5`, as
`model.save("name.keras")` writes it. `check_model_file` reads it with the
standard library before TensorFlow loads; `explain_load_failure` says, after
Keras failed to load it, which classes of its config.json Keras does not
know: a layer Keras does not have (saved by another version), or custom
objects whose module was not imported (`--import MODULE`).
"""

import importlib
import json
import pathlib
import zipfile

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ARCHIVE_FILES = ("metadata.json", "config.json", "model.weights.h5")


def _read_config(path):
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


def check_model_file(path):
    """`ValueError` (one line, naming `path`) unless `path` looks like a Keras archive."""
    path = pathlib.Path(path)
    if not path.exists():
        raise ValueError(f"--model {path}: no such file")
    if not path.is_file():
        raise ValueError(f"--model {path}: a directory, not a .keras file (write one with model.save('name.keras'))")
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head == HDF5_SIGNATURE:
        raise ValueError(f"--model {path}: an HDF5 file (Keras 2's .h5 format), not a Keras 3 archive: load it "
                         f"in Keras and save it again with model.save('name.keras')")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"--model {path}: not a zip file, so not a Keras archive (a .keras file is the zip that "
                         f"model.save('name.keras') writes); it starts with {head!r}")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as error:
        raise ValueError(f"--model {path}: a damaged zip file ({error})") from None
    missing = [name for name in ARCHIVE_FILES if name not in names]
    if missing:
        raise ValueError(f"--model {path}: a zip file but not a Keras archive: no {', '.join(missing)} in it "
                         f"(it holds {', '.join(names[:5]) or 'nothing'}{', ...' if len(names) > 5 else ''})")
    try:
        config = _read_config(path)
    except (ValueError, zipfile.BadZipFile, OSError) as error:
        raise ValueError(f"--model {path}: its config.json cannot be read ({error}): a damaged archive") from None
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"--model {path}: its config.json describes no model (no class_name)")


def saved_classes(config):
    """[(class_name, module, registered_name)] of every object in a saved config, each once, in order."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("class_name"), str) and "module" in node:
                entry = (node["class_name"], node.get("module"), node.get("registered_name"))
                if entry not in found:
                    found.append(entry)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return found


def _keras_has(module, class_name):
    try:
        return hasattr(importlib.import_module(module), class_name)
    except ImportError:
        return False


def unknown_classes(config):
    """(Keras classes this Keras lacks, custom objects not registered): lists of names, from a saved config."""
    import keras

    unknown, unregistered = [], []
    for class_name, module, registered_name in saved_classes(config):
        if class_name == "__keras_tensor__" or module is None:
            continue
        if module == "keras" or module.startswith("keras."):
            if not _keras_has(module, class_name):
                unknown.append(f"{class_name} ({module})")
        elif keras.saving.get_registered_object(registered_name or class_name) is None:
            unregistered.append(f"{registered_name or class_name} (module {module})")
    return unknown, unregistered


def explain_load_failure(path, error):
    """One line saying why Keras could not load the archive `path` (`error`: what Keras raised)."""
    import keras

    try:
        unknown, unregistered = unknown_classes(_read_config(path))
    except (ValueError, zipfile.BadZipFile, OSError, KeyError):
        unknown, unregistered = [], []
    if unknown:
        return (f"--model {path}: unknown layer {', '.join(unknown)}: this Keras ({keras.__version__}) has no such "
                f"class; the file was saved by another Keras version (its metadata.json says which)")
    if unregistered:
        return (f"--model {path}: missing custom objects {', '.join(unregistered)}: pass --import MODULE for "
                f"the module that defines them with @keras.saving.register_keras_serializable()")
    said = (str(error).strip().splitlines() or [""])[0][:300]
    return f"--model {path}: Keras could not load it ({type(error).__name__}: {said})"


__all__ = ["check_model_file", "explain_load_failure", "saved_classes", "unknown_classes"]
