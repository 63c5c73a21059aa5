"""What keeps a run directory whole while a run uses it: the lock, Ctrl-C, and a test hook.

``RunLock``: one ``train`` (new or ``--resume``) per run directory. The lock file ``OUT/run.lock`` holds
the holder's process id, host name, process start time and boot id (JSON), and the holder keeps an
exclusive ``flock`` on it, which the kernel drops when the process ends, however it ends (SIGKILL
included). A second run of the folder is refused with one line naming the holder. A lock file left by
a process that has ended (its ``flock`` is gone and, on this host, its pid is not running or is another
process now) is stale: it is taken over, with a note. A lock file written on another host whose
``flock`` is free is not taken over (that host's process cannot be checked from here): the message
says to delete it once that run has ended. The lock file is removed when the run ends (any exit but a
kill).

``Interrupts``: Ctrl-C (SIGINT) while a run trains. Outside a checkpoint's write or read it raises
``KeyboardInterrupt`` at once, as Python does; inside one (``deferred()``) it is remembered and raised
when the checkpoint is complete, so that a checkpoint is whole or absent, never half of one taken for
whole (orbax turns an interrupt inside its reads into an ordinary error otherwise). A backstop thread,
woken by the signal itself even while the main thread is inside a long C call (an XLA compilation),
exits the process with code 130 if it is still running ``GRACE_S`` seconds (``$DYGNEX_INTERRUPT_GRACE``)
after the Ctrl-C, or at once on a second Ctrl-C; the last complete checkpoint is intact either way. A
Ctrl-C that XLA's compiler notices is re-delivered until the compilation has returned (an exception
raised inside it crashes the interpreter at exit). The backstop is off in interactive sessions (a
Python prompt, IPython, Jupyter), where a second Ctrl-C raises instead.

``pause_point``: a fault-injection hook for tests, inert unless ``DYGNEX_TEST_PAUSE`` is set.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from .errors import UserError

try:
    import fcntl
except ImportError:  # not POSIX: the lock file is checked by its contents alone
    fcntl = None

LOCK_FILE = "run.lock"
GRACE_S = 5.0  # seconds a Ctrl-C may take to end a run before the backstop exits the process
GRACE_ENV = "DYGNEX_INTERRUPT_GRACE"  # ... set otherwise (e.g. for checkpoints that take minutes to write)
PAUSE_ENV = "DYGNEX_TEST_PAUSE"


# ------------------------------------------------------------------------------------------ the lock


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) of process ``pid`` (Linux), or None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[19])


def this_process() -> dict:
    """The lock file's record of this process."""
    pid = os.getpid()
    return {
        "pid": pid,
        "host": socket.gethostname(),
        "start": (_proc_stat(pid) or (None, None))[1],
        "boot": _boot_id(),
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join(sys.argv)[:300],
    }


def holder_alive(record: dict) -> bool | None:
    """Is the process of a lock record running? None when it is on another host (unknowable here)."""
    if record.get("host") != socket.gethostname():
        return None
    if record.get("boot") and _boot_id() and record["boot"] != _boot_id():
        return False  # recorded before this host's last reboot
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    stat = _proc_stat(pid)
    if stat is None:
        return True
    state, started = stat
    return state != "Z" and record.get("start") in (None, started)  # Z: ended, not yet reaped


def _read_record(fd: int) -> dict | None:
    """The lock file's record; {} for an empty file, None for one that is not a record."""
    raw = os.pread(fd, 65536, 0)
    if not raw.strip():
        return {}
    try:
        record = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def _holder(record: dict | None) -> str:
    if not record:
        return "another process"
    return f"process {record.get('pid')} on host {record.get('host')} (since {record.get('since', '?')})"


