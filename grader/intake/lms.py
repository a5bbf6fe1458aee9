"""What an LMS's "Download submissions" gives: a class in one flat folder (or the zip of it),
turned into one staged folder per student.

Recognised layouts (`detect` picks one from the names alone; `--lms` forces one):

- **canvas**: one flat folder, `<name>[_LATE|_late]_<user id>_<attachment id>_<file name>`
  (`<name>` is the student's last and first names, lower case, without punctuation); with
  anonymous grading `anon_<id>[_LATE]_<attachment id>_<file name>`. A file uploaded again with
  the same name comes back as `<file>-N.<ext>`: the highest N is the latest, only it is kept.
  `LATE` marks a submission Canvas counted late (the download carries no time).
- **moodle**: `<Full Name>_<participant id>_assignsubmission_file[_]/<files>` (one folder per
  student and plugin), or flat `<Full Name>_<participant id>_assignsubmission_file_<file>`;
  `..._assignsubmission_onlinetext_` (the online text) is ignored; group submissions prefix the
  name with `<Group>-`; blind marking names everyone `Participant`.
- **blackboard**: `<Assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>` plus one
  receipt `<Assignment>_<username>_attempt_<time>.txt` per attempt; only the latest attempt
  of each student is kept, and its time is the hand-in time (Blackboard writes the server's
  local time without a zone: read in the assignment's `timezone`, else this machine's).
- **folders**: one folder or .zip per student (torchgrade's own layout; not staged when it is
  a folder).

The student id is the LMS's own (Canvas user id or `anon_<id>`, Moodle participant id,
Blackboard username), always a `safe_id`. Nothing is written into the download: `stage` copies
each student's exercise files (.py, .ipynb, .zip; bounded, regular files only, read through
`grader.intake.files`) into a folder of their own under OUT, with `timestamp.txt` when the LMS
gave a time and `SIDECAR` (what the LMS said: name, late marker, notes).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from functools import partial
from pathlib import Path, PurePosixPath

from grader.errors import UsageError
from grader.intake.assignment import aware_utc
from grader.intake.files import (MAX_NAME_CHARS, MAX_PATH_CHARS, Refused, link_owners,
                                 member_name, open_regular, overlong, own_links, read_regular,
                                 zip_entry_bound)
from grader.intake.submission import (MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, MAX_ZIP_FILE_BYTES,
                                      MAX_ZIP_RATIO, SKIP_DIRS, display_path, safe_id)

log = logging.getLogger("torchgrade")

LAYOUTS = ("canvas", "moodle", "blackboard", "folders")
SIDECAR = ".torchgrade-lms.json"   # in a staged folder: what the LMS said about the student
STAGING = ".lms"                   # OUT/.lms/<student>/: the staged submissions
MAX_ENTRIES = 100_000              # names looked at in a download (folder or zip)
# A class zip's listing is parsed whole by zipfile: bounded before (an entry's header is 46
# bytes, and an LMS's names are well under 200 characters).
MAX_LISTING_BYTES_PER_ENTRY = 300
MAX_CLASS_ZIP_BYTES = 8 << 30      # a class zip, on disk
MAX_CLASS_UNPACKED = 16 << 30      # a class zip, declared uncompressed size of all entries
MAX_FILES_PER_STUDENT = 200        # files staged per student
STAGED = (".py", ".ipynb", ".zip")
LIMITS = {".py": MAX_SOURCE_BYTES, ".ipynb": MAX_NOTEBOOK_BYTES, ".zip": MAX_ZIP_FILE_BYTES}

# Ids and times are ASCII digits only ([0-9], never \d: it takes full-width and other digits
# that int() and strptime would read as ASCII ones).
CANVAS = re.compile(r"^(?P<name>[^/]+?)(?:_(?P<late>LATE|late))?_(?P<uid>[0-9]+)_(?P<att>[0-9]+)_"
                    r"(?P<file>[^/]+)$")
CANVAS_ANON = re.compile(r"^(?P<uid>anon_[A-Za-z0-9]+)(?:_(?P<late>LATE|late))?_"
                         r"(?P<att>[0-9]+)_(?P<file>[^/]+)$")
# Moodle writes a group's and a student's name with every "_" made a space
# (`assign::download_submissions`), so the first "_" of a name it wrote starts the participant
# id: a name holding "_<id>_assignsubmission_" (a student's display name made to name a
# classmate's id) is no Moodle name, and is not read as one.
MOODLE = re.compile(r"^(?P<name>[^/_]*)_(?P<uid>[0-9]+)_assignsubmission_(?P<plugin>[a-z]+)"
                    r"(?:_(?P<rest>.*))?$", re.S)
_BB_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}"
# Anchored on the FIRST `_attempt_<time>` of the name: what follows it is the student's own file
# name, which may hold `_attempt_<time>` itself (and must never be read as Blackboard's). A
# receipt is a name with nothing after its time but `.txt`.
BLACKBOARD = re.compile(rf"^(?P<prefix>(?:(?!_attempt_{_BB_TIME})[^/])+)_attempt_"
                        rf"(?P<time>{_BB_TIME})(?:_(?P<file>[^/]+)|\.txt)$")
# What reading one file of a download may raise (a folder's file, a zip member): it costs that
# file only, never the run.
READ_ERRORS = (OSError, zipfile.BadZipFile, zlib.error, RuntimeError, ValueError, EOFError,
               NotImplementedError)
REUPLOAD = re.compile(r"^(?P<base>.+)-(?P<n>[0-9]+)(?P<ext>\.[A-Za-z0-9]+)$")


@dataclass(frozen=True)
class Entry:
    """One file of a download: its path relative to the download's root, and how to read at
    most `limit` + 1 of its bytes (only regular files; see `grader.intake.files`)."""

    name: str
    size: int
    read: Callable[[int], bytes]
    path: str | None = None  # on disk (a folder's file; None for a zip member)


@dataclass
class LmsStudent:
    """One student's submission as the LMS handed it over."""

    lms_id: str
    name: str = ""
    files: dict[str, Entry] = field(default_factory=dict)  # staged relative path -> entry
    submitted_at: datetime | None = None
    late_marker: bool = False
    notes: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)  # handed in, not exercise files

    @property
    def sid(self) -> str:
        return safe_id(self.lms_id)


