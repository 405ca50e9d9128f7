"""From the platform's hand-in to its gradebook (issue 65): `collect`, `grade --roster` and `grade --exercises`.

The downloads are built here from the layouts as the platforms write them
(docs/grading.md, "Collecting the hand-in"), not from collect.py's code:
- Canvas (lib/content_zipper.rb): `[sortable name, LATE, user id]` joined
  with `_`, every character that is not a word character removed, then
  `_<attachment id>_<original name>`; a second upload of one name is `-1`;
- Moodle (mod/assign: the download's prefix is
  clean_filename(str_replace('_', ' ', fullname) . '_' . uniqueid), then
  `_assignsubmission_<plugin>`, a folder per student and plugin, or flat).
Each class holds late files, a student with two files of one exercise, a
name with accents and a file that fits no student; it is collected and
graded with the platform's own roster and both LMS files. Moodle's feedback
zip is read back as Moodle's import reads names
(mod/assign/feedback/file/importziplib.php). Exercise 5's solution grades in
a fraction of a second (numpy only); exercise 6's, once, imports TensorFlow.
"""

import csv
import json
import os
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

from track_helpers import run_cli
from tracks.__main__ import main as tracks_main
from tracks.exercises.catalogue import BY_NUMBER
from tracks.exercises.platforms import name_keys, read_roster

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
WRONG = ROOT / "tests" / "exercise_fixtures" / "wrong"
RIGHT5, WRONG5, RIGHT6 = (SOLUTIONS / "ex5_bounds.py").read_bytes(), (WRONG / "ex5_off_by_one.py").read_bytes(), \
    (SOLUTIONS / "ex6_paths.py").read_bytes()


# The platforms' layouts, as they write them ---------------------------------------------------------


def canvas_prefix(sortable_name, user_id, late=False):
    """content_zipper.rb: [users_name, 'LATE' if late, user_id].compact.join('_'), then gsub(/[^[[:word:]]]/, '')
    and downcase of the name (Python's \\w is Unicode's word characters, as [[:word:]] is)."""
    name = re.sub(r"[^\w]", "", sortable_name).lower()
    return "_".join([name, *(["LATE"] if late else []), str(user_id)])


def moodle_prefix(fullname, participant, plugin="file"):
    """locallib/downloader: clean_filename(str_replace('_', ' ', fullname) . '_' . uniqueid) . '_assignsubmission_'
    . plugin."""
    return f"{fullname.replace('_', ' ')}_{participant}_assignsubmission_{plugin}"


