"""`python -m tracks collect DOWNLOAD --out CLASS`: a platform's bulk download as one folder per student.

A learning platform hands the instructor every submission at once, each file
named after its student (docs/grading.md, "Collecting the hand-in", says
where each layout is documented):

- Canvas ("Download Submissions"): every file in one folder, named
  `<name>_<LATE_?><user id>_<attachment id>_<original name>`, <name> the
  student's sortable name in lower case with its punctuation and spaces
  removed (`doejane_12345_678901_ex1_residual_layer.py`). Canvas reads its
  own names back (re-uploaded feedback) by taking the first two parts of the
  name, split at `_`, that are all digits: the user id and the attachment id.
  So does `collect`.
- Moodle ("Download all submissions"): one folder per student and plugin,
  `<full name>_<participant id>_assignsubmission_file/<original name>`
  (Moodle >= 3.1), or, with "download submissions in folders" off, flat
  files `<full name>_<participant id>_assignsubmission_file_<original name>`.
  Moodle reads its own names back (feedback files) by splitting each part of
  a path at its first four `_`: full name, participant id, plugin type,
  plugin name, the rest. So does `collect`. The name holds no `_` (Moodle
  writes each one as a space).
- any other platform: a regular expression with named groups (`student`,
  and optionally `id`, `late`, `file`) matched against each file's path in
  the download, as nbgrader's zip_collect does.

The class is written as CLASS/<name>_<id>/<files> (Moodle's own prefix; the
same form for Canvas), with CLASS/collected.csv: a row per file, its student
folder, the name and id as the platform wrote them, whether it was late, the
file as collected and its path in the download. A file that fits no student
goes to CLASS/.unplaced/ (hidden: the grader skips it), listed on stderr and
in collected.csv with no student. A zip a student uploaded stays packed.
Everything is checked before anything is written, and CLASS appears whole or
not at all.
"""

import csv
import dataclasses
import os
import pathlib
import re
import shutil
import stat
import sys
import tempfile
import unicodedata
import zipfile
import zlib

from tracks.common.option_ranges import out_problem
from tracks.exercises.submissions import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, shell_word

LAYOUTS = ("canvas", "moodle", "auto")
PATTERN_GROUPS = ("student", "id", "late", "file")
COLLECTED = "collected.csv"
UNPLACED = ".unplaced"
COLUMNS = ("student", "name", "id", "late", "file", "source", "layout", "why")
# The most of one file copied into the class: more than the grader reads of any file, so that a file it would
# refuse reaches it (and its student's grade says why), and a zip that unpacks to gigabytes writes no more.
MAX_COPIED_BYTES = 2 * max(MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES)

# Canvas: [name_][LATE_]<user id>_[<attachment id>_]<original name> (the name is empty under anonymous grading;
# a text entry or a URL has no attachment id: doejane_12345_text.html). Canvas writes the marker LATE and then
# lower-cases the whole prefix in some versions: either case is the marker.
CANVAS = re.compile(r"(?:(?P<name>[^\W_]+?)_)??(?:(?P<late>late)_)?(?P<id>\d+)_(?:(?P<attachment>\d+)_)?(?P<file>.+)",
                    re.IGNORECASE | re.DOTALL)


class CollectError(ValueError):
    """Input that cannot be collected: one line for the user (exit 2), said before anything is written."""


@dataclasses.dataclass
class Member:
    """One file of the download: its path there (as the platform wrote it) and how to read it."""

    source: str  # the path in the download, '/'-separated
    read: object  # a function that returns an open binary file
    why_not: str = ""  # a reason it cannot be collected whatever its name (a link, a path that leaves the folder)
    copy: bool = True  # False: listed, never read (a link is not followed, a pipe never opened)


@dataclasses.dataclass
class Placed:
    """Where one member goes: its student (None: unplaced), the name and id as the platform wrote them."""

    member: Member
    student: str = None
    name: str = ""
    id: str = ""
    late: str = ""  # "yes", "no", or "" where the layout says nothing (Moodle)
    file: str = ""  # the path under the student's folder
    why: str = ""  # why it is unplaced


def nfc(text):
    return unicodedata.normalize("NFC", text)


def _zip_name(info):
    """A zip member's name as its writer meant it: UTF-8 also where the zip's flag says cp437 but it decodes."""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            name = name.encode("cp437").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    return name


def _leaves(path):
    """True when a path in the download is absolute or climbs out of it (`..`)."""
    parts = path.replace("\\", "/").split("/")
    return path.startswith(("/", "\\")) or re.match(r"[A-Za-z]:[\\/]", path) is not None or ".." in parts


