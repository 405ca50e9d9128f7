"""`python -m tracks grade` and `check`: each file in its own process, a row for every file, verdicts it cannot touch.

The fast test grades a small class whose children need no TensorFlow
(exercise 5, numpy only; seconds): hostile files that exit at import,
allocate 6 GiB under --memory-gb 2, patch numpy and the checks, print
fake reports and import solutions/, beside the solution, which passes.
The slow test grades tests/exercise_fixtures/ (right, wrong and hostile
files) with the six solutions, under --memory-gb 2, as the docs' example,
and the solutions, the hostile files and two wrong answers per exercise
again as notebooks, which must get the verdicts of their .py files.
"""

import csv
import json
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from notebook_submissions import MAGIC_NOTES, as_notebook
from track_helpers import run_cli
from tracks.__main__ import main as tracks_main
from tracks.exercises.harness import landlock
from tracks.exercises.catalogue import BY_NUMBER
from tracks.exercises.gradebook import columns

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "exercise_fixtures"
HOSTILE = FIXTURES / "hostile"

# What each hostile file's row must say (grades.csv's reason column).
REASONS = {"exit_at_import": "exit at import: the file called sys.exit(0)",
           "os_exit": "ended early: the process exited with code 3",
           "endless_loop": "timeout: still running after",
           "memory_6gb": "memory: over the 2 GiB limit",
           "memory_6gb_tensorflow": "memory: over the 2 GiB limit",
           "patches_numpy_and_checks": "4 of 4 checks failed",
           "escapes_new_session": "4 of 4 checks failed",
           "fills_the_disk": "disk: wrote more than",
           "fork_bomb": "processes: started more than 256",
           "prints": "4 of 4 checks failed",
           "imports_solutions": "import error: ModuleNotFoundError: No module named 'solutions'",
           "segfault": "crashed: killed by SIGSEGV"}


def read_gradebook(out):
    with open(out / "grades.csv", newline="") as handle:
        rows = {row["file"]: row for row in csv.DictReader(handle)}
    return rows, json.loads((out / "grades.json").read_text())


def test_a_class_of_hostile_files_gets_one_failed_row_each_and_the_solution_passes(tmp_path, capsys):
    folder = tmp_path / "class"
    (folder / "hostile").mkdir(parents=True)
    for name in ("exit_at_import", "memory_6gb", "patches_numpy_and_checks", "prints", "imports_solutions"):
        shutil.copy(HOSTILE / f"{name}.py", folder / "hostile" / f"{name}.py")
    (folder / "ana").mkdir()
    shutil.copy(ROOT / "solutions" / "ex5_bounds.py", folder / "ana" / "ex5_bounds.py")
    (folder / "broken.py").write_text("def f(:\n")  # a file of its own: the student is its stem
    out = tmp_path / "gradebook"
    code, out_text, err = run_cli(tracks_main, ["grade", folder, "--out", out, "--memory-gb", "2", "--jobs", "2",
                                                "--seed", "38", "--timeout", "60"], capsys)
    assert code == 0 and out_text == ""  # nothing a file printed reaches the grader's stdout
    assert "graded 7 of 7" in err and "s elapsed" in err
    rows, book = read_gradebook(out)
    assert len(rows) == 7 and book["seed"] == 38 and len(book["files"]) == 7
    assert rows["ana/ex5_bounds.py"]["total"] == "4/4" and rows["ana/ex5_bounds.py"]["reason"] == ""
    assert rows["ana/ex5_bounds.py"]["student"] == "ana" and rows["broken.py"]["student"] == "broken"
    assert [rows["ana/ex5_bounds.py"][f"ex5 {spec.key}"] for spec in BY_NUMBER[5].checks] == ["pass"] * 4
    assert rows["broken.py"]["reason"].startswith("not graded: SyntaxError")
    for name in ("exit_at_import", "memory_6gb", "patches_numpy_and_checks", "prints", "imports_solutions"):
        row = rows[f"hostile/{name}.py"]
        assert REASONS[name] in row["reason"] and row["total"].startswith("0/"), (name, row)
    # The patches ran in their own process (they said so there) and changed no verdict; with Landlock the
    # grader's checks were out of their reach.
    patched = (out / "logs/hostile/patches_numpy_and_checks/stdout.txt").read_text()
    assert "patched numpy and the checks" in patched or "could not patch the checks" in patched
    assert landlock.abi_version() < 1 or "Permission denied" in patched
    printed = (out / "logs/hostile/prints/stdout.txt").read_text()
    assert '{"passed": true' in printed and "residual_bounds called" in printed
    assert "} not JSON {" in (out / "logs/hostile/prints/stderr.txt").read_text()
    summary = (out / "summary.md").read_text()
    assert "6 passed" not in summary and "1 passed every required check" in summary and "Most common failure" in summary
    assert (out / "checks.png").stat().st_size > 10_000


def test_a_timeout_kills_the_whole_process_group_and_a_lingering_thread_does_not_keep_a_file(tmp_path, capsys):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "sleeper.py").write_text(
        "import subprocess, sys, time\nEXERCISE = 5\n"
        "helper = subprocess.Popen(['sleep', '300'])\nprint(helper.pid, flush=True)\n"
        "while True:\n    time.sleep(0.1)\n")
    # A right answer that leaves a thread running ends with its last record, not in a timeout.
    solution = (ROOT / "solutions" / "ex5_bounds.py").read_text()
    (folder / "lingering.py").write_text(solution + "\nimport threading, time\n"
                                         "threading.Thread(target=time.sleep, args=(300,)).start()\n")
    code, _, _ = run_cli(tracks_main, ["grade", folder, "--out", tmp_path / "book", "--timeout", "10",
                                       "--jobs", "2"], capsys)  # the smallest --timeout
    rows, _ = read_gradebook(tmp_path / "book")
    assert code == 0 and rows["sleeper.py"]["reason"].startswith("timeout: still running after 10 s")
    assert rows["lingering.py"]["total"] == "4/4" and rows["lingering.py"]["reason"] == ""
    helper = int((tmp_path / "book" / "logs" / "sleeper" / "stdout.txt").read_text())
    status = pathlib.Path(f"/proc/{helper}/status")
    assert not status.exists() or "zombie" in status.read_text()  # the file's own child was killed with it


def test_shared_memory_that_rlimit_data_does_not_count_is_stopped_by_the_watchdog(tmp_path, capsys):
    path = tmp_path / "shared.py"
    path.write_text("import mmap, time\nEXERCISE = 5\nMEMORY = mmap.mmap(-1, 2**30)  # shared: not in RLIMIT_DATA\n"
                    "for start in range(0, 2**30, 4096):\n    MEMORY[start] = 1\ntime.sleep(30)\n")
    code, out, _ = run_cli(tracks_main, ["check", path, "--memory-gb", "0.5", "--json"], capsys)
    assert code == 1 and json.loads(out)[0]["reason"] == "memory: over the 0.5 GiB limit"


def test_check_isolates_a_file_and_its_json_stays_valid_whatever_it_prints(capsys):
    files = [HOSTILE / "prints.py", ROOT / "solutions" / "ex5_bounds.py"]
    code, out, _ = run_cli(tracks_main, ["check", *files, "--json", "--seed", "5"], capsys)
    reports = json.loads(out)  # valid, though prints.py wrote fake JSON to its stdout
    assert code == 1 and [report["passed"] for report in reports] == [False, True]
    assert all(report["seed"] == 5 for report in reports) and "residual_bounds called" in reports[0]["stdout"]
    code, out, _ = run_cli(tracks_main, ["check", ROOT / "solutions" / "ex5_bounds.py", "--seed", "5"], capsys)
    assert code == 0 and "seed 5" in out and "FAIL" not in out and out.count("PASS") == 4


@pytest.mark.parametrize("argv, message", [
    (["grade", "nowhere"], "no such folder: nowhere"),
    (["grade", "{empty}"], "no *.py or *.ipynb file under"),
    (["grade", "{class}", "--jobs", "0"], "argument --jobs: must be a whole number >= 1, got '0'"),
    (["grade", "{class}", "--memory-gb", "lots"], "argument --memory-gb: must be a number, got 'lots'"),
    (["grade", "{class}", "--out", "{class}/book"], "is inside"),
    (["grade", "{class}", "--out", "{full}"], "exists and is not an empty folder"),
])
def test_grade_refuses_bad_input_in_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ana.py").write_text("EXERCISE = 5\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    argv = [str(a).format(empty=tmp_path / "empty", full=tmp_path / "full", **{"class": tmp_path / "class"})
            for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "book")]
    code, out, err = run_cli(tracks_main, argv, capsys)
    assert code == 2 and message in err and err.count("\n") == 1 and out == ""
    assert not (tmp_path / "book").exists() and (tmp_path / "full" / "notes.txt").read_text() == "mine"


