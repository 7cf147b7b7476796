"""One trainer per ``--save-dir``: a lock file holding the trainer's PID.

Why: two trainers on one directory (a forgotten background run and a new one) would overwrite
each other's checkpoints and interleave their logs without a word.  ``SAVE_DIR/.lock`` is created
with ``O_CREAT | O_EXCL`` (atomic: exactly one creator wins) and holds ``PID HOST``.  A second
trainer refuses, naming that PID.  A lock whose process is gone (``kill -9``, a crash, a reboot)
is stale and taken over with a warning.  A lock written on another host cannot be checked and is
refused with a hint to remove it by hand.  Under torchrun only rank 0 locks.
"""
from __future__ import annotations

import contextlib
import os
import socket
import stat
import time
from pathlib import Path
from typing import Callable, Optional

from nmtkit.errors import NmtkitError
from nmtkit.utils.tempfiles import pid_alive
from nmtkit.utils.textio import ensure_dir, output_error

LOCK_NAME = ".lock"

#: A lock file with no readable PID yet is "being created" for this long, then garbage.
_CREATING_GRACE_S = 5.0


class SaveDirLock:
    """``acquire()`` / ``release()`` (or a ``with`` block) around everything a trainer writes."""

    def __init__(self, save_dir: str | os.PathLike, warn: Optional[Callable[[str], None]] = None, enabled: bool = True) -> None:
        self.save_dir = Path(save_dir)
        self.path = self.save_dir / LOCK_NAME
        self.warn = warn or (lambda message: None)
        self.enabled = enabled
        self.held = False
        self._created_dir = False
        self._me = f"{os.getpid()} {socket.gethostname()}"

    def __enter__(self) -> "SaveDirLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _read(self) -> tuple[Optional[int], Optional[str]]:
        """(pid, host) written in the lock file; (None, None) when missing, empty or garbled."""
        try:
            parts = self.path.read_text(encoding="utf-8", errors="replace").split()
            return int(parts[0]), (parts[1] if len(parts) > 1 else None)
        except (OSError, ValueError, IndexError):
            return None, None

    def acquire(self) -> None:
        """Create the lock, take over a stale one, or raise :class:`NmtkitError` naming the holder."""
        if not self.enabled or self.held:
            return
        if not self.save_dir.is_dir():
            ensure_dir(self.save_dir)  # "X is a file, not a directory" rather than "File exists"
            self._created_dir = True
        host = socket.gethostname()
        for _ in range(50):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                self._refuse_not_a_lock_file()
                pid, lock_host = self._read()
                if pid is None:
                    if self._age() < _CREATING_GRACE_S:
                        time.sleep(0.1)  # another trainer is writing its PID right now
                        continue
                    self._take_over(None, f"{self.path} holds no PID; taking it over")
                elif lock_host not in (None, host):
                    raise NmtkitError(f"{self.save_dir} is in use by an nmtkit-train on host {lock_host} (pid {pid}); "
                                      f"use another --save-dir, or remove {self.path} if that run is over") from None
                elif pid == os.getpid():
                    self._take_over(pid, f"{self.path}: lock left by this process; taking it over")
                elif not pid_alive(pid):
                    self._take_over(pid, f"{self.path}: stale lock of pid {pid}, which is no longer running; taking it over")
                else:
                    raise NmtkitError(f"{self.save_dir} is in use by another nmtkit-train (pid {pid}); stop it or use "
                                      f"another --save-dir (remove {self.path} only if pid {pid} is not an nmtkit-train)") from None
                continue
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(self._me + "\n")
            except OSError as exc:  # a full disk: name the lock, and leave no PID-less lock behind
                self.path.unlink(missing_ok=True)
                raise output_error(exc, self.path) from exc
            self.held = True
            return
        raise NmtkitError(f"{self.path}: could not take the lock (another trainer keeps starting?)")

    def _refuse_not_a_lock_file(self) -> None:
        """A ``.lock`` that is no regular file (a dangling symbolic link, a directory) can never be
        read as a lock nor taken over: name it, rather than retrying until "another trainer keeps
        starting"."""
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return  # removed meanwhile: the caller retries
        if stat.S_ISLNK(mode):
            gone = "" if self.path.exists() else ", which does not exist"
            raise NmtkitError(f"{self.path} is a symbolic link to {os.readlink(self.path)}{gone}, not a lock file "
                              "nmtkit-train wrote: remove the link")
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device, pipe or socket)"
            raise NmtkitError(f"{self.path} is {what}, not a lock file nmtkit-train wrote: remove it")

    def _age(self) -> float:
        try:
            return time.time() - self.path.stat().st_mtime
        except OSError:
            return 0.0

    def _take_over(self, stale_pid: Optional[int], message: str) -> None:
        """Move the stale lock aside (one rename wins a race) and check that it was the stale one."""
        aside = self.save_dir / f"{LOCK_NAME}.stale-{os.getpid()}"
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return  # someone else moved it; the caller retries
        try:
            parts = aside.read_text(encoding="utf-8", errors="replace").split()
            moved = int(parts[0]) if parts else None
        except (OSError, ValueError):
            moved = None
        if moved != stale_pid:  # a live trainer's fresh lock: put it back, unless yet another appeared
            with contextlib.suppress(OSError):
                os.link(aside, self.path)
        else:
            self.warn(message)
        with contextlib.suppress(OSError):
            aside.unlink()

    def release(self) -> None:
        """Remove the lock if it is still ours (and the save dir if this lock made it and it stayed empty)."""
        if not self.held:
            return
        self.held = False
        pid, _ = self._read()
        if pid == os.getpid():
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self._created_dir:
            with contextlib.suppress(OSError):
                self.save_dir.rmdir()  # only succeeds when empty (a run refused before writing anything)
