"""Warm Python steps: a fork server that imports the pipeline's heavy libraries once and runs each
``python -m <module> ...`` step of a build in a child forked from it.

Why: on a CPU a step's imports cost more than most steps' work (torch with transformers' Llama about 6 s of CPU,
matplotlib with seaborn about 3 s: ``python bench/forkserver.py``), and a smoke build runs about 190 steps. The tests'
builds (``tests/workflow/workflow_testing.py``) run their steps through one; anyone may, from the shell::

    .venv/bin/python workflow/forkserver.py run .venv/bin/snakemake --profile workflow/profiles/smoke

or from Python (``with ForkServer() as server:`` a command run with ``env=server.environ()``).

A step run warm is the program a fresh ``python -m <module> <args>`` runs:

* its argv, working directory and environment; the caller's own stdin, stdout and stderr (the descriptors, passed
  over the socket); its exit status, a death by signal included;
* torch's intra-op threads (MKL's with them) and the BLAS threads set as a fresh process sets them from
  ``OMP_NUM_THREADS`` and its kin (:func:`thread_counts`); Python's and NumPy's global generators seeded afresh;
* the project's own modules imported afresh, from its working directory: the server preloads only the third-party
  libraries of :data:`PRELOAD`.

A command it cannot run that way runs as plain ``python``: one that is not ``-m <module>``, or whose environment
differs from the server's in a variable a preloaded library reads at import (:data:`IMPORT_TIME`); on a machine with
NVIDIA GPUs, every step (:meth:`ForkServer.start`). The client is the ``python`` on the build's ``PATH``: a shim that
runs this file with ``python -I -S`` (the standard library only; it starts in about 20 ms). Killed, it takes its step
with it; SIGINT, SIGTERM and SIGHUP it passes on to the step.
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
IMPORT_TIME = ("PYTHON", "HF_", "HUGGINGFACE", "TRANSFORMERS", "TOKENIZERS", "TORCH", "PYTORCH", "CUDA", "NVIDIA",
               "MKL", "OPENBLAS", "GOTO", "KMP_", "OMP_", "MPL", "MATPLOTLIB", "XDG_", "HOME", "LD_")
WARM_PYTHON = "LOWBIT_WARM_PYTHON"  # the shim's folder, for the Snakefile
# The thread counts a fresh process reads at start (Snakemake sets them all to a job's threads): a warm step sets
# torch's and the BLAS library's from them instead (:func:`thread_counts`).
THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "NUMEXPR_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # what the client passes on to its step
HEADER = struct.Struct("!I")
STATUS = struct.Struct("!i")


def import_time_environment(environ: dict[str, str]) -> dict[str, str]:
    """The variables of ``environ`` a preloaded library may read at import (:data:`IMPORT_TIME`), but the threads."""
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


# --- the client: the `python` of a warm build (standard library only) --------------------------------------------

def client(address: str, argv: list[str]) -> None:
    """Runs ``python <argv>`` through the server at ``address``, or as plain ``python`` where it cannot."""
    if step_module(argv) is None:
        os.execv(sys.executable, [sys.executable, *argv])
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
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
        os.execv(sys.executable, [sys.executable, *argv])
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
    """Preloads :data:`PRELOAD`, then serves the clients at ``address`` until SIGTERM or its parent's end."""
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
                pid = start_step(connection, listener, selector, defaults)
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
    environment it started with that its imports read (``import_time``: a step runs warm only with the same), the
    variables the imports set (``set_by_imports``: a fresh process sets them too, where the caller did not), and its
    threads without any of :data:`THREADS` (torch's, the BLAS library's)."""

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


def start_step(connection: socket.socket, listener: socket.socket, selector: selectors.BaseSelector,
               defaults: Defaults) -> int | None:
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
            selector.close()
            listener.close()
            connection.close()
            run_step(request, descriptors, defaults)  # never returns
        return pid
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def run_step(request: dict, descriptors: list[int], defaults: Defaults) -> None:
    """In the forked child: becomes ``python -m <module> <args>`` started in the client's folder, environment and
    standard streams, and exits with its status."""
    import atexit
    import random
    import runpy
    import traceback

    import numpy
    import threadpoolctl
    import torch

    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, descriptor in enumerate(descriptors):
        os.dup2(descriptor, target)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({**defaults.set_by_imports, **request["env"]})
    torch_threads, blas_threads = thread_counts(request["env"], defaults.torch_threads, defaults.blas_threads)
    torch.set_num_threads(torch_threads)
    threadpoolctl.threadpool_limits(blas_threads, user_api="blas")
    random.seed()
    numpy.random.seed()
    tempfile.tempdir = None  # found again from the step's TMPDIR
    sys.path[0] = request["cwd"]
    module, *arguments = request["argv"][1:]
    sys.argv = [module, *arguments]  # runpy puts the module's path first, as `python -m` does
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if code < 0:
        die_by_signal(-code)
    os._exit(code & 0xFF)


def cuda_devices() -> list[str]:
    """The NVIDIA device files of this machine (``/dev/nvidia0``, ...)."""
    return sorted(glob.glob("/dev/nvidia[0-9]*"))


# --- the launcher ----------------------------------------------------------------------------------------------

class ForkServer:
    """A server for the lifetime of a ``with`` block (or :meth:`start` to :meth:`stop`), in a temporary folder that
    also holds the client shim ``python``; :meth:`environ` is an environment whose ``python`` is that shim. The
    server runs in ``base`` (by default this process's environment): a step runs warm where its environment agrees
    with it in every variable read at import (:data:`IMPORT_TIME`)."""

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

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (by default the server's environment) with ``LOWBIT_WARM_PYTHON`` naming the shim's folder, which
        the Snakefile puts first on its rules' ``PATH`` (``workflow/rules/common.smk``), while the server runs. A
        step whose environment differs from the server's in a variable read at import runs cold."""
        environ = dict(self.base if base is None else base)
        if self.folder is not None:
            environ[WARM_PYTHON] = str(self.folder)
        return environ

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        if self.folder is not None:
            for name in ("socket", "python"):
                (self.folder / name).unlink(missing_ok=True)
            self.folder.rmdir()

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


USAGE = """usage: python workflow/forkserver.py run COMMAND...   (COMMAND with its steps warm, e.g.
           .venv/bin/python workflow/forkserver.py run .venv/bin/snakemake --profile workflow/profiles/smoke)
       python workflow/forkserver.py serve SOCKET | client SOCKET ARGS...   (the server's and the shim's own)"""

if __name__ == "__main__":
    role, *arguments = sys.argv[1:] or [""]
    if role == "run" and arguments:
        with ForkServer() as server:
            try:
                sys.exit(subprocess.run(arguments, env=server.environ()).returncode)
            except FileNotFoundError:
                sys.exit(f"forkserver: no command {arguments[0]!r} to run")
    elif role == "serve" and len(arguments) == 1:
        serve(arguments[0])
    elif role == "client" and arguments:
        client(arguments[0], arguments[1:])
    else:
        sys.exit(f"forkserver: {' '.join(sys.argv[1:]) or 'no arguments'}?\n{USAGE}")