def members(download):
    """Every file of the download (a zip, or the folder it unpacks to), in a stable order; `CollectError` when it
    is neither."""
    download = pathlib.Path(download)
    if download.is_dir():
        found = []
        for folder, folders, files in os.walk(download):
            folders.sort()
            for name in sorted(files + [f for f in folders if os.path.islink(os.path.join(folder, f))]):
                path = pathlib.Path(folder, name)
                # a name's bytes that are not UTF-8 as U+FFFD: collected.csv is UTF-8, and a \xNN would split at \
                source = os.fsencode(path.relative_to(download).as_posix()).decode("utf-8", errors="replace")
                why = ("a link: not followed" if path.is_symlink()
                       else "" if path.is_file() else "not a regular file: not read")
                if not why and not os.access(path, os.R_OK):
                    raise CollectError(f"{path}: cannot be read (permission denied); make it readable (chmod u+r), "
                                       f"or move it out of the download")
                found.append(Member(source, (lambda p=path: open(p, "rb")), why, copy=not why))
        return found
    if not download.is_file():
        raise CollectError(f"no such download: {download} (give the platform's zip, or the folder it unpacks to)")
    try:
        archive = zipfile.ZipFile(download)
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError) as error:
        raise CollectError(f"{download}: not a zip ({error}); give the platform's zip, or the folder it unpacks "
                           f"to") from None
    found = []
    for info in infos:
        if info.is_dir():
            continue
        source = _zip_name(info)
        kind = (info.external_attr >> 16) & 0o170000
        link = kind == stat.S_IFLNK
        why = ("a link: not followed" if link
               else "its path leaves the download (.. or absolute): not written outside" if _leaves(source) else "")
        found.append(Member(source, (lambda i=info: archive.open(i)), why, copy=not link))
    return found


def _canvas(member):
    name = nfc(member.source.replace("\\", "/").rsplit("/", 1)[-1])
    found = CANVAS.fullmatch(name)
    if found is None:
        return Placed(member, why="not Canvas's <name>_<user id>_<attachment id>_<file>")
    return Placed(member, name=found["name"] or "", id=found["id"], late="yes" if found["late"] else "no",
                  file=found["file"])


def _moodle(member):
    """As Moodle's feedback import reads a path (importziplib.php): the first part that splits into full name,
    a numeric participant id, assignsubmission and a plugin name; the rest of that part and the parts below it
    are the file."""
    parts = nfc(member.source.replace("\\", "/")).split("/")
    for index, part in enumerate(parts):
        info = part.split("_", 4)
        if len(info) < 4 or not info[1].isdigit() or info[2] != "assignsubmission" or not info[3]:
            continue
        rest = [piece for piece in [info[4] if len(info) == 5 else "", *parts[index + 1:]] if piece]
        if not rest:
            break
        return Placed(member, name=info[0], id=info[1], file="/".join(rest))
    return Placed(member, why="not Moodle's <full name>_<participant id>_assignsubmission_<plugin>[/_]<file>")


def _pattern(regex):
    def place(member):
        found = regex.match(nfc(member.source.replace("\\", "/")))
        if found is None or not found["student"]:
            return Placed(member, why="does not match --pattern (or its student group is empty)")
        groups = found.groupdict()
        late = "" if "late" not in groups else "yes" if groups["late"] else "no"
        file = groups.get("file") or member.source.replace("\\", "/").rsplit("/", 1)[-1]
        return Placed(member, name=found["student"], id=groups.get("id") or "", late=late, file=nfc(file))

    return place


def compile_pattern(text):
    """The compiled `--pattern`; `CollectError` for one that does not compile or names no `student` group."""
    try:
        regex = re.compile(text)
    except re.error as error:
        raise CollectError(f"--pattern {text!r} does not compile: {error}") from None
    unknown = sorted(set(regex.groupindex) - set(PATTERN_GROUPS))
    if "student" not in regex.groupindex:
        raise CollectError(f"--pattern {text!r} has no (?P<student>...) group: it names the student of each file "
                           f"(optional groups: id, late, file)")
    if unknown:
        raise CollectError(f"--pattern {text!r}: no group {unknown[0]!r}; the groups are {', '.join(PATTERN_GROUPS)}")
    return regex


def detect(found):
    """The layout most files fit ("canvas" or "moodle"), or None when neither fits any."""
    counts = {name: sum(not member.why_not and not place(member).why for member in found)
              for name, place in (("moodle", _moodle), ("canvas", _canvas))}
    best = max(counts, key=counts.get)
    return best if counts[best] else None