class RunLock:
    """The lock of run directory ``out`` (``OUT/run.lock``). ``acquire()`` takes it or raises a one-line
    ``UserError`` naming its holder; it is idempotent, so a caller may take it early, where the folder
    exists, and again once it made the folder. ``release()`` (also ``with``) removes the lock file. A lock
    that is not ``active`` does nothing (the processes other than 0 of a multi-process run)."""

    def __init__(self, out: str | Path, note=print, active: bool = True):
        self.path = Path(out) / LOCK_FILE
        self.note, self.active = note, active
        self._fd: int | None = None
        self._mutex = threading.Lock()  # release() may come from the interrupt backstop's thread

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        if not self.active or self._fd is not None:
            return
        for _ in range(100):  # the file may be removed and made anew between open and flock
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise UserError(
                    f"cannot write the lock file {str(self.path)!r} ({e.strerror}): "
                    "run in a directory you can write"
                ) from None
            try:
                if self._try(fd):
                    return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        raise UserError(f"cannot take the lock {str(self.path)!r}: it keeps changing; try again")

    def _try(self, fd: int) -> bool:
        """Lock the open lock file ``fd`` -> True; False if it is no longer the file at ``path``."""
        flocked = _flock(fd)
        if flocked is False:
            raise UserError(self._in_use(_read_record(fd), alive=True))
        try:
            if os.fstat(fd).st_ino != os.stat(self.path).st_ino:
                return False
        except FileNotFoundError:
            return False
        record = _read_record(fd)
        if record:  # left by a run that ended without removing it, or an unlocked holder
            alive = holder_alive(record)
            if alive is not False:
                raise UserError(self._in_use(record, alive=alive))
            self.note(
                f"took over the stale lock {str(self.path)!r} of {_holder(record)}: it is no longer running"
            )
        elif record is None:
            self.note(f"took over the lock {str(self.path)!r}: it was unreadable (not a lock record)")
        data = (json.dumps(this_process()) + "\n").encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        except OSError:  # a full disk: no empty lock file left behind (it is ours: we hold its flock)
            self.path.unlink(missing_ok=True)
            raise
        self._fd = fd
        return True

    def _in_use(self, record: dict | None, alive: bool | None) -> str:
        where = str(self.path.parent)
        text = f"run directory {where!r} is in use by {_holder(record)}"
        if alive is None:
            return (
                f"{text}, which cannot be checked from this host: if that run has ended, delete "
                f"{str(self.path)!r} and try again; otherwise wait for it to end"
            )
        return f"{text}: wait for that run to end (or stop it), then try again"

    def release(self) -> None:
        with self._mutex:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                    self.path.unlink()  # while still locked: a waiting opener then finds it gone
            except OSError:
                pass
            finally:
                os.close(fd)  # drops the flock


