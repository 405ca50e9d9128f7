"""Copies a finished run into docs/reference/NAME: the evidence behind the documentation's numbers.

    python scripts/save_reference.py runs/vision-... vision-cifar10-s0 \\
        --command "python -m tracks.vision --data folder:PATH --seed 0" --data "CIFAR-10 (JPEG folder)"

Kept: summary.md (the run's directory written RUN_DIR: the reference lives
elsewhere), results.json, config.json, the metrics and dynamics CSVs,
samples.md and vocab.json (language), and the figures, as palette PNGs
(a quarter of the size, the same picture). Left out: checkpoints, the best
model, TensorBoard logs. reference.json records the command, the data, the
commit of the code that made the run, the machine and the run's wall time;
bands.json is written separately (scripts/make_bands.py).
"""

import argparse
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
KEEP = ("summary.md", "results.json", "config.json", "samples.md", "vocab.json")
FOLDERS = ("metrics", "dynamics")


def small_png(source, target):
    """`source` saved as an 8-bit palette PNG (matplotlib's figures have few colours)."""
    from PIL import Image

    with Image.open(source) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)


# A data source's local path (folder:/..., text:/...): where the run's data were on one machine.
LOCAL_SOURCE = re.compile(r"\b(folder|text):/[^\s\"',;)]+")


def portable(text, home=os.path.expanduser("~")):
    """`text` without the paths of the machine that made the run: a data source's path is PATH (as the
    command's), the home folder ~ (a reference is read on other machines; tests/tracks/test_product_paths.py)."""
    text = LOCAL_SOURCE.sub(lambda match: f"{match.group(1)}:PATH", text)
    return text.replace(home.rstrip("/") + "/", "~/") if home not in ("", "/") else text


def machine():
    cores = os.cpu_count()
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cores} cores ({cpu}), {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=pathlib.Path)
    parser.add_argument("name")
    parser.add_argument("--command", required=True, help="the command that made the run")
    parser.add_argument("--data", required=True, help="what the data were, in words")
    parser.add_argument("--seconds", type=float, required=True, help="the run's wall time")
    parser.add_argument("--commit", required=True, help="the commit of the code that made the run")
    parser.add_argument("--note", default="", help="anything to know before comparing with it")
    args = parser.parse_args(argv)
    if not (args.run / "results.json").is_file():
        parser.error(f"{args.run}: no results.json, not a finished run")
    target = ROOT / "docs" / "reference" / args.name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in KEEP:
        if (args.run / name).is_file():
            shutil.copy2(args.run / name, target / name)
    summary = target / "summary.md"
    if summary.is_file():  # the run's own directory is not where the reference lives
        summary.write_text(summary.read_text().replace(str(args.run.resolve()), "RUN_DIR")
                           .replace(str(args.run), "RUN_DIR"))
    for name in ("summary.md", "results.json", "config.json"):
        if (target / name).is_file():
            (target / name).write_text(portable((target / name).read_text()))
    for folder in FOLDERS:
        if (args.run / folder).is_dir():
            shutil.copytree(args.run / folder, target / folder)
    for figure in sorted(args.run.glob("*.png")):
        small_png(figure, target / figure.name)
    results = json.loads((args.run / "results.json").read_text())
    about = {
        "name": args.name, "command": args.command, "data": args.data, "seconds": round(args.seconds),
        "commit": args.commit, "machine": machine(), "versions": results.get("versions"),
        "note": args.note,
    }
    (target / "reference.json").write_text(json.dumps(about, indent=1) + "\n")
    size = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    print(f"{target.relative_to(ROOT)}: {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