def _folder_name(name, identifier):
    """A student's folder: <name>_<id> (Moodle's own prefix), the id alone without a name, the name alone without
    an id; no separator, no control character, no leading dot (the grader skips hidden folders)."""
    clean = re.sub(r"[\x00-\x1f\x7f/\\]", "-", nfc(name)).strip().lstrip(".").strip()
    return "_".join(part for part in (clean, identifier) if part) or "student"


def _safe_parts(path):
    """A relative path's parts without what could leave the folder (`..`, `.`, empty parts, a drive)."""
    parts = [re.sub(r"[\x00-\x1f\x7f]", "-", part) for part in re.split(r"[\\/]", path)]
    return [part for part in parts if part not in ("", ".", "..") and not re.fullmatch(r"[A-Za-z]:", part)]


def _unique(taken, folder, parts):
    """A path under `folder` (a tuple of parts) that no other file took: -2, -3, ... before the extension."""
    parts = parts or ["unnamed"]
    candidate, number = (folder, *parts), 2
    while candidate in taken:
        stem, dot, suffix = parts[-1].partition(".") if not parts[-1].startswith(".") else (parts[-1], "", "")
        candidate = (folder, *parts[:-1], f"{stem}-{number}{dot}{suffix}")
        number += 1
    taken.add(candidate)
    return candidate


def _undetected(download, found):
    """Why no layout fits the download's files, in one line: the files themselves where none can be collected
    whatever its name (each a link, a path that leaves the download), else the layouts' names."""
    readable = [member for member in found if not member.why_not]
    if not readable:
        return (f"{download}: no file in it can be collected ({found[0].source!r} is {found[0].why_not}"
                f"{f', and {len(found) - 1} more' if len(found) > 1 else ''}): download the submissions again, "
                f"or unpack it and copy what the links point to (cp -rL)")
    return (f"{download}: its files fit neither Canvas's nor Moodle's layout (first: {readable[0].source!r}); give "
            f"--pattern REGEX with a (?P<student>...) group")


def plan(download, layout="auto", pattern=None):
    """(layout used, [Placed]) for every file of the download; `CollectError` when nothing can be placed."""
    found = members(download)
    if not found:
        raise CollectError(f"{download} holds no file")
    if pattern is not None:
        layout, place = "pattern", _pattern(compile_pattern(pattern))
    else:
        if layout == "auto":
            layout = detect(found)
            if layout is None:
                raise CollectError(_undetected(download, found))
        place = {"canvas": _canvas, "moodle": _moodle}[layout]
    placed = []
    for member in found:
        entry = Placed(member, why=member.why_not) if member.why_not else place(member)
        if entry.why:
            entry.student = None
        else:
            entry.student = _folder_name(entry.name, entry.id)
            if not _safe_parts(entry.file):
                entry.student, entry.why = None, "no file name after the student's prefix"
        placed.append(entry)
    if not any(entry.student for entry in placed):
        raise CollectError(f"{download}: no file fits the {layout} layout (first: {found[0].source!r}, "
                           f"{placed[0].why}); give --layout or --pattern")
    return layout, placed


def copy_at_most(source, copy, limit):
    """Copies `source` into `copy` (binary files); False, having stopped, when it holds more than `limit` bytes
    (what a zip's entry says of its size may lie: its bytes are counted as they come)."""
    copied = 0
    while chunk := source.read(2**20):
        copied += len(chunk)
        if copied > limit:
            return False
        copy.write(chunk)
    return True


