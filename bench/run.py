"""Run every benchmark in bench/ (each prints its own side-by-side table and JSON), one after the other."""

import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    status = 0
    for script in sorted(here.glob("*.py")):
        if script.name == "run.py" or script.name.startswith("_"):
            continue
        print(f"== {script.name}", flush=True)
        status |= subprocess.run([sys.executable, str(script)], check=False).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
