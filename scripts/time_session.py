"""Times the commands of the two-hour session (docs/session_plan.md) as a room runs them.

    python scripts/time_session.py                      # all, into docs/measurements/session.json
    python scripts/time_session.py --only toy,checks    # some of them (the others kept from the file)

Each command runs in a scratch folder, on the data every laptop of an offline
room has (`--data synthetic`, `--data pydoc`), first one at a time, then the
two long runs side by side, as the plan starts them (vision and language in
two terminals on one 2-core laptop). The exercises' checks are timed on the
solutions: what `python -m tracks check FILE` costs a student once the file
is written (the writing is a person's time, which no script measures).

The record keeps the wall time of each command, the machine (CPU model,
cores), the load before and after, and the commit; scripts/doc_numbers.py
reads the plan's numbers from it (`<!-- ref measurements/session KEY ... -->`).
Run it on a quiet machine: it refuses to start when the 1-minute load is
above --max-load.
"""

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "measurements" / "session.json"
PYTHON = sys.executable

# name: the command (run in a scratch folder; OUT is replaced by a folder in it)
ALONE = {
    "toy": [PYTHON, "-m", "tracks.toy", "--out", "OUT"],
    "vision_diagnose": [PYTHON, "-m", "tracks.vision", "diagnose", "--data", "synthetic", "--out", "OUT"],
    "language_collapse": [PYTHON, "-m", "tracks.language", "diagnose", "--variants", "pre,plain", "--depths",
                          "6,12,24", "--embed-dim", "16", "--num-heads", "2", "--init", "gpt2", "--data", "pydoc",
                          "--out", "OUT"],
    "vision": [PYTHON, "-m", "tracks.vision", "--data", "synthetic", "--out", "OUT"],
    "language": [PYTHON, "-m", "tracks.language", "--data", "pydoc", "--out", "OUT"],
}
SIDE_BY_SIDE = ("vision", "language")


def machine():
    model = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count()}


def load():
    return round(os.getloadavg()[0], 2)


def start(command, scratch, name):
    out = scratch / name
    argv = [str(out) if word == "OUT" else word for word in command]
    log = open(scratch / f"{name}.log", "w")
    return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT), log


def finish(process, log, name, started):
    code = process.wait()
    log.close()
    if code != 0:
        raise SystemExit(f"error: {name} ended with exit code {code}: see {log.name}")
    return round(time.monotonic() - started, 1)


def time_alone(names, scratch):
    seconds = {}
    for name in names:
        print(f"{name}: alone ...", file=sys.stderr, flush=True)
        before, started = load(), time.monotonic()
        process, log = start(ALONE[name], scratch, name)
        seconds[name] = {"seconds": finish(process, log, name, started), "load_before": before, "load_after": load()}
        print(f"{name}: {seconds[name]['seconds']} s", file=sys.stderr, flush=True)
    return seconds


def time_side_by_side(scratch):
    print(f"{' and '.join(SIDE_BY_SIDE)}: side by side ...", file=sys.stderr, flush=True)
    before, started = load(), time.monotonic()
    running = {name: start(ALONE[name], scratch, f"{name}-beside") for name in SIDE_BY_SIDE}
    seconds = {name: {"seconds": finish(*running[name], name, started)} for name in SIDE_BY_SIDE}
    for entry in seconds.values():
        entry.update(load_before=before, load_after=load())
    return seconds


def time_checks(scratch):
    """`python -m tracks check` of each solution, one at a time: seconds per exercise."""
    seconds = {}
    for path in sorted((ROOT / "solutions").glob("ex*.py")):
        started = time.monotonic()
        done = subprocess.run([PYTHON, "-m", "tracks", "check", str(path), "--seed", "1"], cwd=scratch,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"error: the solution {path.name} failed its check:\n{done.stdout[-2000:]}")
        seconds[path.stem.split("_")[0]] = round(time.monotonic() - started, 1)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated: toy, vision_diagnose, language_collapse, "
                                                   "vision, language, side_by_side, checks (default: all)")
    parser.add_argument("--max-load", type=float, default=0.5, help="refuse to start above this 1-minute load")
    args = parser.parse_args(argv)
    wanted = [name for name in args.only.split(",") if name] or [*ALONE, "side_by_side", "checks"]
    unknown = sorted(set(wanted) - {*ALONE, "side_by_side", "checks"})
    if unknown:
        parser.error(f"--only: no such part {', '.join(unknown)}")
    if load() > args.max_load:
        raise SystemExit(f"error: the 1-minute load is {load()}, above {args.max_load}: time on a quiet machine")
    record = json.loads(RECORD.read_text()) if RECORD.is_file() else {}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="session-") as scratch:
        scratch = pathlib.Path(scratch)
        alone = time_alone([name for name in ALONE if name in wanted], scratch)
        record.setdefault("alone", {}).update(alone)
        if "side_by_side" in wanted:
            record["side_by_side"] = time_side_by_side(scratch)
        if "checks" in wanted:
            record["checks"] = time_checks(scratch)
    record.update(machine=machine(), commit=commit,
                  commands={name: " ".join(word if word != PYTHON else "python" for word in command)
                            for name, command in ALONE.items()})
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {RECORD.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
