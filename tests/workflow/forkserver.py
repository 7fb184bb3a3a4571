"""Test infrastructure: warm Python steps for the tests' Snakemake builds, from a fork server that imports the
pipeline's heavy libraries once and runs each ``python -m <module> ...`` step of a build in a child forked from it.

Why: on a CPU a step's imports cost more than most steps' work (torch with transformers' Llama about 6 s of CPU,
matplotlib with seaborn about 3 s), and the tests build every report twice. The workflow knows nothing of it: users
(``make reports``) and one end-to-end test (``test_make_reports.py``) run every step cold. The tests' other builds
(``workflow_testing.py``) start Snakemake with :meth:`ForkServer.command` in :meth:`ForkServer.environ`, so that the
rules' ``python`` is the server's client shim; by hand::

    .venv/bin/python tests/workflow/forkserver.py run snakemake --profile workflow/profiles/smoke

A step run warm is the program a fresh ``python -m <module> <args>`` runs:

* its interpreter: the ``python`` the step would have run without the shim (the next on its ``PATH``) is the one
  the server runs (the same file in the same folder, so the same environment; else the step runs cold, with that
  ``python``), and the step's ``sys.executable`` is that path;
* its argv, working directory, environment and umask; the caller's own stdin, stdout and stderr (the descriptors,
  passed over the socket); its exit through the interpreter's own shutdown (non-daemon threads joined, exit
  handlers, finalizers) with its status, a death by signal included;
* torch's intra-op threads (MKL's with them) and the BLAS threads set as a fresh process sets them from
  ``OMP_NUM_THREADS`` and its kin (:func:`thread_counts`); torch's default generator, Python's and NumPy's global
  ones seeded afresh from the system's entropy, as a fresh process seeds them (torch 2.13 too: no fixed seed);
* the project's own modules imported afresh, from its working directory: the server preloads only the third-party
  libraries of :data:`PRELOAD`.

A command it cannot run that way runs cold: one that is not ``-m <module>``, whose ``python`` is another
interpreter, or whose environment differs from the server's in a variable read at start or at import
(:data:`IMPORT_TIME`: the locale's among them); on a machine with NVIDIA GPUs, every step
(:meth:`ForkServer.start`). The client is the shim ``python``: this file run with ``python -I -S`` (the standard
library only; it starts in about 20 ms). Killed, it takes its step with it; SIGINT, SIGTERM and SIGHUP it passes on
to the step.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

PRELOAD = ("numpy", "scipy.stats", "pandas", "yaml", "torch", "safetensors.torch", "tokenizers", "transformers",
           "transformers.models.llama.modeling_llama", "transformers.models.auto.tokenization_auto",
           "matplotlib.pyplot", "seaborn")
# The variables a fresh process reads at start (the locale: Python's LC_CTYPE and its streams' encoding) or a
# preloaded library reads at import: a step runs warm only where they equal the server's
IMPORT_TIME = ("PYTHON", "HF_", "HUGGINGFACE", "TRANSFORMERS", "TOKENIZERS", "TORCH", "PYTORCH", "CUDA", "NVIDIA",
               "MKL", "OPENBLAS", "GOTO", "KMP_", "OMP_", "MPL", "MATPLOTLIB", "XDG_", "HOME", "LD_", "LANG", "LC_")
# The thread counts a fresh process reads at start (Snakemake sets them all to a job's threads): a warm step sets
# torch's and the BLAS library's from them instead (:func:`thread_counts`).
THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "NUMEXPR_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # what the client passes on to its step
HEADER = struct.Struct("!I")
STATUS = struct.Struct("!i")
# How a Python program starts with its `sys.executable` the shim: `python -c LAUNCH <shim> <module> <args>`
LAUNCH = ("import runpy, sys; sys.executable = sys.argv.pop(1); "
          "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def import_time_environment(environ: dict[str, str]) -> dict[str, str]:
    """The variables of ``environ`` read at start or at import (:data:`IMPORT_TIME`), but the threads."""
    return {key: value for key, value in environ.items() if key.startswith(IMPORT_TIME) and key not in THREADS}


def thread_counts(environ: dict[str, str], torch_default: int, blas_default: int) -> tuple[int, int]:
    """The intra-op threads of torch (with MKL's) and of the BLAS library (OpenBLAS) a fresh process started with
    ``environ`` has: torch's from ``OMP_NUM_THREADS``, else ``MKL_NUM_THREADS``; OpenBLAS's from
    ``OPENBLAS_NUM_THREADS``, else ``GOTO_NUM_THREADS``, else ``OMP_NUM_THREADS``; a default where none is a positive
    count."""
    def first(names: tuple[str, ...], default: int) -> int:
        for name in names:
            value = environ.get(name, "")
            if value.isdigit() and int(value) > 0:
                return int(value)
        return default

    return (first(("OMP_NUM_THREADS", "MKL_NUM_THREADS"), torch_default),
            first(("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"), blas_default))


def step_module(argv: list[str]) -> str | None:
    """The module of a ``-m <module> <args>`` command line; None for any other (a script, ``-c``, an option)."""
    return argv[1] if len(argv) >= 2 and argv[0] == "-m" and argv[1] else None


def next_python(path: str, shim_folder: str) -> str | None:
    """The ``python`` that the search path ``path`` gives a command once ``shim_folder`` is left out (what a step
    runs without the shim), or None where there is none; an empty entry is the working directory, as for the
    shell."""
    for entry in path.split(os.pathsep):
        folder = entry or "."
        if os.path.isdir(folder) and os.path.samefile(folder, shim_folder):
            continue
        candidate = os.path.join(folder, "python")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def same_interpreter(first: str, second: str) -> bool:
    """Whether two paths start the same interpreter in the same environment: the same file (symbolic links
    followed) in the same folder (a virtual environment is the folder's; two of one base interpreter differ)."""
    return (os.path.realpath(first) == os.path.realpath(second)
            and os.path.samefile(os.path.dirname(first), os.path.dirname(second)))


def current_umask() -> int:
    """This process's umask (reading it means setting it: set back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- the client: the shim `python` (standard library only) -------------------------------------------------------

def client(address: str, argv: list[str]) -> None:
    """Runs ``python <argv>`` through the server at ``address``, or cold where it cannot: with the ``python`` the
    step would have run without the shim (:func:`next_python`), as the shell would have started it."""
    python = next_python(os.environ.get("PATH", os.defpath), os.path.dirname(address))
    if python is None:
        sys.stderr.write("python: command not found (no python on PATH after the fork server's shim)\n")
        sys.exit(127)
    if step_module(argv) is None or not same_interpreter(python, sys.executable):
        os.execv(python, [python, *argv])
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "python": python,
                          "umask": current_umask()}).encode()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(address)
        message = HEADER.pack(len(request)) + request
        sent = socket.send_fds(connection, [message], [0, 1, 2])
        connection.sendall(message[sent:])
        answer = connection.recv(1)
    except OSError:  # no server, or a closed standard stream: the step runs cold
        answer = b"c"
    if answer != b"w":
        connection.close()
        os.execv(python, [python, *argv])
    for number in SIGNALS:
        signal.signal(number, lambda number, frame: connection.send(bytes([number])))
    status = b""
    while len(status) < STATUS.size:
        chunk = connection.recv(STATUS.size - len(status))
        if not chunk:
            sys.stderr.write("forkserver: the server went away before the step ended\n")
            sys.exit(1)
        status += chunk
    code = STATUS.unpack(status)[0]
    if code < 0:  # the step died by a signal: so does its client, as the shell expects
        die_by_signal(-code)
    sys.exit(code)


def die_by_signal(number: int) -> None:
    """Ends this process by signal ``number`` (its default action), as the step it stands for ended."""
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


# --- the server ------------------------------------------------------------------------------------------------

def serve(address: str) -> None:
    """Preloads :data:`PRELOAD`, then serves the clients at ``address`` until SIGTERM or its parent's end. A step's
    child leaves this function only by an exception (its own exit included), which ends it as it ends a fresh
    interpreter."""
    import importlib

    started = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    defaults = Defaults.measured(started)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    parent = os.getppid()
    steps: dict[int, socket.socket] = {}  # child pid -> its client's connection
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    stopping = []
    signal.signal(signal.SIGTERM, lambda number, frame: stopping.append(number))
    print("ready", flush=True)
    while not stopping and os.getppid() == parent:
        for key, _ in selector.select(timeout=0.05):
            if key.fileobj is listener:
                connection, _ = listener.accept()
                pid = start_step(connection, selector, defaults)
                if pid is None:
                    connection.close()
                else:
                    steps[pid] = connection
                    selector.register(connection, selectors.EVENT_READ, pid)
            else:
                pass_on(key.fileobj, key.data)
        while steps:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            connection = steps.pop(pid)
            selector.unregister(connection)
            with contextlib.suppress(OSError):  # the client is gone
                connection.sendall(STATUS.pack(os.waitstatus_to_exitcode(status)))
            connection.close()
    for pid in steps:
        os.kill(pid, signal.SIGKILL)


def pass_on(connection: socket.socket, pid: int) -> None:
    """A client's signals (one byte each) to its step; a client gone (killed) takes its step with it."""
    try:
        received = connection.recv(16)
    except OSError:
        received = b""
    for number in received or bytes([signal.SIGKILL]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)


class Defaults:
    """What a fresh process has after its imports, measured in the server before any step: the variables of the
    environment it started with that it reads at start or at import (``import_time``: a step runs warm only with
    the same), the variables the imports set (``set_by_imports``: a fresh process sets them too, where the caller
    did not), and its threads without any of :data:`THREADS` (torch's, the BLAS library's)."""

    def __init__(self, import_time: dict[str, str], set_by_imports: dict[str, str], torch_threads: int,
                 blas_threads: int) -> None:
        self.import_time, self.set_by_imports = import_time, set_by_imports
        self.torch_threads, self.blas_threads = torch_threads, blas_threads

    @classmethod
    def measured(cls, started: dict[str, str]) -> Defaults:
        import threadpoolctl
        import torch

        set_by_imports = {key: value for key, value in os.environ.items() if started.get(key) != value}
        blas = [pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]
        return cls(import_time_environment(started), set_by_imports, torch.get_num_threads(), blas[0] if blas else 1)


def receive(connection: socket.socket) -> tuple[dict, list[int]]:
    """A client's request and its three standard descriptors."""
    connection.settimeout(10)
    data, descriptors, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[0]:
        chunk = connection.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the client closed its request")
        data += chunk
    connection.settimeout(None)
    return json.loads(data[HEADER.size:]), descriptors


def start_step(connection: socket.socket, selector: selectors.BaseSelector, defaults: Defaults) -> int | None:
    """Forks the step a client asks for; its pid, or None when the client is told to run it cold."""
    try:
        request, descriptors = receive(connection)
    except (OSError, ValueError):
        return None
    try:
        warm = (len(descriptors) == 3 and step_module(request["argv"]) is not None
                and import_time_environment(request["env"]) == defaults.import_time)
        if not warm:
            connection.sendall(b"c")
            return None
        connection.sendall(b"w")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            for key in list(selector.get_map().values()):  # the listener and the other steps' clients
                key.fileobj.close()
            selector.close()
            connection.close()
            run_step(request, descriptors, defaults)  # never returns
        return pid
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def run_step(request: dict, descriptors: list[int], defaults: Defaults) -> None:
    """In the forked child: becomes ``python -m <module> <args>`` started in the client's folder, environment, umask
    and standard streams. It never returns: it raises ``SystemExit`` when the module ends (as ``python -m`` exits),
    or lets the module's own exit or exception propagate, so that the interpreter ends the child as it ends a fresh
    process (its traceback, exit status, threads joined, exit handlers)."""
    import random
    import runpy

    import numpy
    import threadpoolctl
    import torch

    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, descriptor in enumerate(descriptors):
        os.dup2(descriptor, target)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update({**defaults.set_by_imports, **request["env"]})
    torch_threads, blas_threads = thread_counts(request["env"], defaults.torch_threads, defaults.blas_threads)
    torch.set_num_threads(torch_threads)
    threadpoolctl.threadpool_limits(blas_threads, user_api="blas")
    torch.seed()
    random.seed()
    numpy.random.seed()
    tempfile.tempdir = None  # found again from the step's TMPDIR
    sys.executable = request["python"]
    sys.path[0] = request["cwd"]
    module, *arguments = request["argv"][1:]
    sys.argv = [module, *arguments]  # runpy puts the module's path first, as `python -m` does
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    sys.exit(0)


def cuda_devices() -> list[str]:
    """The NVIDIA device files of this machine (``/dev/nvidia0``, ...)."""
    return sorted(glob.glob("/dev/nvidia[0-9]*"))


# --- the launcher ----------------------------------------------------------------------------------------------

class ForkServer:
    """A server for the lifetime of a ``with`` block (or :meth:`start` to :meth:`stop`), in a temporary folder that
    also holds the client shim ``python``. A Python program started with :meth:`command` in :meth:`environ` finds
    the shim as its ``python``, and so do the rules of a Snakemake started so. The server runs in ``base`` (by
    default this process's environment): a step runs warm where its environment agrees with it in every variable
    read at start or at import (:data:`IMPORT_TIME`)."""

    def __init__(self, base: dict[str, str] | None = None) -> None:
        self.base = dict(os.environ if base is None else base)
        self.folder: Path | None = None
        self.process: subprocess.Popen | None = None

    def start(self) -> ForkServer:
        """Starts the server, unless this machine has NVIDIA GPUs (:func:`cuda_devices`): the CUDA driver does not
        survive a fork once a preloaded library has touched it, so there every step runs cold."""
        if cuda_devices():
            return self
        self.folder = Path(tempfile.mkdtemp(prefix="forkserver-"))
        address = self.folder / "socket"
        here = Path(__file__).resolve()
        shim = self.folder / "python"
        shim.write_text(f"#!/bin/sh\nexec '{sys.executable}' -I -S '{here}' client '{address}' \"$@\"\n")
        shim.chmod(0o755)
        environ = {key: value for key, value in self.base.items() if key not in THREADS}
        self.process = subprocess.Popen([sys.executable, str(here), "serve", str(address)], env=environ,
                                        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        if self.process.stdout.readline().strip() != b"ready":
            status = self.process.wait()
            self.stop()  # its folder and shim go too
            raise RuntimeError(f"the fork server did not start (exit status {status})")
        return self

    @property
    def python(self) -> Path | None:
        """The client shim, while the server runs."""
        return None if self.folder is None else self.folder / "python"

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (by default the server's environment) with the shim's folder first on ``PATH``, then the folder
        of this interpreter (the server's): a ``python`` step finds the shim, and the shim finds behind it the
        interpreter it stands for. Unchanged without a server."""
        environ = dict(self.base if base is None else base)
        if self.folder is not None:
            environ["PATH"] = os.pathsep.join(
                filter(None, [str(self.folder), os.path.dirname(sys.executable), environ.get("PATH")]))
        return environ

    def command(self, module: str, *arguments: str) -> list[str]:
        """``python -m <module> <arguments>`` with this interpreter, told that its ``sys.executable`` is the shim:
        the Snakefile puts the folder of the interpreter Snakemake runs under first on its rules' ``PATH``
        (``workflow/rules/common.smk``), which is then the shim's. Plain ``python -m`` without a server."""
        if self.folder is None:
            return [sys.executable, "-m", module, *arguments]
        return [sys.executable, "-c", LAUNCH, str(self.python), module, *arguments]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        if self.folder is not None:
            for name in ("socket", "python"):
                (self.folder / name).unlink(missing_ok=True)
            self.folder.rmdir()
            self.folder = None

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


USAGE = """usage: python tests/workflow/forkserver.py run MODULE [ARGS...]   (python -m MODULE, its steps warm, e.g.
           .venv/bin/python tests/workflow/forkserver.py run snakemake --profile workflow/profiles/smoke)
       python tests/workflow/forkserver.py serve SOCKET | client SOCKET ARGS...   (the server's and the shim's own)"""

if __name__ == "__main__":
    role, *arguments = sys.argv[1:] or [""]
    if role == "run" and arguments:
        with ForkServer() as server:
            sys.exit(subprocess.run(server.command(*arguments), env=server.environ()).returncode)
    elif role == "serve" and len(arguments) == 1:
        serve(arguments[0])
    elif role == "client" and arguments:
        client(arguments[0], arguments[1:])
    else:
        sys.exit(f"forkserver: {' '.join(sys.argv[1:]) or 'no arguments'}?\n{USAGE}")