def write_class(out, layout, placed):
    """Copies every placed file into `out` (new), with collected.csv; the unplaced ones into out/.unplaced/."""
    out = pathlib.Path(out)
    taken = set()
    rows = []
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.collecting-", dir=out.parent))
    try:
        for entry in placed:
            if entry.student:
                target = _unique(taken, entry.student, _safe_parts(entry.file))
            else:
                target = _unique(taken, UNPLACED, _safe_parts(entry.member.source))
            entry.file = "/".join(target) if entry.member.copy else ""  # a link is listed, never followed
            if entry.member.copy:
                path = staging.joinpath(*target)
                path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with entry.member.read() as source, open(path, "wb") as copy:
                        whole = copy_at_most(source, copy, MAX_COPIED_BYTES)
                    why = "" if whole else (f"larger than {MAX_COPIED_BYTES / 2**20:.0f} MiB, more than the grader "
                                            f"reads: not copied")
                except (zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError, zlib.error) as error:
                    why = f"cannot be read from the download ({type(error).__name__}: {str(error)[:120]})"
                if why:  # encrypted, corrupt, an unknown compression, too large: listed, not kept
                    path.unlink(missing_ok=True)
                    entry.student, entry.file, entry.why = None, "", why
            rows.append([entry.student or "", entry.name, entry.id, entry.late, entry.file, entry.member.source,
                         layout, entry.why])
        with open(staging / COLLECTED, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows(rows)
        mask = os.umask(0)
        os.umask(mask)
        staging.chmod(0o777 & ~mask)  # mkdtemp's folder is private; the class is an ordinary folder
        os.replace(staging, out)  # an empty --out is replaced: the class appears whole or not at all
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return rows


def collect(download, out, layout="auto", pattern=None):
    """The `collect` command: 0 when CLASS is written, 2 (one line) for input it cannot collect, 1 (one line)
    when it cannot write CLASS."""
    download, out = pathlib.Path(download), pathlib.Path(out)
    try:
        if pattern is not None and layout != "auto":
            raise CollectError("give --layout or --pattern, not both: a pattern is a layout of its own")
        if not download.exists():
            raise CollectError(f"no such download: {download} (give the platform's zip, or the folder it unpacks to)")
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise CollectError(f"--out {out} exists and is not an empty folder: choose a new one, or delete it")
        if download.is_dir() and out.resolve().is_relative_to(download.resolve()):
            raise CollectError(f"--out {out} is inside the download {download}: choose a folder outside it")
        problem = out_problem(out)
        if problem:
            raise CollectError(problem)
        layout, placed = plan(download, layout, pattern)
        out.parent.mkdir(parents=True, exist_ok=True)
    except CollectError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    try:
        write_class(out, layout, placed)
    except OSError as error:  # a full disk, a folder it may not write: nothing is left half written
        print(f"error: cannot write {out}: {error.strerror or error}; nothing was written", file=sys.stderr,
              flush=True)
        return 1
    students = sorted({entry.student for entry in placed if entry.student})
    unplaced = [entry for entry in placed if not entry.student]
    late = sorted({entry.student for entry in placed if entry.late == "yes"})
    packed = [entry.file for entry in placed if entry.student and entry.file.lower().endswith(".zip")]
    for entry in unplaced:
        where = f"in {out / entry.file}" if entry.file else "not copied"  # a link, a file the zip cannot give
        print(f"unplaced: {entry.member.source} ({entry.why}): {where}", file=sys.stderr)
    if packed:
        print(f"left packed: {', '.join(packed)} (a student's zip is not unpacked: unpack it into that student's "
              f"folder if it holds their work)", file=sys.stderr)
    lateness = (f"{len(late)} late" if layout != "moodle"
                else "Moodle's download says nothing of lateness: its grading worksheet does, given to grade as "
                     "--roster")
    print(f"collected {len(placed) - len(unplaced)} files of {len(students)} students into {out}/<student>/ "
          f"({layout} layout; {lateness}), listed in {out / COLLECTED}"
          + (f"; {len(unplaced)} file{'s' * (len(unplaced) != 1)} could not be placed, in {out / UNPLACED}/"
             if unplaced else "")
          + f". Next: python -m tracks grade {shell_word(out)} --out BOOK", file=sys.stderr, flush=True)
    return 0


@dataclasses.dataclass(frozen=True)
class Collected:
    """What collected.csv says of a class: {student folder: (name, id, layout)} and {file: late}."""

    students: dict
    late: dict


def read_collected(folder):
    """CLASS/collected.csv as a `Collected`, or None when the class was not collected; `CollectError` for a file
    that cannot be read."""
    path = pathlib.Path(folder) / COLLECTED
    if not path.is_file():
        return None
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise CollectError(f"{path}: cannot be read ({error}); collect the download again") from None
    if rows and not set(COLUMNS) <= set(rows[0]):
        raise CollectError(f"{path}: not collect's file (its columns: {', '.join(rows[0])}); collect the "
                           f"download again, or delete it")
    students, late = {}, {}
    for row in rows:
        if row["student"]:
            students.setdefault(row["student"], (row["name"], row["id"], row["layout"]))
            relative = row["file"]
            late[relative] = row["late"]
    return Collected(students, late)


__all__ = ["COLLECTED", "Collected", "CollectError", "LAYOUTS", "collect", "compile_pattern", "copy_at_most",
           "members", "plan", "read_collected", "write_class"]
