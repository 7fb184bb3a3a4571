"""Shared test configuration: deterministic hypothesis profile (no flaky deadlines on a busy 2-core machine)."""

import os

from hypothesis import HealthCheck, settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

settings.register_profile(
    "lowbit", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], max_examples=100
)
settings.load_profile("lowbit")
