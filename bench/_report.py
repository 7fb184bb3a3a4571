"""Shared ending of every benchmark: the target table, then the JSON report (also written to a file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.io import write_json


def target(label: str, value: float, limit: float) -> dict[str, Any]:
    return {"ratio": label, "value": value, "limit": limit, "met": value <= limit}


def finish(report: dict[str, Any], path: Path) -> None:
    """Print ``report["targets"]`` side by side, write ``report`` atomically to ``path`` and print it."""
    print()
    for t in report["targets"]:
        print(f"{t['ratio']:42s} {t['value']:7.2f}  (limit {t['limit']:g})  {'met' if t['met'] else 'MISSED'}")
    write_json(path, report)
    print(json.dumps(report, indent=2))
