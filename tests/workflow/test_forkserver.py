"""workflow/forkserver.py: a step started warm is the program a fresh ``python -m`` runs (its output, error stream and
exit status, byte for byte, torch's and NumPy's numerics and threads included), a command it cannot run warm runs
cold, and a killed or signalled client takes its step with it. The smoke build runs every step warm
(``workflow_testing.py``); ``test_resume.py`` compares a cold rerun of a training cell with it."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflow"))
import forkserver
from forkserver import WARM_PYTHON, ForkServer, import_time_environment, step_module, thread_counts

FORKSERVER = Path(__file__).resolve().parents[2] / "workflow/forkserver.py"

PROBE = '''\
import os, sys
with open(os.environ["PROBE_WARMTH"], "w") as handle:  # apart from the output compared: warm or cold
    handle.write(str("torch" in sys.modules))
import numpy, threadpoolctl, torch
print(sys.argv, os.getcwd(), sys.path[0], os.environ.get("OMP_NUM_THREADS"), os.environ.get("PROBE_WARMTH"))
print(torch.get_num_threads(), {pool["num_threads"] for pool in threadpoolctl.threadpool_info()})
torch.manual_seed(0)
weights = torch.randn(256, 512)
print((weights @ weights.T).sum(dim=1).double().sum().item(), torch.rand(3).tolist())
print(numpy.linalg.norm(numpy.random.default_rng(0).standard_normal((300, 300)) @ numpy.ones(300)))
print("to stderr", file=sys.stderr)
if sys.argv[1:] == ["fail"]:
    raise ValueError("bad value 7")
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


def run(probe: Path, python: str, *arguments: str, **environ: str) -> tuple[subprocess.CompletedProcess, bool]:
    """``python -m probe <arguments>`` in ``probe`` with ``environ`` over this process's environment (without
    OMP_NUM_THREADS); the result, and whether the step found torch imported (warm)."""
    environment = {key: value for key, value in os.environ.items() if key not in SNAKEMAKE_THREADS}
    environment.update(environ, PROBE_WARMTH=str(probe / "warmth"))
    result = subprocess.run([python, "-m", "probe", *arguments], cwd=probe, env=environment, capture_output=True,
                            text=True, timeout=120)
    return result, (probe / "warmth").read_text() == "True"


SNAKEMAKE_THREADS = dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                   "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"), "1")  # a 1-thread job's


@pytest.mark.parametrize("threads", [{}, {"OMP_NUM_THREADS": "1"}, SNAKEMAKE_THREADS])
@pytest.mark.parametrize("arguments", [["0"], ["3", "two words"], ["fail"]])
def test_a_warm_step_is_the_fresh_process(server, probe, arguments, threads):
    warm, preloaded = run(probe, str(Path(server.environ()[WARM_PYTHON]) / "python"), *arguments, **threads)
    cold, imported = run(probe, sys.executable, *arguments, **threads)
    assert preloaded
    assert not imported
    assert warm.returncode == cold.returncode == {"0": 0, "3": 3, "fail": 1}[arguments[0]]
    assert warm.stdout == cold.stdout
    if arguments == ["fail"]:  # the traceback's frames differ (runpy's), its message does not
        assert warm.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1] == "ValueError: bad value 7"
    else:
        assert warm.stderr == cold.stderr == "to stderr\n"


@pytest.mark.parametrize("changed", [{"HF_HUB_OFFLINE": "0"}, {"TOKENIZERS_PARALLELISM": "false"}])
def test_an_import_time_variable_that_differs_runs_the_step_cold(server, probe, changed):
    result, preloaded = run(probe, str(Path(server.environ()[WARM_PYTHON]) / "python"), "0", **changed)
    assert result.returncode == 0
    assert not preloaded


def test_a_command_that_is_not_a_module_runs_cold(server, tmp_path):
    result = subprocess.run([Path(server.environ()[WARM_PYTHON]) / "python", "-c", "import sys; print(sys.argv)"],
                            env=server.environ(), capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (0, "['-c']\n")


@pytest.mark.parametrize(("how", "status"), [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, -signal.SIGTERM)])
def test_a_killed_or_signalled_client_takes_its_step_with_it(server, probe, how, status):
    environment = {**os.environ, "PROBE_WARMTH": str(probe / "warmth")}
    client = subprocess.Popen([Path(server.environ()[WARM_PYTHON]) / "python", "-m", "probe", "sleep"], cwd=probe,
                              env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def test_the_import_time_environment_the_thread_counts_and_the_step_module():
    environ = {"HF_HOME": "/h", "OMP_NUM_THREADS": "1", "OMP_PROC_BIND": "true", "PATH": "/bin", "PYTHONHASHSEED": "0",
               "MKL_NUM_THREADS": "2"}
    assert import_time_environment(environ) == {"HF_HOME": "/h", "OMP_PROC_BIND": "true", "PYTHONHASHSEED": "0"}
    assert thread_counts(environ, 8, 9) == (1, 1)
    assert thread_counts({"MKL_NUM_THREADS": "2", "GOTO_NUM_THREADS": "3"}, 8, 9) == (2, 3)
    assert thread_counts({"OMP_NUM_THREADS": "0", "OPENBLAS_NUM_THREADS": "x"}, 8, 9) == (8, 9)
    assert step_module(["-m", "papers.winq", "train"]) == "papers.winq"
    assert [step_module(argv) for argv in (["script.py"], ["-c", "pass"], ["-u", "-m", "x"], ["-m"])] == [None] * 4


def test_the_snakefile_puts_the_warm_python_first(tmp_path):
    """The rules' PATH (workflow/rules/common.smk): the folder LOWBIT_WARM_PYTHON names first, then Snakemake's own
    interpreter's."""
    rules = Path(__file__).resolve().parents[2] / "workflow/rules/common.smk"
    block = "# Rules call `python`" + rules.read_text().split("# Rules call `python`", 1)[1].split("\n\n", 1)[0]
    (tmp_path / "Snakefile").write_text("import os\nimport sys\n\n" + block + textwrap.dedent("""

        rule which:
            output: "which.txt"
            shell: "command -v python > {output}"
        """))
    (tmp_path / "warm").mkdir()
    (tmp_path / "warm/python").write_text("#!/bin/sh\n")
    (tmp_path / "warm/python").chmod(0o755)
    for environment, expected in (({WARM_PYTHON: str(tmp_path / "warm")}, tmp_path / "warm/python"),
                                  ({}, Path(sys.executable).parent / "python")):
        (tmp_path / "which.txt").unlink(missing_ok=True)
        subprocess.run([sys.executable, "-m", "snakemake", "-c1", "--quiet"], cwd=tmp_path, check=True,
                       env={**{k: v for k, v in os.environ.items() if k != WARM_PYTHON}, **environment},
                       capture_output=True, timeout=120)
        assert os.path.normpath((tmp_path / "which.txt").read_text().strip()) == os.path.normpath(expected)


def test_run_gives_its_command_a_server_and_returns_its_status():
    script = "import os, pathlib; print(pathlib.Path(os.environ['LOWBIT_WARM_PYTHON'], 'python').is_file()); exit(4)"
    result = subprocess.run([sys.executable, FORKSERVER, "run", sys.executable, "-c", script], capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout) == (4, "True\n")
    missing = subprocess.run([sys.executable, FORKSERVER, "run", "no-such-command"], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 1  # (the server's own start writes to the same stderr before it)
    assert missing.stderr.splitlines()[-1] == "forkserver: no command 'no-such-command' to run"
    usage = subprocess.run([sys.executable, FORKSERVER, "run"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 1
    assert usage.stderr.startswith("forkserver: run?\nusage: python workflow/forkserver.py run COMMAND...")


def test_no_server_on_a_machine_with_nvidia_gpus(monkeypatch):
    """There the CUDA driver would not survive the fork: every step runs cold, through the rules' own ``python``."""
    monkeypatch.setattr(forkserver, "cuda_devices", lambda: ["/dev/nvidia0"])
    with ForkServer({"PATH": "/bin"}) as server:
        assert server.process is None
        assert server.environ() == {"PATH": "/bin"}