@pytest.mark.slow
def test_the_fixtures_and_the_solutions_graded_as_a_class_under_2_gib(tmp_path, capsys):
    folder = tmp_path / "class"
    shutil.copytree(FIXTURES, folder)
    shutil.copytree(ROOT / "solutions", folder / "instructor")
    # The same as notebooks (issue 52): the solutions, the hostile files (not the endless loop: a minute of
    # timeout) and two wrong answers of each exercise, each with magics, shell lines and a stored output.
    notebooks = [*sorted((ROOT / "solutions").glob("*.py")),
                 *(path for path in sorted(HOSTILE.glob("*.py")) if path.stem != "endless_loop"),
                 *(path for number in BY_NUMBER for path in sorted((FIXTURES / "wrong").glob(f"ex{number}_*.py"))[:2])]
    for path in notebooks:
        relative = (pathlib.Path("instructor", path.name) if path.is_relative_to(ROOT / "solutions")
                    else path.relative_to(FIXTURES))
        target = folder / "notebooks" / relative.with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(as_notebook(path.read_text()))
    out = tmp_path / "gradebook"
    code, _, err = run_cli(tracks_main, ["grade", folder, "--out", out, "--memory-gb", "2", "--jobs", "2",
                                         "--seed", "38", "--timeout", "60"], capsys)
    files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.suffix in (".py", ".ipynb"))
    rows, book = read_gradebook(out)
    assert code == 0 and sorted(rows) == files  # one row per file, none missing
    check_columns = [name for _, _, name in columns(book["files"])]
    for name, row in rows.items():
        if name.startswith("notebooks/"):  # the verdicts of the .py file it was made from
            python = rows[str(pathlib.Path(name).relative_to("notebooks").with_suffix(".py"))]
            assert [row[c] for c in check_columns] == [python[c] for c in check_columns], (name, row, python)
            assert row["total"] == python["total"] and row["exercise"] == python["exercise"], (name, row, python)
            assert row["reason"].split(":")[0] == python["reason"].split(":")[0], (name, row, python)
            assert len(row["notes"].split("; ")) == MAGIC_NOTES, (name, row)
        elif name.startswith(("instructor/", "right/")):
            assert row["reason"] == "" and row["total"].split("/")[0] == row["total"].split("/")[1], (name, row)
        elif name.startswith("hostile/"):
            assert REASONS[pathlib.Path(name).stem] in row["reason"], (name, row)
        elif name.startswith("cheats/"):
            assert expected_reason(folder / name) in row["reason"] and row["total"].split("/")[0] != \
                row["total"].split("/")[1], (name, row)
        else:
            key, hint = re.search(r"^# expect: (\w+): (.+)$", (folder / name).read_text(), re.MULTILINE).groups()
            column = {(number, check): title for number, check, title in columns(book["files"])}
            assert row[column[int(row["exercise"]), key]] == "fail", (name, row)  # "ex3 steps (optional)" too
            report = next(report for report in book["files"] if report["file"] == name)
            spec = next(spec for spec in BY_NUMBER[int(row["exercise"])].checks if spec.key == key)
            assert any(hint.strip() in c["hint"] for c in report["checks"] if c["name"] == spec.name), (name, report)


def test_right_answers_with_crlf_a_bom_spaces_and_other_letters_in_their_names_pass(tmp_path, capsys):
    folder = tmp_path / "class"
    for student, name, source in (("José María", "mi solución 5.py", ROOT / "solutions" / "ex5_bounds.py"),
                                  ("Zoë Ørsted", "ex5 other side.py", FIXTURES / "right" / "ex5_product_on_the_right.py")):
        (folder / student).mkdir(parents=True)
        (folder / student / name).write_bytes(b"\xef\xbb\xbf" + source.read_bytes().replace(b"\n", b"\r\n"))
    for seed in ("7", "2026"):
        out = tmp_path / f"book{seed}"
        code, _, _ = run_cli(tracks_main, ["grade", folder, "--out", out, "--jobs", "2", "--seed", seed], capsys)
        rows, _ = read_gradebook(out)
        assert code == 0 and {row["total"] for row in rows.values()} == {"4/4"}, rows
        assert sorted(row["student"] for row in rows.values()) == ["José María", "Zoë Ørsted"]


