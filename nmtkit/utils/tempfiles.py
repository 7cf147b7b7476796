"""Names for the hidden temporary files of atomic writes, and removal of those a killed run left.

Why: every output is written as ``.NAME.PID.<random>.tmp`` beside ``NAME`` and renamed into place
on success, so a run killed with ``kill -9`` (no cleanup possible) leaves such an entry behind
(a partial checkpoint, a half-binarized data directory).  The next write of ``NAME`` removes it.
The PID in the name tells a leftover of a dead process from the temporary file of a process that
is still writing it, which must never be touched; entries named by older nmtkit versions
(``.NAME.<random>.tmp``, no PID) are removed only once they are a day old.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from pathlib import Path
from typing import Optional

#: Temporary names from nmtkit versions without the PID are removed after this many seconds.
LEGACY_MAX_AGE_S = 24 * 3600

_RAND = r"[a-z0-9_]{8}"  # tempfile.mkstemp's random part


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (another user's counts as alive).

    A number no process can have (0, negative, beyond a C ``pid_t``: a hand-edited lock file, a
    stray ``.NAME.99999999999999999999.xxxxxxxx.tmp``) is no process, not an OverflowError."""
    if not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True  # cannot tell: keep its files
    return True


def temp_prefix(target: str | os.PathLike) -> str:
    """``mkstemp``/``mkdtemp`` prefix for a temporary ``target``: hidden, with our PID in it."""
    return f".{Path(target).name}.{os.getpid()}."


def _pattern(name: Optional[str]) -> re.Pattern:
    stem = re.escape(name) if name is not None else r".+?"
    return re.compile(rf"^\.(?:{stem})\.(?:(?P<pid>[0-9]+)\.{_RAND}\.tmp|(?P<legacy>{_RAND})\.tmp|old-(?P<oldpid>[0-9]+))$")


def stale_temps(directory: str | os.PathLike, name: Optional[str] = None) -> list[Path]:
    """Temporary entries in ``directory`` (of ``name``, or of any output) left by dead processes."""
    d = Path(directory)
    pattern = _pattern(name)
    found: list[Path] = []
    try:
        entries = list(os.scandir(d))
    except OSError:
        return found
    now = time.time()
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None:
            continue
        pid = m.group("pid") or m.group("oldpid")
        if pid is not None:
            if int(pid) == os.getpid() or pid_alive(int(pid)):
                continue
        else:
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime < LEGACY_MAX_AGE_S:
                    continue
            if not entry.is_dir(follow_symlinks=False) and not entry.is_file(follow_symlinks=False):
                continue
        found.append(d / entry.name)
    return found


def remove_stale_temps(directory: str | os.PathLike, name: Optional[str] = None) -> list[Path]:
    """Remove :func:`stale_temps`; returns what was removed (errors are ignored: best effort)."""
    removed = []
    for path in stale_temps(directory, name):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed
