"""Linux Landlock for a submission's process: what it may read, where it may write, whom it may signal.

Landlock (Linux 5.13 and later, no privileges needed) lets a process give up
access rights for itself and every process it starts, for good. The
submission's process (runner.py) calls `confine` before it imports
anything of the student's, and from then on:

- it reads only the folders Python and its packages are loaded from, the
  grader's `residual_keras` and this harness, the system's folders (/usr,
  /lib, /etc, /proc, /sys, /dev) and its own working folder, which holds a
  copy of the submission: not `solutions/`, not the other submissions, not
  the gradebook, and not the grader's `tracks` package (its exercise modules
  hold the references), wherever it is installed: a granted folder that
  holds it is granted entry by entry around it (`read_rules`);
- it writes only in its working folder (and to /dev/null);
- from Landlock ABI 4 (Linux 6.7) it can neither connect nor listen on TCP;
- from ABI 6 (Linux 6.12) it cannot signal a process outside itself and its
  children: not the grader (`os.kill(os.getppid(), SIGKILL)` would otherwise
  end the grading of the whole class), not another submission.

Where the kernel has no Landlock, or an ABI without some of these, `confine`
does what the ABI allows and says what, and the grader reports it
(docs/grading.md). Standard library only: this runs before NumPy is imported.
"""

import ctypes
import os

# System calls (the same numbers on x86-64 and arm64) and flags, from <linux/landlock.h>.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_AND_REMOVE = sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char/dir/reg/sock/fifo/block/sym
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a file (not a folder) may hold
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev",
               "/nix", "/run/current-system")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version():
    """The kernel's Landlock ABI (1, 2, ...), or 0 where there is none (not Linux, too old, turned off)."""
    if not os.uname().sysname == "Linux":
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def _handled_fs(abi):
    rights = READ | WRITE_FILE | _MAKE_AND_REMOVE
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def _beneath(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def read_rules(folders, hidden=()):
    """[(path, rights)] that grant reading beneath every folder of `folders` but nothing beneath `hidden`.

    Landlock only grants, so a granted folder that holds a hidden one is
    granted entry by entry: listing the folder (READ_DIR, so that Python's
    import system can list it), and reading every entry of it that neither is
    nor holds a hidden path, recursing into those that hold one. Paths are
    compared after resolving links (a rule on a link applies to its target).
    """
    hidden = [os.path.realpath(path) for path in hidden]
    rules, seen = [], set()

    def grant(path):
        real = os.path.realpath(path)
        if real in seen or not os.path.exists(real) or any(_beneath(real, h) for h in hidden):
            return
        seen.add(real)
        inside = [h for h in hidden if _beneath(h, real)]
        if not inside:
            rules.append((real, READ))
            return
        rules.append((real, READ_DIR))
        try:
            entries = sorted(os.listdir(real))
        except OSError:
            return
        for entry in entries:
            grant(os.path.join(real, entry))

    for folder in folders:
        grant(folder)
    return rules


def confine(read, write, *, hidden=(), write_files=("/dev/null",)):
    """Confines this process and its future children; returns what was confined, in words (a list).

    Args:
        read: folders (and files) that may be read and executed beneath;
            those that do not exist are skipped.
        write: folders beneath which everything is allowed (the working folder).
        hidden: folders that stay unreadable even where they lie beneath a
            folder of `read` (`read_rules`).
        write_files: files that may be written (not created).

    Returns [] where the kernel has no Landlock. Raises `OSError` when
    Landlock is there but refuses the rules: a sandbox that half applies is
    not one.
    """
    abi = abi_version()
    if abi < 1:
        return []
    libc = _libc()
    fs = _handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=fs, handled_access_net=(BIND_TCP | CONNECT_TCP) if abi >= 4 else 0,
                        scoped=(SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET) if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # the struct grew with the ABI
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        rules = read_rules(read, hidden) + [(path, fs) for path in write]
        rules += [(path, (READ_FILE | WRITE_FILE) & fs) for path in write_files]
        for path, rights in rules:
            try:
                descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder this machine does not have
            try:
                if not os.path.isdir(path):
                    rights &= FILE_RIGHTS
                rule = _PathBeneathAttr(allowed_access=rights & fs, parent_fd=descriptor)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                    error = ctypes.get_errno()
                    raise OSError(error, f"landlock_add_rule {path}: {os.strerror(error)}")
            finally:
                os.close(descriptor)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 or libc.syscall(_RESTRICT_SELF, ruleset, 0) < 0:
            error = ctypes.get_errno()
            raise OSError(error, f"landlock_restrict_self: {os.strerror(error)}")
    finally:
        os.close(ruleset)
    confined = ["files read", "files written"]
    if abi >= 4:
        confined.append("TCP")
    if abi >= 6:
        confined.append("signals")
    return confined


__all__ = ["SYSTEM_READ", "abi_version", "confine", "read_rules"]