def write_zip(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def python_m_tracks(*argv):
    done = subprocess.run([sys.executable, "-m", "tracks", *map(str, argv)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    return done.returncode, done.stderr


def rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def moodle_import_target(path):
    """(participant id, plugin, file name) as Moodle's feedback import reads a path in the zip
    (importziplib.php, is_valid_filename_for_import: each part split by explode('_', $part, 5)), or None."""
    parts = path.split("/")
    while parts:
        info = parts.pop(0).split("_", 4)
        if len(info) < 4 or not info[1].isdigit():
            continue
        return int(info[1]), (info[2], info[3]), "/".join([info[4] if len(info) == 5 else "", *parts]).strip("/")
    return None


# A Canvas class -----------------------------------------------------------------------------------------

CANVAS_ROSTER = [  # Canvas's gradebook export: Student (sortable name), ID, SIS User ID, SIS Login ID, Section
    ("Doe, Jane", "12345", "S-001", "jdoe", "Section A"),
    ("Müller, Jörg", "23456", "S-002", "jmuller", "Section A"),
    ("Absent, Al", "34567", "S-003", "aabsent", "Section B"),
]


def canvas_download(folder):
    """{member: (student's folder, original name, bytes, late)} and the zip; one member that fits no one."""
    jane, jorg, sam = ("Doe, Jane", 12345), ("Müller, Jörg", 23456), ("Stranger, Sam", 45678)
    files = {
        f"{canvas_prefix(*jane)}_678901_ex5_bounds.py": (jane, "ex5_bounds.py", RIGHT5, False),
        f"{canvas_prefix(*jane, late=True)}_678902_ex6_paths.py": (jane, "ex6_paths.py", RIGHT6, True),
        f"{canvas_prefix(*jane)}_text.html": (jane, "text.html", b"<p>my notes</p>", False),  # a text entry
        f"{canvas_prefix(*jorg)}_678903_ex5_bounds.py": (jorg, "ex5_bounds.py", WRONG5, False),
        f"{canvas_prefix(*jorg)}_678904_ex5_bounds-1.py": (jorg, "ex5_bounds-1.py", RIGHT5, False),  # same name again
        f"{canvas_prefix(*sam)}_678905_ex5_bounds.py": (sam, "ex5_bounds.py", RIGHT5, False),  # not in the roster
    }
    members = {name: data for name, (_, _, data, _) in files.items()}
    members["notes from the TA.txt"] = b"not a submission"
    return files, write_zip(folder / "submissions.zip", members)


def canvas_roster(path):
    lines = ["Student,ID,SIS User ID,SIS Login ID,Section,Exercises (2041)", "    Points Possible,,,,,21"]
    lines += [",".join(f'"{cell}"' for cell in person) + "," for person in CANVAS_ROSTER]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def canvas(tmp_path_factory):
    """The Canvas class collected, then graded with its roster, both LMS files and --exercises 1,3,5."""
    tmp = tmp_path_factory.mktemp("canvas")
    files, download = canvas_download(tmp)
    code, collected = python_m_tracks("collect", download, "--out", tmp / "class")
    assert code == 0, collected
    code, graded = python_m_tracks("grade", tmp / "class", "--out", tmp / "book", "--roster",
                                   canvas_roster(tmp / "export.csv"), "--lms", "canvas", "--lms", "moodle",
                                   "--exercises", "1,3,5", "--jobs", "2", "--seed", "7", "--timeout", "60",
                                   "--memory-gb", "2")
    assert code == 0, graded[-3000:]
    return {"files": files, "class": tmp / "class", "book": tmp / "book", "collected": collected, "graded": graded}


def test_canvas_every_file_lands_with_its_student_and_its_late_marker(canvas):
    listed = {row["source"]: row for row in rows(canvas["class"] / "collected.csv")}
    for member, ((sortable, user_id), original, data, late) in canvas["files"].items():
        folder = f"{canvas_prefix(sortable, user_id)}"  # <name>_<id>, as documented: the prefix without LATE
        assert (canvas["class"] / folder / original).read_bytes() == data, member
        row = listed[member]
        assert (row["student"], row["id"], row["file"]) == (folder, str(user_id), f"{folder}/{original}")
        assert row["late"] == ("yes" if late else "no"), member
    assert sorted(p.name for p in canvas["class"].iterdir()) == [
        ".unplaced", "collected.csv", "doejane_12345", "müllerjörg_23456", "strangersam_45678"]


def test_canvas_a_file_that_fits_no_student_is_kept_and_listed(canvas):
    row = next(row for row in rows(canvas["class"] / "collected.csv") if row["source"] == "notes from the TA.txt")
    assert row["student"] == "" and row["why"] and row["file"] == ".unplaced/notes from the TA.txt"
    assert (canvas["class"] / ".unplaced" / "notes from the TA.txt").read_bytes() == b"not a submission"
    assert "unplaced: notes from the TA.txt" in canvas["collected"]
    grades = rows(canvas["book"] / "grades.csv")
    assert not any(".unplaced" in row["file"] for row in grades)  # the grader skips the hidden folder


def test_canvas_csv_carries_the_rosters_ids_and_lists_who_does_not_match(canvas):
    with open(canvas["book"] / "canvas.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    assert table[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert table[1][0] == "Points Possible"
    identities = {tuple(row[:5]) for row in table[2:]}
    assert set(CANVAS_ROSTER[:2]) <= identities  # the roster's own five cells: the file imports without edits
    assert ("strangersam_45678", "", "", "strangersam_45678", "") in identities
    said = canvas["graded"]
    assert "2 of 3 students matched, 0 of them by name" in said
    assert "not in the roster: strangersam_45678" in said and "in the roster with no submission: Absent, Al" in said
    summary = (canvas["book"] / "summary.md").read_text(encoding="utf-8")
    assert "Not in the roster: strangersam_45678" in summary and "no submission: Absent, Al" in summary
    students = {row["student"]: row for row in rows(canvas["book"] / "students.csv")}
    assert students["doejane_12345"]["late"] == "yes" and students["müllerjörg_23456"]["late"] == "no"
    late = {row["file"]: row["late"] for row in rows(canvas["book"] / "grades.csv")}
    assert late["doejane_12345/ex6_paths.py"] == "yes" and late["doejane_12345/ex5_bounds.py"] == "no"


def test_an_assignment_of_exercises_1_3_5_counts_them_only_and_reports_exercise_6_outside(canvas):
    book = canvas["book"]
    grades = {row["file"]: row for row in rows(book / "grades.csv")}
    six = grades["doejane_12345/ex6_paths.py"]
    assert six["assignment"] == "outside" and six["total"] == "4/4"  # graded: it passed every check
    assert {row["assignment"] for name, row in grades.items() if name != "doejane_12345/ex6_paths.py"} == {"in"}
    students = {row["student"]: row for row in rows(book / "students.csv")}
    possible = {1: 7, 3: 10, 5: 4}
    assert list(students["doejane_12345"]) == ["student", "ex1", "ex3", "ex5", "total", "counted", "other files",
                                               "late"]
    for row in students.values():  # totals over the three exercises only
        earned = sum(float(row[f"ex{n}"].split("/")[0]) for n in possible if row[f"ex{n}"] != "missing")
        assert row["total"] == f"{earned:g}/{sum(possible.values())}"
    assert students["doejane_12345"]["total"] == "4/21"  # not 8: exercise 6 is not counted
    assert students["müllerjörg_23456"]["ex5"] == "4/4"  # the best of two files of one name
    assert "ex5_bounds-1.py (best of 2)" in students["müllerjörg_23456"]["counted"]
    assert "doejane_12345/ex6_paths.py (exercise 6: outside the assignment" in students["doejane_12345"]["other files"]
    with open(book / "canvas.csv", newline="", encoding="utf-8") as handle:
        header, points = list(csv.reader(handle))[:2]
    assert header[5:] == [f"Exercise {n}: {BY_NUMBER[n].title}" for n in possible] and points[5:] == ["7", "10", "4"]
    feedback = (book / "feedback" / "doejane_12345.md").read_text(encoding="utf-8")
    assert "Total: 4 of 21 points (exercises 1, 3, 5)." in feedback
    assert f"## Exercise 6: {BY_NUMBER[6].title} (outside this assignment)" in feedback
    summary = (book / "summary.md").read_text(encoding="utf-8")
    assert "doejane_12345/ex6_paths.py (exercise 6)" in summary and "outside the assignment" in summary
    assert json.loads((book / "grades.json").read_text())["exercises"] == [1, 3, 5]


# A Moodle class -----------------------------------------------------------------------------------------


def moodle_download(folder):
    """{member: (participant, full name, original name, bytes)}, the zip; a member that fits no one, and one
    whose path leaves the folder."""
    jane, zoe = ("Jane Doe", 123456), ("Zoë Çelik", 555)
    files = {
        f"{moodle_prefix(jane[0], jane[1])}/ex5_bounds.py": (jane, "ex5_bounds.py", WRONG5),
        f"{moodle_prefix(jane[0], jane[1])}/ex5_bounds_v2.py": (jane, "ex5_bounds_v2.py", RIGHT5),
        f"{moodle_prefix(zoe[0], zoe[1])}/ex5_bounds.py": (zoe, "ex5_bounds.py", WRONG5),
        f"{moodle_prefix(zoe[0], zoe[1], 'onlinetext')}/onlinetext.html": (zoe, "onlinetext.html", b"<p>text</p>"),
    }
    members = {name: data for name, (_, _, data) in files.items()}
    members["index.html"] = b"a page"
    members["../outside.py"] = b"EXERCISE = 5\n"
    return files, write_zip(folder / "moodle.zip", members)


MOODLE_WORKSHEET = (
    "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
    "Last modified (submission),Last modified (grade),Feedback comments\n"
    '"Participant 123456","Jane Doe",jane@example.edu,"Submitted for grading 2 days 3 hours late",,100.00,Yes,'
    '"Monday, 7 December 2026, 9:00 AM",-,\n'
    '"Participant 556","ZOE CELIK",zoe@example.edu,"Submitted for grading",,100.00,Yes,'
    '"Monday, 7 December 2026, 8:00 AM",-,\n'
    '"Participant 888","Al Absent",al@example.edu,"No submission",,100.00,Yes,-,-,\n')


@pytest.fixture(scope="module")
def moodle(tmp_path_factory):
    """The Moodle class collected, then graded with its grading worksheet as roster and both LMS files."""
    tmp = tmp_path_factory.mktemp("moodle")
    files, download = moodle_download(tmp)
    code, collected = python_m_tracks("collect", download, "--out", tmp / "class")
    assert code == 0, collected
    (tmp / "worksheet.csv").write_text(MOODLE_WORKSHEET, encoding="utf-8")
    code, graded = python_m_tracks("grade", tmp / "class", "--out", tmp / "book", "--roster", tmp / "worksheet.csv",
                                   "--lms", "canvas", "--lms", "moodle", "--seed", "7", "--timeout", "60")
    assert code == 0, graded[-3000:]
    return {"tmp": tmp, "files": files, "class": tmp / "class", "book": tmp / "book", "collected": collected,
            "graded": graded}


def test_moodle_every_file_lands_with_its_student_and_nothing_leaves_the_class(moodle):
    listed = {row["source"]: row for row in rows(moodle["class"] / "collected.csv")}
    for member, ((name, participant), original, data) in moodle["files"].items():
        folder = f"{name}_{participant}"  # Moodle's own prefix
        assert (moodle["class"] / folder / original).read_bytes() == data, member
        assert (listed[member]["student"], listed[member]["name"], listed[member]["id"]) == (
            folder, name, str(participant))
        assert listed[member]["late"] == ""  # Moodle's zip says nothing of lateness
    for source in ("index.html", "../outside.py"):
        assert listed[source]["student"] == "" and listed[source]["file"].startswith(".unplaced/")
        assert f"unplaced: {source}" in moodle["collected"]
    assert (moodle["class"] / ".unplaced" / "outside.py").read_bytes() == b"EXERCISE = 5\n"
    assert sorted(p.name for p in moodle["tmp"].iterdir()) == ["book", "class", "moodle.zip", "worksheet.csv"]


def test_moodle_roster_gives_late_email_keys_and_a_match_by_name(moodle):
    book = moodle["book"]
    students = {row["student"]: row for row in rows(book / "students.csv")}
    assert students["Jane Doe_123456"]["late"] == "yes" and students["Zoë Çelik_555"]["late"] == "no"
    assert students["Jane Doe_123456"]["ex5"] == "4/4" and students["Zoë Çelik_555"]["ex5"] == "3/4"
    keyed = {row["Email address"]: row for row in rows(book / "moodle.csv")}
    assert sorted(keyed) == ["jane@example.edu", "zoe@example.edu"]
    assert keyed["jane@example.edu"][f"Exercise 5: {BY_NUMBER[5].title}"] == "4"
    said = moodle["graded"]
    assert "2 of 2 students matched, 1 of them by name (Zoë Çelik_555)" in said  # 556 is not the download's 555
    assert "in the roster with no submission: Al Absent" in said
    summary = (book / "summary.md").read_text(encoding="utf-8")
    assert "1 of them by name (Zoë Çelik_555)" in summary and "no submission: Al Absent" in summary
    with open(book / "canvas.csv", newline="", encoding="utf-8") as handle:
        ids = [row[1] for row in list(csv.reader(handle))[2:]]
    assert ids == ["", ""]  # a Moodle participant id is no Canvas ID


def test_moodle_feedback_zip_reaches_each_participant_through_moodles_import(moodle):
    book = moodle["book"]
    with zipfile.ZipFile(book / "moodle_feedback.zip") as archive:
        targets = {moodle_import_target(name): archive.read(name) for name in archive.namelist()}
    expected = {(123456, ("assignfeedback", "file"), "feedback.md"): "Jane_Doe_123456.md",
                (555, ("assignfeedback", "file"), "feedback.md"): "Zoë_Çelik_555.md"}
    assert set(targets) == set(expected)
    for target, feedback in expected.items():
        assert targets[target] == (book / "feedback" / feedback).read_bytes()
        assert targets[target].startswith(b"# Feedback for ")


# Other layouts and a pattern ---------------------------------------------------------------------------


def test_moodle_flat_files_old_folders_and_an_unpacked_folder_are_collected_alike(tmp_path, capsys):
    download = tmp_path / "unpacked" / "Course-Assignment-17"  # the folder an unzip makes, one level down
    for name in (f"{moodle_prefix('Jane Doe', 123456)}_ex5_bounds.py",  # "download submissions in folders" off
                 f"{moodle_prefix('Ann_Lee', 42)}_/sub/ex5_bounds.py"):  # before Moodle 4.1: a trailing _
        (download / name).parent.mkdir(parents=True, exist_ok=True)
        (download / name).write_bytes(RIGHT5)
    code, _, err = run_cli(tracks_main, ["collect", tmp_path / "unpacked", "--out", tmp_path / "class"], capsys)
    assert code == 0, err
    assert (tmp_path / "class" / "Jane Doe_123456" / "ex5_bounds.py").read_bytes() == RIGHT5
    assert (tmp_path / "class" / "Ann Lee_42" / "sub" / "ex5_bounds.py").read_bytes() == RIGHT5


def test_canvas_late_marker_in_either_case_and_anonymous_grading(tmp_path, capsys):
    download = write_zip(tmp_path / "c.zip", {"doejane_late_12345_9_ex5_bounds.py": RIGHT5,  # lower-cased prefix
                                             "LATE_777_10_ex5_bounds.py": RIGHT5,  # anonymous: no name
                                             "888_11_ex5_bounds.py": RIGHT5})
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", tmp_path / "class"], capsys)
    assert code == 0, err
    late = {row["student"]: row["late"] for row in rows(tmp_path / "class" / "collected.csv")}
    assert late == {"doejane_12345": "yes", "777": "yes", "888": "no"}


def test_a_pattern_collects_any_other_platforms_download(tmp_path, capsys):
    download = tmp_path / "hand-in"
    for name in ("Jane Doe (jdoe)/LATE ex5_bounds.py", "Ben Okafor (bokafor)/ex5_bounds.py", "stray.py"):
        (download / name).parent.mkdir(parents=True, exist_ok=True)
        (download / name).write_bytes(RIGHT5)
    pattern = r"(?P<student>[^/(]+) \((?P<id>\w+)\)/(?P<late>LATE )?(?P<file>[^/]+)"
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", tmp_path / "class", "--pattern", pattern],
                           capsys)
    assert code == 0, err
    table = {row["source"]: row for row in rows(tmp_path / "class" / "collected.csv")}
    assert (table["Jane Doe (jdoe)/LATE ex5_bounds.py"]["file"], table["Jane Doe (jdoe)/LATE ex5_bounds.py"]["late"]) \
        == ("Jane Doe_jdoe/ex5_bounds.py", "yes")
    assert table["Ben Okafor (bokafor)/ex5_bounds.py"]["late"] == "no"
    assert table["stray.py"]["student"] == "" and "unplaced: stray.py" in err


def test_a_link_in_an_unpacked_download_is_listed_and_never_followed(tmp_path, capsys):
    download = tmp_path / "download"
    download.mkdir()
    (download / "doejane_12345_1_ex5_bounds.py").write_bytes(RIGHT5)
    (download / "doejane_12345_2_secret.py").symlink_to("/etc/hostname")
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", tmp_path / "class"], capsys)
    assert code == 0 and "unplaced: doejane_12345_2_secret.py (a link: not followed): not copied" in err
    assert sorted(p.name for p in (tmp_path / "class" / "doejane_12345").iterdir()) == ["ex5_bounds.py"]
    assert not any((tmp_path / "class" / ".unplaced").glob("*"))


@pytest.mark.parametrize("setup, argv, message", [
    (None, ["{tmp}/none.zip"], "no such download: {tmp}/none.zip"),
    ("text", ["{tmp}/download.zip"], "not a zip"),
    ("canvas", ["{tmp}/download.zip", "--pattern", "(unclosed"], "does not compile"),
    ("canvas", ["{tmp}/download.zip", "--pattern", r"(?P<name>\w+)_"], "has no (?P<student>...) group"),
    ("canvas", ["{tmp}/download.zip", "--pattern", r"(?P<student>\w+)_(?P<ID>\d+)"], "no group 'ID'"),
    ("canvas", ["{tmp}/download.zip", "--layout", "canvas", "--pattern", "(?P<student>.+)"], "not both"),
    ("canvas", ["{tmp}/download.zip", "--layout", "moodle"], "no file fits the moodle layout"),
    ("other", ["{tmp}/download.zip"], "fit neither Canvas's nor Moodle's layout"),
    ("canvas", ["{tmp}/download.zip", "--layout", "blackboard"], "invalid choice: 'blackboard'"),
])
def test_collect_refuses_bad_input_in_one_line_before_writing(tmp_path, capsys, setup, argv, message):
    if setup == "text":
        (tmp_path / "download.zip").write_text("not a zip")
    elif setup:
        names = {"canvas": "doejane_12345_1_ex5_bounds.py", "other": "homework/ex5.py"}
        write_zip(tmp_path / "download.zip", {names[setup]: RIGHT5})
    before = sorted(tmp_path.iterdir())
    code, _, err = run_cli(tracks_main, ["collect", *(a.format(tmp=tmp_path) for a in argv),
                                         "--out", tmp_path / "class"], capsys)
    assert code == 2 and err.count("\n") == 1 and message.format(tmp=tmp_path) in err, err
    assert sorted(tmp_path.iterdir()) == before


def test_collect_refuses_an_out_that_holds_something(tmp_path, capsys):
    write_zip(tmp_path / "d.zip", {"doejane_12345_1_ex5_bounds.py": RIGHT5})
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "mine.txt").write_text("notes")
    code, _, err = run_cli(tracks_main, ["collect", tmp_path / "d.zip", "--out", tmp_path / "class"], capsys)
    assert code == 2 and err.count("\n") == 1 and "exists and is not an empty folder" in err
    assert [p.name for p in (tmp_path / "class").iterdir()] == ["mine.txt"]


def test_a_zip_that_climbs_out_writes_nothing_outside_the_class(tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    download = write_zip(tmp_path / "d.zip", {"doejane_12345_1_ex5_bounds.py": RIGHT5, "../../escape1.py": b"1",
                                               "/tmp/escape2.py": b"2", "a/../../escape3.py": b"3"})
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", work / "class"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in work.iterdir()) == ["class"] and sorted(tmp_path.iterdir()) == [download, work]
    assert not pathlib.Path("/tmp/escape2.py").exists()
    unplaced = sorted(p.relative_to(work / "class" / ".unplaced").as_posix()
                      for p in (work / "class" / ".unplaced").rglob("*") if p.is_file())
    assert unplaced == ["a/escape3.py", "escape1.py", "tmp/escape2.py"] and err.count("leaves the download") == 3


# The roster and the options of grade --------------------------------------------------------------------


def test_a_canvas_export_and_a_moodle_worksheet_are_read_as_rosters(tmp_path):
    roster = read_roster(canvas_roster(tmp_path / "canvas.csv"))
    assert roster.platform == "canvas" and [(p.name, p.id, p.sis_login_id) for p in roster.people] == [
        (name, user_id, login) for name, user_id, _, login, _ in CANVAS_ROSTER]  # no "Points Possible" student
    (tmp_path / "moodle.csv").write_bytes(b"\xef\xbb\xbf" + MOODLE_WORKSHEET.encode())  # with a byte-order mark
    roster = read_roster(tmp_path / "moodle.csv")
    assert roster.platform == "moodle" and [(p.id, p.email, p.late) for p in roster.people] == [
        ("123456", "jane@example.edu", "yes"), ("556", "zoe@example.edu", "no"), ("888", "al@example.edu", "no")]


@pytest.mark.parametrize("same, other", [("Doe, Jane", "doejane"), ("Doe, Jane", "Jane DOE"),
                                         ("Müller, Jörg", "müllerjörg"), ("Zoë Çelik", "ZOE CELIK")])
def test_names_are_compared_without_case_accents_punctuation_or_order(same, other):
    assert name_keys(same) & name_keys(other)


def test_different_names_do_not_match():
    assert not name_keys("Doe, Jane") & name_keys("Doe, John") and not name_keys("Ann Lee") & name_keys("Anne Lee")


@pytest.mark.parametrize("roster, argv, message", [
    ("Name,Grade\nJane,1\n", [], "neither Canvas's gradebook export"),
    ("Student,ID\n    Points Possible,\n", [], "no student in it"),
    (None, [], "--roster {tmp}/roster.csv: No such file"),
    ("Student,ID\nJane,1\n", ["--exercises", "1,9"], "--exercises 1,9: '9' is no exercise"),
    ("Student,ID\nJane,1\n", ["--exercises", "3,3"], "--exercises 3,3: 3 is given twice"),
])
def test_grade_refuses_a_bad_roster_or_assignment_in_one_line_before_grading(tmp_path, capsys, roster, argv,
                                                                              message):
    (tmp_path / "class" / "ana").mkdir(parents=True)
    (tmp_path / "class" / "ana" / "ex5_bounds.py").write_bytes(RIGHT5)
    if roster is not None:
        (tmp_path / "roster.csv").write_text(roster)
    code, _, err = run_cli(tracks_main, ["grade", tmp_path / "class", "--out", tmp_path / "book", "--roster",
                                         tmp_path / "roster.csv", *argv], capsys)
    assert code == 2 and err.count("\n") == 1 and message.format(tmp=tmp_path) in err, err
    assert not (tmp_path / "book").exists()


def test_a_class_that_was_not_collected_is_graded_as_before(tmp_path, capsys):
    (tmp_path / "class" / "ana").mkdir(parents=True)
    (tmp_path / "class" / "ana" / "ex5_bounds.py").write_bytes(RIGHT5)
    code, _, err = run_cli(tracks_main, ["grade", tmp_path / "class", "--out", tmp_path / "book", "--seed", "2"],
                           capsys)
    assert code == 0, err
    row, = rows(tmp_path / "book" / "students.csv")
    assert row["late"] == "" and row["ex5"] == "4/4" and row["total"] == "4/32"
    assert not (tmp_path / "book" / "moodle_feedback.zip").exists()


def test_collect_leaves_a_students_zip_packed_and_says_so(tmp_path, capsys):
    inner = write_zip(tmp_path / "inner.zip", {"ex5_bounds.py": RIGHT5})
    download = write_zip(tmp_path / "d.zip", {"doejane_12345_1_work.zip": inner.read_bytes()})
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", tmp_path / "class"], capsys)
    assert code == 0 and "left packed: doejane_12345/work.zip" in err
    assert (tmp_path / "class" / "doejane_12345" / "work.zip").read_bytes() == inner.read_bytes()


def test_the_class_appears_whole_or_not_at_all(tmp_path, capsys, monkeypatch):
    from tracks.exercises import collect

    download = write_zip(tmp_path / "d.zip", {"doejane_12345_1_ex5_bounds.py": RIGHT5, "doejane_12345_2_b.py": b"b"})
    copies = []

    copy_at_most = collect.copy_at_most

    def failing_copy(source, target, limit):
        copies.append(target)
        if len(copies) == 2:
            raise OSError(28, "No space left on device")
        return copy_at_most(source, target, limit)

    monkeypatch.setattr(collect, "copy_at_most", failing_copy)
    code = collect.collect(download, tmp_path / "class")
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "No space left on device; nothing was written" in err, err
    assert os.listdir(tmp_path) == ["d.zip"]  # no half class, no staging folder left


def test_a_member_the_zip_cannot_give_is_listed_and_the_others_collected(tmp_path, capsys):
    download = tmp_path / "d.zip"
    with zipfile.ZipFile(download, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("doejane_12345_1_ex5_bounds.py", RIGHT5)
        archive.writestr("doejane_12345_2_broken.py", b"EXERCISE = 5\n" * 10)
    data = bytearray(download.read_bytes())
    at = data.index(b"EXERCISE = 5\n" * 10)
    data[at] ^= 0xFF  # the stored bytes no longer match their CRC-32
    download.write_bytes(bytes(data))
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", tmp_path / "class"], capsys)
    assert code == 0 and "unplaced: doejane_12345_2_broken.py (cannot be read from the download (BadZipFile" in err
    assert sorted(p.name for p in (tmp_path / "class").rglob("*") if p.is_file()) == ["collected.csv",
                                                                                     "ex5_bounds.py"]
    row = next(r for r in rows(tmp_path / "class" / "collected.csv") if r["source"] == "doejane_12345_2_broken.py")
    assert row["student"] == "" and row["file"] == ""


def test_a_file_larger_than_the_grader_reads_is_listed_not_copied(tmp_path, capsys, monkeypatch):
    from tracks.exercises import collect

    monkeypatch.setattr(collect, "MAX_COPIED_BYTES", 2**20)  # a zip that unpacks to far more than it holds
    download = tmp_path / "d.zip"
    with zipfile.ZipFile(download, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("doejane_12345_1_ex5_bounds.py", RIGHT5)
        archive.writestr("doejane_12345_2_bomb.py", b"#" * 3 * 2**20)
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", tmp_path / "class"], capsys)
    assert code == 0 and "unplaced: doejane_12345_2_bomb.py (larger than 1 MiB, more than the grader reads" in err
    assert sorted(p.name for p in (tmp_path / "class").rglob("*") if p.is_file()) == ["collected.csv",
                                                                                     "ex5_bounds.py"]


def test_collect_refuses_an_out_inside_an_unpacked_download(tmp_path, capsys):
    download = tmp_path / "download"
    download.mkdir()
    (download / "doejane_12345_1_ex5_bounds.py").write_bytes(RIGHT5)
    code, _, err = run_cli(tracks_main, ["collect", download, "--out", download / "class"], capsys)
    assert code == 2 and err.count("\n") == 1 and "is inside the download" in err
    assert [p.name for p in download.iterdir()] == ["doejane_12345_1_ex5_bounds.py"]