CHEATS = sorted((FIXTURES / "cheats").glob("*.py"))


def expected_reason(path):
    return re.search(r"^# expect-reason: (.+)$", path.read_text(), re.MULTILINE).group(1).strip()


@pytest.mark.skipif(landlock.abi_version() < 1, reason="the cheats that read the grader's files fail through Landlock")
def test_cheats_fail_forged_values_imported_references_references_read_by_path_and_answers_from_the_request(
        tmp_path, capsys):
    folder = tmp_path / "class"
    shutil.copytree(FIXTURES / "cheats", folder / "cheats")
    (folder / "ana").mkdir()
    shutil.copy(ROOT / "solutions" / "ex5_bounds.py", folder / "ana" / "ex5_bounds.py")
    out = tmp_path / "book"
    code, _, _ = run_cli(tracks_main, ["grade", folder, "--out", out, "--jobs", "2", "--seed", "7"], capsys)
    rows, _ = read_gradebook(out)
    assert code == 0 and rows["ana/ex5_bounds.py"]["total"] == "4/4"
    assert len(CHEATS) >= 4
    for path in CHEATS:
        row = rows[f"cheats/{path.name}"]
        passed, total = map(int, row["total"].split("/"))
        assert passed < total and expected_reason(path) in row["reason"], (path.name, row)
    # forged values earn only the checks whose right value follows from the inputs alone (a shape, a count)
    assert rows["cheats/swapped_probes.py"]["ex3 attention"] == rows["cheats/swapped_probes.py"]["ex3 mlp"] == "fail"


def _alive(command):
    """Process ids whose command line is `command` (a list), from /proc."""
    wanted = ("\0".join(command) + "\0").encode()
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == wanted:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_processes_a_file_leaves_in_new_sessions_a_fork_bomb_and_a_full_disk_end_with_it(tmp_path, capsys):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("escapes_new_session", "fills_the_disk", "fork_bomb"):
        shutil.copy(HOSTILE / f"{name}.py", folder / f"{name}.py")
    out = tmp_path / "book"
    code, _, _ = run_cli(tracks_main, ["grade", folder, "--out", out, "--jobs", "2", "--timeout", "20"], capsys)
    rows, book = read_gradebook(out)
    assert code == 0
    escaped = next(entry for entry in book["files"] if entry["file"] == "escapes_new_session.py")
    assert escaped["left_running"] >= 2 and not _alive(["sleep", "317"]) and not _alive(["sleep", "318"])
    assert rows["fills_the_disk.py"]["reason"].startswith("disk: wrote more than 256 MiB")
    assert rows["fork_bomb.py"]["reason"].startswith("processes: started more than 256")
    left = [path for path in pathlib.Path(tempfile.gettempdir()).glob("submission-*/work/filler-0.bin")]
    assert not left  # its folder was removed
    assert sum(path.stat().st_size for path in (out / "logs").rglob("*")) < 2**20