# --------------------------------------------------------------------------- listing


def list_download(path: Path) -> list[Entry]:
    """Every regular file of a download (a folder, walked without following links, or a zip),
    at most MAX_ENTRIES; a single top folder holding everything (the zip's own root) is
    stripped. UsageError when a zip cannot be used at all."""
    path = Path(path)
    entries = _list_zip(path) if path.is_file() else _list_folder(path)
    return _strip_root(entries)


def _list_folder(root: Path) -> list[Entry]:
    found: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or len(found) >= MAX_ENTRIES:
                continue
            full = Path(dirpath) / name
            try:
                st = os.lstat(full)
            except OSError:
                continue
            rel = display_path(full.relative_to(root))
            # Anything but a regular file is listed (and reported when staged), never read:
            # `read_regular` refuses it.
            found.append(Entry(PurePosixPath(rel).as_posix(), st.st_size,
                               partial(read_regular, full), str(full)))
    return found


def _list_zip(path: Path) -> list[Entry]:
    try:
        fd, st = open_regular(path)
    except Refused as exc:
        raise UsageError(f"{path} {exc}") from None
    except OSError as exc:
        raise UsageError(f"{path} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        if st.st_size > MAX_CLASS_ZIP_BYTES:
            raise UsageError(f"{path} is larger than {MAX_CLASS_ZIP_BYTES >> 30} GB")
        try:
            declared = zip_entry_bound(f, MAX_LISTING_BYTES_PER_ENTRY)
            if declared > MAX_ENTRIES:
                raise UsageError(f"{path} holds {declared} entries or more (by its end "
                                 f"record); the limit is {MAX_ENTRIES}")
            infos = zipfile.ZipFile(f).infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise UsageError(f"{path} is not a readable zip file ({exc})") from None
    if len(infos) > MAX_ENTRIES:
        raise UsageError(f"{path} holds {len(infos)} entries; the limit is {MAX_ENTRIES}")
    if sum(i.file_size for i in infos) > MAX_CLASS_UNPACKED:
        raise UsageError(f"{path} would unpack to more than {MAX_CLASS_UNPACKED >> 30} GB")
    found = []
    long_names = 0
    for info in infos:
        if overlong(name := member_name(info)):
            long_names += 1
            continue
        parts = PurePosixPath(name).parts
        if (info.is_dir() or not parts or ".." in parts or info.filename.startswith("/")
                or any(p in SKIP_DIRS or p.startswith(".") for p in parts)):
            continue
        found.append(Entry(PurePosixPath(*parts).as_posix(), info.file_size,
                           partial(_read_member, path, info)))
    if long_names:
        log.warning("torchgrade: warning: %s: %d member(s) with a name longer than %d "
                    "characters (or a path longer than %d) were skipped", path, long_names,
                    MAX_NAME_CHARS, MAX_PATH_CHARS)
    return found


def _read_member(path: Path, info: zipfile.ZipInfo, limit: int) -> bytes:
    packed = max(info.compress_size, 1)
    if info.file_size > (1 << 20) and info.file_size > MAX_ZIP_RATIO * packed:
        raise Refused(f"inflates {info.file_size // packed} times (a zip bomb?)")
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as f, zipfile.ZipFile(f) as z, z.open(info) as member:
        return member.read(limit + 1)


def _strip_root(entries: list[Entry]) -> list[Entry]:
    """Entries relative to the single folder holding them all, when there is one (a zip of a
    folder, a folder holding only the unpacked download). Each name is split once, and the
    common folders found in one comparison: linear in the names, however deep they nest (a
    level a pass, each re-splitting every name, cost minutes for a crafted zip)."""
    if not entries:
        return entries
    parts = [e.name.split("/") for e in entries]
    # (each entry keeps at least its file's own name)
    common = os.path.commonprefix([p[:-1] for p in parts])
    longest = max(map(len, parts))
    level = 0
    while level < len(common):
        if detect_names([common[level]]) != "folders":  # a Moodle student folder is no root
            break
        if longest == level + 2 and detect_names([p[-1] for p in parts]) == "folders":
            break  # one student's own folder (alice/x.py): alice is the student
        level += 1
    if level == 0:
        return entries
    return [Entry("/".join(p[level:]), e.size, e.read, e.path) for p, e in zip(parts, entries)]


# --------------------------------------------------------------------------- detection


def detect_names(names: list[str]) -> str:
    """The layout that the top-level names of a download follow (see the module docstring):
    the LMS whose pattern most of them match, else "folders"."""
    tops = [n.split("/", 1)[0] for n in names]
    flat = [n for n in names if "/" not in n]
    counts = {
        "moodle": sum(bool(MOODLE.match(t)) for t in tops),
        "blackboard": sum(bool(BLACKBOARD.match(t)) for t in tops),
        "canvas": sum(bool(CANVAS.match(t) or CANVAS_ANON.match(t)) for t in flat),
    }
    best = max(counts, key=lambda k: counts[k])
    if counts[best] == 0:
        return "folders"
    # Canvas names are the loosest pattern: most of the flat files must follow it.
    if best == "canvas" and counts["canvas"] * 2 < len(flat):
        return "folders"
    return best


def detect(path: Path) -> str:
    """The layout of the download at `path` (a folder or a zip), from names only."""
    path = Path(path)
    if path.is_dir():
        names = sorted(n for n in os.listdir(path)
                       if not n.startswith(".") and n not in SKIP_DIRS)
        # A folder's name ends in "/": only files can be Canvas's (flat) names.
        layout = detect_names([n + "/" if (path / n).is_dir() else n for n in names])
        if layout == "folders" and len(names) == 1 and (path / names[0]).is_dir() \
                and not (path / names[0]).is_symlink():
            inner = detect(path / names[0])  # the download unpacked one level down
            return inner
        return layout
    return detect_names([e.name for e in list_download(path)])


# --------------------------------------------------------------------------- parsing


def parse(entries: list[Entry], layout: str, zone: tzinfo | None = None) -> list[LmsStudent]:
    """The students of a download in `layout`; files that follow no name of it are reported
    on the class (UsageError when nothing does). `zone`: that of the LMS's times that carry
    none (Blackboard's; None: this machine's local zone)."""
    parsers: dict[str, Callable[..., None]] = {
        "canvas": _parse_canvas, "moodle": _parse_moodle,
        "blackboard": partial(_parse_blackboard, zone=zone), "folders": _parse_folders}
    parser = parsers[layout]
    students: dict[str, LmsStudent] = {}
    ignored: list[str] = []
    parser(entries, students, ignored)
    if ignored:
        shown = ", ".join(ignored[:5]) + (f" and {len(ignored) - 5} more" if len(ignored) > 5
                                          else "")
        log.warning(
            "torchgrade: warning: %d file(s) of the %s download follow none of its names and "
            "were not graded: %s", len(ignored), layout, shown)
    if not students:
        raise UsageError(f"no student submission found in this {layout} download")
    return sorted(students.values(), key=lambda s: s.sid)


def _student(students: dict[str, LmsStudent], lms_id: str, name: str = "") -> LmsStudent:
    found = students.setdefault(lms_id, LmsStudent(lms_id=lms_id, name=name))
    if name and not found.name:
        found.name = name
    return found


def _add(student: LmsStudent, relpath: str, entry: Entry, original: str) -> None:
    """Keep `entry` as the student's file `relpath` (exercise files only; the others are
    listed)."""
    parts = [p for p in PurePosixPath(relpath).parts if p not in ("", ".", "..", "/")]
    if not parts or any(p.startswith(".") for p in parts):
        student.others.append(original)
        return
    relpath = "/".join(parts)
    if not relpath.lower().endswith(STAGED):
        student.others.append(PurePosixPath(relpath).name)
        return
    if len(student.files) >= MAX_FILES_PER_STUDENT:
        student.notes.append(f"{original} was not looked at: more than "
                             f"{MAX_FILES_PER_STUDENT} files")
        return
    student.files[relpath] = entry


def _parse_canvas(entries, students, ignored) -> None:
    # (user id, file name without -N, case folded) -> its versions: the name a re-upload gets
    # may differ from the first one's in case only, it is still the same file.
    uploads: dict[tuple[str, str], list[tuple[tuple[int, str], tuple[int, str], str, str,
                                              Entry]]] = {}
    for entry in entries:
        match = ("/" not in entry.name) and (CANVAS_ANON.match(entry.name)
                                             or CANVAS.match(entry.name))
        if not match:
            ignored.append(entry.name)
            continue
        groups = match.groupdict()
        student = _student(students, groups["uid"], groups.get("name") or "")
        if groups["late"]:
            student.late_marker = True
        base, n = groups["file"], "0"
        again = REUPLOAD.match(base)
        if again:
            base, n = again["base"] + again["ext"], again["n"]
        uploads.setdefault((groups["uid"], base.casefold()), []).append(
            (_number(n), _number(groups["att"]), groups["file"], base, entry))
    for (uid, _), versions in uploads.items():
        student = students[uid]
        # the highest -N, then the highest attachment id (Canvas numbers them in upload order)
        versions.sort(key=lambda v: (v[0], v[1]))
        number, _, name, base, entry = versions[-1]
        if len(versions) > 1:
            older = ", ".join(v[2] for v in versions[:-1])
            student.notes.append(f"{name} is the latest upload of {base} (Canvas numbers "
                                 f"re-uploads -1, -2, ...): graded; earlier {older} ignored")
        _add(student, base if number[1] != "0" else name, entry, entry.name)


def _number(digits: str) -> tuple[int, str]:
    """An ASCII digit string as a key that orders like its number, however long (int() refuses
    strings over 4300 digits)."""
    digits = digits.lstrip("0") or "0"
    return (len(digits), digits)


def _parse_moodle(entries, students, ignored) -> None:
    for entry in entries:
        top, _, inner = entry.name.partition("/")
        match = MOODLE.match(top)
        # folder form: ..._file_/<inner> (the folder's name ends there); flat form:
        # ..._file_<file>
        if not match or (inner and match["rest"]):
            ignored.append(entry.name)
            continue
        name, group = match["name"], ""
        if "-" in name and name.split("-", 1)[0].strip():
            # A group submission: "<Group>-<Full Name>" (names may hold hyphens too: the
            # group is only reported, never used as an id).
            group = name.split("-", 1)[0]
        student = _student(students, match["uid"], name)
        if group and not any("group" in n for n in student.notes):
            student.notes.append(f"Moodle names this submission \"{name}\": if it is a group "
                                 f"submission (group {group}), it is graded for this participant")
        if match["plugin"] != "file":
            student.others.append(f"{top}/{inner}".rstrip("/") + " (Moodle "
                                  f"{match['plugin']}: not graded)")
            continue
        relpath = inner if inner else (match["rest"] or "")
        if not relpath:
            ignored.append(entry.name)
            continue
        _add(student, relpath, entry, entry.name)


def _parse_blackboard(entries, students, ignored, zone: tzinfo | None = None) -> None:
    attempts: dict[str, dict[str, list[tuple[str, Entry]]]] = {}
    receipts: dict[tuple[str, str], Entry] = {}
    for entry in entries:
        match = "/" not in entry.name and BLACKBOARD.match(entry.name)
        if not match:
            ignored.append(entry.name)
            continue
        per = attempts.setdefault(match["prefix"], {}).setdefault(match["time"], [])
        if match["file"] is None:
            receipts[(match["prefix"], match["time"])] = entry
        else:
            per.append((match["file"], entry))
    for prefix, (username, notes) in _blackboard_users(attempts, receipts).items():
        student = _student(students, username)
        student.notes.extend(notes)
        times = attempts[prefix]
        latest = _latest_attempt(student, times, zone)
        if len(times) > 1:
            student.notes.append(f"Blackboard holds {len(times)} attempts: the latest "
                                 f"({latest}) is graded")
        for name, entry in times[latest]:
            _add(student, name, entry, entry.name)
        if not times[latest]:
            student.notes.append(f"the latest Blackboard attempt ({latest}) holds no file")


def _latest_attempt(student: LmsStudent, times: dict[str, list], zone: tzinfo | None) -> str:
    """The latest of a student's attempt times whose date exists (its moment, in `zone`,
    becomes the student's hand-in time); a time that is no date (month 99, February 30)
    costs only this student: a note, and no hand-in time when no attempt has a real one."""
    moments: dict[str, datetime] = {}
    for time in times:
        try:
            moments[time] = aware_utc(datetime.strptime(time, "%Y-%m-%d-%H-%M-%S"), zone)
        except (ValueError, OverflowError, OSError):
            student.notes.append(f"a Blackboard attempt is dated {time}, which is no date: "
                                 "its time is not used")
    latest = max(moments) if moments else max(times)
    student.submitted_at = moments.get(latest)
    return latest


def _blackboard_users(attempts: dict[str, dict], receipts: dict[tuple[str, str], Entry]
                      ) -> dict[str, tuple[str, list[str]]]:
    """{`<Assignment>_<username>` prefix: (username, notes)}. The username comes from the file
    name alone: what follows the assignment every prefix shares. A receipt ("Name: First Last
    (username)") may only say where, within its own file name, the username starts (when the
    names alone cannot tell: a single student, a shared start such as `a_`); a receipt naming
    anyone else is ignored, with a note. Two prefixes never become one username: then each is
    graded under its whole prefix."""
    assignment = _common_prefix(list(attempts))
    users: dict[str, tuple[str, list[str]]] = {}
    for prefix, times in attempts.items():
        username = prefix[len(assignment):] if assignment else prefix.rsplit("_", 1)[-1]
        notes: list[str] = []
        receipt = receipts.get((prefix, max(times)))
        claimed = _receipt_user(receipt) if receipt is not None else None
        if claimed and claimed != username:
            if prefix.endswith("_" + claimed) and claimed.endswith("_" + username):
                username = claimed
            else:
                notes.append(f"the Blackboard receipt {receipt.name} names the user "  # type: ignore[union-attr]
                             f"{claimed!r}, but its file name is {username!r}'s: graded as "
                             f"{username!r}, the receipt's claim ignored")
        users[prefix] = (username or prefix, notes)
    count: dict[str, int] = {}
    for username, _ in users.values():
        count[username] = count.get(username, 0) + 1
    for prefix, (username, notes) in users.items():
        if count[username] > 1:
            users[prefix] = (prefix, [*notes, f"another Blackboard name could also be user "
                                      f"{username!r}: graded under the whole name {prefix!r}"])
    return users


def _common_prefix(prefixes: list[str]) -> str:
    """`<Assignment>_` shared by every `<Assignment>_<username>` (empty when there is only one:
    then the username is the receipt's, or the last `_` part)."""
    if len(prefixes) < 2:
        return ""
    common = os.path.commonprefix(prefixes)
    return common[:common.rfind("_") + 1] if "_" in common else ""


def _receipt_user(receipt: Entry) -> str | None:
    """The username a Blackboard receipt names ("Name: First Last (username)"), if any (never
    raises: an unreadable receipt names nobody)."""
    try:
        text = receipt.read(64 << 10)[:64 << 10].decode("utf-8", "replace")
    except READ_ERRORS:
        return None
    match = re.search(r"^Name:.*\(([^()\s]+)\)\s*$", text, re.M)
    return match[1] if match else None


def _parse_folders(entries, students, ignored) -> None:
    """A class zip in torchgrade's own layout: one folder (or .zip) per student."""
    for entry in entries:
        top, _, inner = entry.name.partition("/")
        if not inner:
            if top.lower().endswith(".zip"):  # a student's own zip: alice.zip
                _add(_student(students, top[:-4]), top, entry, entry.name)
            else:
                ignored.append(entry.name)
            continue
        if inner == "timestamp.txt":
            try:
                from grader.intake.assignment import parse_timestamp

                moment = parse_timestamp(entry.read(4096)[:4096].decode("utf-8"))
            except READ_ERRORS:
                moment = None
            _student(students, top).submitted_at = moment
            continue
        _add(_student(students, top), inner, entry, entry.name)


# --------------------------------------------------------------------------- staging


def stage(students: list[LmsStudent], folder: Path,
          keep: Callable[[str], bool] | None = None) -> list[tuple[str, Path]]:
    """Copy each student's files into `folder/<student id>/` (emptied first, whatever an
    earlier run left there; nothing else is written anywhere), with `timestamp.txt` and
    `SIDECAR`; returns (student id, folder) pairs. A file that cannot be read or written (a
    name that is both a file and a folder, `timestamp.txt` among a student's folders) is not
    copied: the sidecar's notes say why; it costs that student only, never the run.

    With `keep` (a shard of a job array: other shards stage into the same folder at once),
    only the students it keeps are staged, and only their own folders are emptied; who owns a
    hard-linked file is still decided over the whole download, as in an unsharded run."""
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink(missing_ok=True)
    elif folder.exists() and keep is None:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=keep is not None)
    # A hard-linked file of the download is read as the work of whoever had it first, as in
    # a class folder (`grader.intake.files.class_hard_links`); the others' copies are refused.
    owners = link_owners((s.sid, e.path) for s in students for e in s.files.values() if e.path)
    staged: list[tuple[str, Path]] = []
    for student in students:
        if keep is not None and not keep(student.sid):
            continue
        home = folder / student.sid
        try:
            if keep is not None:
                clear_home(home)
            home.mkdir()
        except OSError as exc:
            log.warning("torchgrade: warning: %s could not be staged (%s): not graded",
                        student.sid, exc.strerror or exc)
            continue
        notes = list(student.notes)
        with own_links(owners.get(student.sid, ())):
            for relpath, entry in sorted(student.files.items()):
                why = _stage_file(home, relpath, entry)
                if why:
                    notes.append(why)
        if student.submitted_at is not None:
            try:
                (home / "timestamp.txt").write_text(student.submitted_at.isoformat() + "\n",
                                                    encoding="utf-8")
            except OSError as exc:  # (never a student's: `_stage_file` keeps the name free)
                notes.append(f"the hand-in time could not be recorded ({exc.strerror})")
        if student.others:
            shown = ", ".join(student.others[:20])
            notes.append(f"also handed in (not exercise files, not graded): {shown}"
                         + (f" and {len(student.others) - 20} more"
                            if len(student.others) > 20 else ""))
        write_sidecar(home, lms_id=student.lms_id, name=student.name,
                      late_marker=student.late_marker, notes=notes)
        staged.append((student.sid, home))
    return staged


