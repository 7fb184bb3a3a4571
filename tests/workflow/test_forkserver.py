"""tests/workflow/forkserver.py (the tests' warm steps): a step started warm is the program a fresh ``python -m``
runs (its output, error stream and exit status, byte for byte, its interpreter, umask, torch's and NumPy's numerics
and threads included, and its exit: threads joined, exit handlers; torch's generator seeded afresh), a command it
cannot run warm runs cold with the ``python`` it would have run, and a killed or signalled client takes its step with
it. The tests' builds run their steps warm (``workflow_testing.py``); ``test_resume.py`` and ``test_make_reports.py``
compare cold steps with them."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import forkserver
import psutil
import pytest
from forkserver import ForkServer, import_time_environment, next_python, same_interpreter, step_module, thread_counts

FORKSERVER = Path(forkserver.__file__)
PYTHON = str(Path(sys.executable).parent / "python")  # what a step's `python` is in a build: the venv's

PROBE = '''\
import atexit, os, sys, threading
with open(os.environ["PROBE_WARMTH"], "w") as handle:  # apart from the output compared: warm or cold
    handle.write(str("torch" in sys.modules))
import numpy, threadpoolctl, torch
print(sys.argv, os.getcwd(), sys.path[0], sys.executable, oct(os.umask(0o022)), os.environ.get("OMP_NUM_THREADS"))
print(torch.get_num_threads(), {pool["num_threads"] for pool in threadpoolctl.threadpool_info()})
with open(os.environ["PROBE_WARMTH"] + ".seed", "w") as handle:  # a fresh seed in each process, apart
    handle.write(f"{torch.initial_seed()} {torch.rand(3).tolist()}")
torch.manual_seed(0)
weights = torch.randn(256, 512)
print((weights @ weights.T).sum(dim=1).double().sum().item(), torch.rand(3).tolist())
print(numpy.linalg.norm(numpy.random.default_rng(0).standard_normal((300, 300)) @ numpy.ones(300)))
print("to stderr", file=sys.stderr)
atexit.register(print, "exit handler")
if sys.argv[1:] == ["fail"]:
    raise ValueError("bad value 7")
if sys.argv[1:] == ["thread"]:  # a non-daemon thread outlives the module: the interpreter waits for it
    threading.Thread(target=lambda: (__import__("time").sleep(0.5), print("thread done", flush=True))).start()
    sys.exit()
if sys.argv[1:] == ["sleep"]:
    with open(os.environ["PROBE_WARMTH"] + ".pid", "w") as handle:
        handle.write(str(os.getpid()))
    import time
    time.sleep(60)
sys.exit(int(sys.argv[1]))
'''


@pytest.fixture(scope="module")
def server():
    with ForkServer() as server:
        yield server


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe/__main__.py").write_text(PROBE)
    return tmp_path


SNAKEMAKE_THREADS = dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                   "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"), "1")  # a 1-thread job's


def run(probe: Path, server: ForkServer | None, *arguments: str, umask: int = 0o022,
        **environ: str) -> tuple[subprocess.CompletedProcess, bool]:
    """``python -m probe <arguments>`` in ``probe`` with ``environ`` over this process's environment (without
    OMP_NUM_THREADS): through ``server``'s shim in its environment, or cold with the venv's ``python`` (None); the
    result, and whether the step found torch imported (warm)."""
    environment = {key: value for key, value in os.environ.items() if key not in SNAKEMAKE_THREADS}
    environment.update(environ, PROBE_WARMTH=str(probe / "warmth"))
    python, environment = (PYTHON, environment) if server is None else (server.python, server.environ(environment))
    result = subprocess.run([python, "-m", "probe", *arguments], cwd=probe, env=environment, capture_output=True,
                            text=True, timeout=120, umask=umask)
    return result, (probe / "warmth").read_text() == "True"


# every exit path once, each thread setting and umask among them, and the step that starts a thread under every
# thread setting (the one case where the thread variables meet the step): 6 pairs of a warm and a cold run, not the
# 24 of the full product, whose other cases repeat these
WARM_CASES = [
    (["0"], {}, 0o022),
    (["3", "two words"], {"OMP_NUM_THREADS": "1"}, 0o077),
    (["fail"], SNAKEMAKE_THREADS, 0o022),
    (["thread"], {}, 0o077),
    (["thread"], {"OMP_NUM_THREADS": "1"}, 0o022),
    (["thread"], SNAKEMAKE_THREADS, 0o077),
]


@pytest.mark.parametrize(("arguments", "threads", "umask"), WARM_CASES)
def test_a_warm_step_is_the_fresh_process(server, probe, arguments, threads, umask):
    warm, preloaded = run(probe, server, *arguments, umask=umask, **threads)
    cold, imported = run(probe, None, *arguments, umask=umask, **threads)
    assert preloaded
    assert not imported
    assert warm.returncode == cold.returncode == {"0": 0, "3": 3, "fail": 1, "thread": 0}[arguments[0]]
    assert warm.stdout == cold.stdout
    assert f" {PYTHON} {oct(umask)} " in warm.stdout.splitlines()[0]
    assert warm.stdout.endswith("thread done\nexit handler\n" if arguments == ["thread"] else "exit handler\n")
    if arguments == ["fail"]:  # the traceback's frames differ (the server's and runpy's), its message does not
        assert warm.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1] == "ValueError: bad value 7"
    else:
        assert warm.stderr == cold.stderr == "to stderr\n"


def test_each_warm_step_seeds_torch_afresh(server, probe):
    """As each fresh process does (torch 2.13 seeds its default generator from the system's entropy): two warm steps
    neither inherit the server's generator nor share one."""
    draws = []
    for _ in range(2):
        result, preloaded = run(probe, server, "0")
        assert (result.returncode, preloaded) == (0, True)
        draws.append((probe / "warmth.seed").read_text())
    assert draws[0] != draws[1]


@pytest.mark.parametrize("changed", [{"HF_HUB_OFFLINE": "0"}, {"TOKENIZERS_PARALLELISM": "false"},
                                     {"LC_ALL": "POSIX" if os.environ.get("LC_ALL") == "C" else "C"}])
def test_a_variable_read_at_start_or_import_that_differs_runs_the_step_cold(server, probe, changed):
    result, preloaded = run(probe, server, "0", **changed)
    assert result.returncode == 0
    assert not preloaded


def test_a_step_whose_python_is_another_interpreter_runs_cold_with_it(server, tmp_path):
    """The ``python`` behind the shim on PATH is what the step runs, warm only where it is the server's."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "python").write_text('#!/bin/sh\necho "other python $0 $*"\n')
    (other / "python").chmod(0o755)
    environment = server.environ()
    environment["PATH"] = os.pathsep.join([str(server.python.parent), str(other), environment["PATH"]])
    result = subprocess.run([server.python, "-m", "probe", "0"], env=environment, capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout) == (0, f"other python {other / 'python'} -m probe 0\n")
    environment["PATH"] = str(server.python.parent)
    nothing = subprocess.run([server.python, "-m", "probe", "0"], env=environment, capture_output=True, text=True,
                             timeout=60)
    assert nothing.returncode == 127
    assert nothing.stderr.startswith("python: command not found")


def test_a_command_that_is_not_a_module_runs_cold(server):
    result = subprocess.run([server.python, "-c", "import sys; print(sys.argv, sys.executable)"],
                            env=server.environ(), capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, f"['-c'] {PYTHON}\n")


@pytest.mark.parametrize(("how", "status"), [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, -signal.SIGTERM)])
def test_a_killed_or_signalled_client_takes_its_step_with_it(server, probe, how, status):
    environment = server.environ({**os.environ, "PROBE_WARMTH": str(probe / "warmth")})
    client = subprocess.Popen([server.python, "-m", "probe", "sleep"], cwd=probe, env=environment,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = probe / "warmth.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        assert client.poll() is None
        time.sleep(0.05)
    step = psutil.Process(int(pid_file.read_text()))
    assert step.pid != client.pid
    assert (probe / "warmth").read_text() == "True"
    client.send_signal(how)
    assert client.wait(timeout=30) == status
    step.wait(timeout=30)  # gone (psutil.TimeoutExpired otherwise)


def test_the_helpers(tmp_path):
    environ = {"HF_HOME": "/h", "OMP_NUM_THREADS": "1", "OMP_PROC_BIND": "true", "PATH": "/bin", "PYTHONHASHSEED": "0",
               "MKL_NUM_THREADS": "2", "LANG": "C.UTF-8", "LC_ALL": "C", "USER": "me"}
    assert import_time_environment(environ) == {"HF_HOME": "/h", "OMP_PROC_BIND": "true", "PYTHONHASHSEED": "0",
                                                "LANG": "C.UTF-8", "LC_ALL": "C"}
    assert thread_counts(environ, 8, 9) == (1, 1)
    assert thread_counts({"MKL_NUM_THREADS": "2", "GOTO_NUM_THREADS": "3"}, 8, 9) == (2, 3)
    assert thread_counts({"OMP_NUM_THREADS": "0", "OPENBLAS_NUM_THREADS": "x"}, 8, 9) == (8, 9)
    assert step_module(["-m", "papers.winq", "train"]) == "papers.winq"
    assert [step_module(argv) for argv in (["script.py"], ["-c", "pass"], ["-u", "-m", "x"], ["-m"])] == [None] * 4
    for name in ("shim", "empty", "venv"):
        (tmp_path / name).mkdir()
    for name in ("shim", "venv"):
        (tmp_path / name / "python").symlink_to(sys.executable)
    (tmp_path / "empty" / "python").mkdir()  # not a file
    path = os.pathsep.join(str(tmp_path / name) for name in ("shim", "missing", "empty", "venv"))
    assert next_python(path, str(tmp_path / "shim")) == str(tmp_path / "venv" / "python")
    assert next_python(str(tmp_path / "shim"), str(tmp_path / "shim")) is None
    assert same_interpreter(str(tmp_path / "venv" / "python"), str(tmp_path / "venv" / "python"))
    assert not same_interpreter(str(tmp_path / "venv" / "python"), str(tmp_path / "shim" / "python"))  # two folders
    assert not same_interpreter(PYTHON, "/bin/sh")


def test_the_rules_python_is_the_shim_in_a_snakemake_started_by_the_server(server, tmp_path):
    """The rules' PATH (workflow/rules/common.smk) puts the folder of the interpreter Snakemake runs under first:
    the shim's when Snakemake is started with :meth:`ForkServer.command` in :meth:`ForkServer.environ`, else the
    venv's (the workflow knows nothing of the server)."""
    rules = FORKSERVER.parents[2] / "workflow/rules/common.smk"
    block = "# Rules call `python`" + rules.read_text().split("# Rules call `python`", 1)[1].split("\n\n", 1)[0]
    (tmp_path / "Snakefile").write_text("import os\nimport sys\n\n" + block + textwrap.dedent("""

        rule which:
            output: "which.txt"
            shell: "command -v python > {output}; python -m probe >> {output}"
        """))
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe/__main__.py").write_text("import sys\nprint('torch' in sys.modules, sys.executable)\n")
    for command, environment, expected in (
            (server.command("snakemake", "-c1", "--quiet"), server.environ(), [server.python, True]),
            ([sys.executable, "-m", "snakemake", "-c1", "--quiet"], dict(os.environ), [PYTHON, False])):
        (tmp_path / "which.txt").unlink(missing_ok=True)
        subprocess.run(command, cwd=tmp_path, check=True, env=environment, capture_output=True, timeout=120)
        which, warmth = (tmp_path / "which.txt").read_text().splitlines()
        assert [os.path.normpath(which), warmth == f"True {PYTHON}"] == [os.path.normpath(expected[0]), expected[1]]


def test_run_starts_a_module_with_its_steps_warm_and_returns_its_status(tmp_path):
    (tmp_path / "shimmed").mkdir()
    (tmp_path / "shimmed/__main__.py").write_text("import shutil, sys\nprint(shutil.which('python') == sys.executable,"
                                                  " 'forkserver-' in sys.executable)\nsys.exit(4)\n")
    result = subprocess.run([sys.executable, FORKSERVER, "run", "shimmed"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout) == (4, "True True\n")
    usage = subprocess.run([sys.executable, FORKSERVER, "run"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 1
    assert usage.stderr.startswith("forkserver: run?\nusage: python tests/workflow/forkserver.py run MODULE")


def test_no_server_on_a_machine_with_nvidia_gpus(monkeypatch):
    """There the CUDA driver would not survive the fork: every step runs cold, through the rules' own ``python``."""
    monkeypatch.setattr(forkserver, "cuda_devices", lambda: ["/dev/nvidia0"])
    with ForkServer({"PATH": "/bin"}) as server:
        assert server.process is None
        assert server.python is None
        assert server.environ() == {"PATH": "/bin"}
        assert server.command("snakemake", "-n") == [sys.executable, "-m", "snakemake", "-n"]
