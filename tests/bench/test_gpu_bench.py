"""bench/gpu.py without a GPU: one line saying it needs one, exit status 0, nothing written (``make bench`` runs every
bench script, on CPU-only machines too)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_cuda_it_says_so_in_one_line_and_exits_0(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = tmp_path / "gpu.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--json", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["bench/gpu.py needs a CUDA GPU (torch.cuda.is_available() is False): "
                                       "nothing measured"]
    assert not out.exists()