def clear_home(home: Path) -> None:
    """Remove what an earlier run staged at `home` (a folder, or anything else named so)."""
    if home.is_symlink() or (home.exists() and not home.is_dir()):
        home.unlink()
    elif home.exists():
        shutil.rmtree(home)


def _stage_file(home: Path, relpath: str, entry: Entry) -> str | None:
    """Copy `entry` to `home/relpath`, bounded; the note for the student when there is one
    (why it was not copied, or where it was), else None."""
    note = None
    parts = PurePosixPath(relpath).parts
    if parts[0].casefold() == "timestamp.txt":
        # torchgrade's own file in a submission folder: the hand-in time must always fit, and
        # the student's work is kept under another folder name.
        relpath = "/".join(("timestamp.txt (folder)", *parts[1:]))
        note = (f"{entry.name} lies in a folder named timestamp.txt (the name of the hand-in "
                f"time's file): copied as {relpath}")
    suffix = PurePosixPath(relpath).suffix.lower()
    limit = LIMITS.get(suffix, MAX_SOURCE_BYTES)
    try:
        data = entry.read(limit)[:limit + 1]
    except READ_ERRORS as exc:
        return f"{entry.name} could not be read from the download ({exc}): it was not graded"
    target = home / relpath
    try:
        if not target.resolve().is_relative_to(home.resolve()):  # never outside its folder
            return (f"{entry.name} has a name that leads outside the submission: it was not "
                    "graded")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except (OSError, RuntimeError) as exc:  # a file and a folder of the same name
        return (f"{entry.name} could not be copied ({getattr(exc, 'strerror', None) or exc}; "
                "another file of the submission has the same name as a folder, or the "
                "other way round): it was not graded")
    return note