def _flock(fd: int) -> bool | None:
    """An exclusive non-blocking flock on ``fd``: True taken, False held by another open file, None
    where the filesystem has no locks (the record then decides)."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return None
        raise
    return True


# -------------------------------------------------------------------------------------------- Ctrl-C

_active: Interrupts | None = None


def interactive() -> bool:
    """A Python prompt, IPython or Jupyter: no forced exit there."""
    return hasattr(sys, "ps1") or bool(sys.flags.interactive) or "IPython" in sys.modules


class Interrupts:
    """Ctrl-C handling for the duration of a run (``with Interrupts(): ...``); see the module docstring.
    Inert when entered outside the main thread or inside another ``Interrupts``."""

    def __init__(self, on_forced_exit=None, grace: float | None = None):
        """``on_forced_exit``: called before the backstop exits the process (from its thread); returns
        the line's advice (what to do next), or None."""
        self.on_forced_exit, self.grace = on_forced_exit, grace if grace is not None else grace_seconds()
        self.requested = False  # a Ctrl-C came
        self.pending = False  # ... inside a deferred section, to be raised at its end
        self.force = not interactive()
        self._depth = 0
        self._installed = self._raised = False
        self._timer: threading.Timer | None = None  # the backstop
        self._again: threading.Timer | None = None  # re-delivers a Ctrl-C that came during a compilation
        self._echoes = 0  # re-delivered Ctrl-Cs the watcher must not count as the user's
        self._mutex = threading.Lock()

    def __enter__(self) -> Interrupts:
        global _active
        if _active is not None or threading.current_thread() is not threading.main_thread():
            return self
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        self._old_wakeup = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, name="dygnex-interrupts", daemon=True)
        self._watcher.start()
        self._installed, _active = True, self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        global _active
        if not self._installed:
            return
        with self._mutex:
            for timer in (self._timer, self._again):  # the caller has the KeyboardInterrupt now
                if timer is not None:
                    timer.cancel()
            self._timer = self._again = None
        signal.set_wakeup_fd(self._old_wakeup)
        previous = self._previous if self._previous is not None else signal.default_int_handler
        signal.signal(signal.SIGINT, previous)
        self._installed, _active = False, None
        self._write.send(b"\0")  # ends the watcher
        self._watcher.join(timeout=10)
        self._read.close()
        self._write.close()
        if self.requested and not self._raised and exc_type is None:
            raise KeyboardInterrupt  # one that came too late to be raised inside

    def _handle(self, signum, frame) -> None:
        """The Python-level handler: runs in the main thread between bytecodes, or when C code called
        from it checks for signals (XLA's compiler does)."""
        self.requested = True
        self._arm()
        if frame is not None and frame.f_code.co_filename.replace("\\", "/").endswith("jax/_src/compiler.py"):
            # an exception raised inside XLA's compiler crashes the interpreter at exit: ask again
            # shortly, so that it is raised once the compilation has returned
            with self._mutex:
                if self._again is None:
                    self._again = threading.Timer(0.2, self._redeliver)
                    self._again.daemon = True
                    self._again.start()
            return
        if self._depth > 0 and (self.force or not self.pending):
            self.pending = True  # raised at the end of the deferred section
            return
        self._raised = True
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self):
        """See the module-level ``deferred``."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0 and self.pending:
            self.pending, self._raised = False, True
            raise KeyboardInterrupt

    def _redeliver(self) -> None:
        with self._mutex:
            if self._again is None:
                return  # uninstalled meanwhile
            self._again = None
            self._echoes += 1
        _thread.interrupt_main(signal.SIGINT)

    def _watch(self) -> None:
        """Woken through the signal wakeup fd by every signal, also while the main thread is in C."""
        seen = 0
        while True:
            try:
                data = self._read.recv(64)
            except OSError:
                return
            if not data or b"\0" in data:
                return
            for _ in range(data.count(signal.SIGINT)):
                with self._mutex:
                    echo, self._echoes = self._echoes > 0, max(self._echoes - 1, 0)
                seen += not echo
            if seen >= 2 and self.force:
                self._exit("a second Ctrl-C")
            if seen:
                self._arm()

    def _arm(self) -> None:
        """Start the backstop: exit with 130 if the run is still going ``grace`` seconds from now."""
        with self._mutex:
            if not self.force or self._timer is not None or not self._installed:
                return
            why = f"still running {self.grace:.0f} s after Ctrl-C"
            self._timer = threading.Timer(self.grace, self._exit, args=(why,))
            self._timer.daemon = True
            self._timer.start()

    def _exit(self, why: str) -> None:
        hint = "the last complete checkpoint is intact"
        with contextlib.suppress(Exception):
            if self.on_forced_exit is not None:
                hint = self.on_forced_exit() or hint
        with contextlib.suppress(Exception):
            os.write(2, f"interrupted ({why}): exiting now; {hint}\n".encode())
        os._exit(130)


def grace_seconds() -> float:
    """``$DYGNEX_INTERRUPT_GRACE`` (seconds, > 0), else ``GRACE_S``; a bad value is noted and ignored."""
    text = os.environ.get(GRACE_ENV, "").strip()
    if not text:
        return GRACE_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        print(
            f"note: {GRACE_ENV}={text!r} is not a number of seconds > 0: using {GRACE_S:.0f}", file=sys.stderr
        )
        return GRACE_S
    return value


def deferred():
    """A section a Ctrl-C must not cut (a checkpoint's write or read): the interrupt is raised at its
    end (``with deferred(): ...``; nothing while no ``Interrupts`` is installed)."""
    return _active.deferred() if _active is not None else contextlib.nullcontext()


def interrupt_requested() -> bool:
    return _active is not None and _active.requested


# ---------------------------------------------------------------------------------------- test hook


def pause_point(name: str, epoch: int) -> None:
    """Fault-injection hook for tests, inert by default. With ``DYGNEX_TEST_PAUSE=<name>@<epoch>`` the
    process prints ``paused at <name>@<epoch>`` to stderr at that point and waits there (an hour at most)
    until it is killed or interrupted; after a Ctrl-C in a deferred section it goes on (the interrupt is
    raised at the section's end). With ``<name>@<epoch>:hold`` it ignores Ctrl-C (a section that does not
    end: the backstop's case). Points: ``epoch`` (before the epoch trains), ``save-start`` (the temporary
    folder exists), ``save-state`` (orbax wrote the arrays), ``save-meta`` (``meta.json`` written, not yet
    renamed), ``save-commit`` (renamed, older ones not yet pruned); see checkpoint.save."""
    want = os.environ.get(PAUSE_ENV, "")
    here = f"{name}@{epoch}"
    if want not in (here, f"{here}:hold"):
        return
    print(f"paused at {want} ({PAUSE_ENV})", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline and (want.endswith(":hold") or not interrupt_requested()):
        time.sleep(0.05)