def test_a_folder_that_holds_a_hidden_one_is_granted_entry_by_entry_around_it(tmp_path):
    for path in ("site/numpy/core.py", "site/tracks/exercises/ex4.py", "site/six.py", "site/deep/tracks/x.py",
                 "other/a.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    (tmp_path / "site" / "link").symlink_to(tmp_path / "site" / "tracks")
    rules = dict(landlock.read_rules([tmp_path / "site", tmp_path / "other"], [tmp_path / "site" / "tracks"]))
    site = str(tmp_path / "site")
    assert rules[site] == landlock.READ_DIR  # listed, not read
    assert rules[f"{site}/numpy"] == rules[f"{site}/six.py"] == rules[f"{site}/deep"] == landlock.READ
    assert rules[str(tmp_path / "other")] == landlock.READ
    assert not any(path.startswith(f"{site}/tracks") for path in rules)  # nor through the link to it
    if landlock.abi_version() < 1:
        return
    probe = ("import sys, pathlib\nfrom tracks.exercises.harness import landlock\n"
             f"landlock.confine([{site!r}], [], hidden=[{site + '/tracks'!r}])\n"
             "for path in sys.argv[1:]:\n"
             "    try:\n        pathlib.Path(path).read_text(); print('read', path)\n"
             "    except PermissionError:\n        print('denied', path)\n"
             f"print(sorted(p.name for p in pathlib.Path({site!r}).iterdir()))\n")
    result = subprocess.run([sys.executable, "-c", probe, f"{site}/numpy/core.py", f"{site}/tracks/exercises/ex4.py",
                             f"{site}/link/exercises/ex4.py", f"{site}/six.py"], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.stdout.splitlines() == [f"read {site}/numpy/core.py", f"denied {site}/tracks/exercises/ex4.py",
                                          f"denied {site}/link/exercises/ex4.py", f"read {site}/six.py",
                                          "['deep', 'link', 'numpy', 'six.py', 'tracks']"], result.stderr


LANDLOCK_SIGNALS = 6  # the Landlock ABI that scopes signals (Linux 6.12)


@pytest.mark.skipif(landlock.abi_version() < LANDLOCK_SIGNALS,
                    reason=f"this kernel's Landlock ABI is {landlock.abi_version()}: the grader confines "
                           f"files, TCP and signals from ABI {LANDLOCK_SIGNALS} (docs/grading.md)")
def test_with_landlock_a_file_cannot_kill_the_grader_rewrite_a_classmate_read_solutions_or_connect(tmp_path):
    folder = tmp_path / "class"
    solution = (ROOT / "solutions" / "ex5_bounds.py").read_text()
    for student in ("ana", "victim"):
        (folder / student).mkdir(parents=True)
        (folder / student / "ex5_bounds.py").write_text(solution)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    wrong = "def residual_bounds(epsilons):\n    return 0.0, 0.0\n"
    hostile = {
        # os.kill of its parent: without Landlock's signal scope this ends the grading of the whole class.
        "kills_the_grader": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
        "overwrites_classmates": f"import pathlib\npathlib.Path({str(folder / 'victim' / 'ex5_bounds.py')!r})"
                                 f".write_text({wrong!r})\n",
        "reads_solutions": f"exec(open({str(ROOT / 'solutions' / 'ex5_bounds.py')!r}).read())\n",
        "connects": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'x')\n",
        "escapes_and_spins": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    print(os.getpid(), flush=True)\n"
                             "    while True:\n        pass\ntime.sleep(1)\n",
    }
    (folder / "hostile").mkdir()
    for name, text in hostile.items():
        (folder / "hostile" / f"{name}.py").write_text(f"EXERCISE = 5\n{text}")
    out = tmp_path / "book"
    grader = subprocess.run([sys.executable, "-m", "tracks", "grade", str(folder), "--out", str(out), "--jobs", "2",
                             "--seed", "38", "--timeout", "30"], cwd=ROOT, capture_output=True, text=True)
    assert grader.returncode == 0, grader.stderr[-2000:]  # the grader was not killed
    rows, book = read_gradebook(out)
    for student in ("ana", "victim"):
        assert rows[f"{student}/ex5_bounds.py"]["total"] == "4/4", rows[f"{student}/ex5_bounds.py"]
        assert (folder / student / "ex5_bounds.py").read_text() == solution  # not rewritten
    for name in hostile:
        row = rows[f"hostile/{name}.py"]
        assert row["total"].startswith("0/"), (name, row)
    assert "PermissionError" in rows["hostile/kills_the_grader.py"]["reason"]
    assert "PermissionError" in rows["hostile/overwrites_classmates.py"]["reason"]
    assert "PermissionError" in rows["hostile/reads_solutions.py"]["reason"]
    assert "PermissionError" in rows["hostile/connects.py"]["reason"]
    with pytest.raises(socket.timeout):
        listener.accept()  # no connection reached the listener
    listener.close()
    assert all(entry["confinement"]["confined"] == ["files read", "files written", "TCP", "signals"]
               for entry in book["files"])
    assert "Landlock" in (out / "summary.md").read_text()
    # The process that started a session of its own, escaping the group kill, was killed after its file.
    escaped = int((out / "logs" / "hostile" / "escapes_and_spins" / "stdout.txt").read_text())
    status = pathlib.Path(f"/proc/{escaped}/status")
    assert not status.exists() or "zombie" in status.read_text()