def write_sidecar(home: Path, *, lms_id: str = "", name: str = "", late_marker: bool = False,
                  notes: Sequence[str] = ()) -> None:
    (Path(home) / SIDECAR).write_text(json.dumps({
        "lms_id": lms_id, "name": name, "late_marker": late_marker, "notes": list(notes)}),
        encoding="utf-8")


@dataclass
class Sidecar:
    """What `stage` recorded about a student (empty for a folder that is not staged)."""

    name: str = ""
    late_marker: bool = False
    notes: list[str] = field(default_factory=list)


def staged_names(out: Path) -> dict[str, str]:
    """The name the LMS gave each student staged in `out` (by student id; those it named)."""
    try:
        homes = sorted(p for p in (Path(out) / STAGING).iterdir()
                       if p.is_dir() and not p.is_symlink())
    except OSError:
        return {}
    return {home.name: name for home in homes if (name := read_sidecar(home).name)}


def read_sidecar(folder: Path) -> Sidecar:
    """The sidecar of a staged folder (never raises: a folder without one gets an empty one)."""
    try:
        data = json.loads(read_regular(Path(folder) / SIDECAR, 1 << 20).decode("utf-8"))
        return Sidecar(name=str(data.get("name", "")), late_marker=bool(data.get("late_marker")),
                       notes=[str(n) for n in data.get("notes", [])][:50])
    except (OSError, ValueError, AttributeError):
        return Sidecar()
