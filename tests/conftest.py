"""Shared test configuration: deterministic hypothesis profile (no flaky deadlines on a busy 2-core machine)."""

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings
from shared_testing import made_once

sys.path.insert(0, str(Path(__file__).parent / "papers"))  # paper_testing: the one tiny model setup of every test
sys.path.insert(0, str(Path(__file__).parent / "ptq"))  # ptq_testing: the tiny in-memory Llama and its recipes
sys.path.insert(0, str(Path(__file__).parent / "scaling"))  # scaling_testing: block inputs with every edge case

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

settings.register_profile(
    "lowbit", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], max_examples=100
)
settings.load_profile("lowbit")


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """The papers' tiny setup (``tests/papers/paper_testing.build_tiny_setup``) for any test: ``.model`` (a
    ``smoke`` checkpoint folder), ``.train`` and ``.valid`` (JSONL splits)."""
    from paper_testing import build_tiny_setup

    root = build_tiny_setup(tmp_path_factory.mktemp("tiny"))
    return SimpleNamespace(model=root / "base", train=root / "train.jsonl", valid=root / "valid.jsonl")


@pytest.fixture(scope="session")
def smollm2_checkpoint(tmp_path_factory):
    """SmolLM2-135M-Instruct converted once per test run (``common.models.convert_smollm2``: ~30 s), whichever
    xdist worker asks first, for the tests that read it."""
    from common.models import convert_smollm2

    return made_once(tmp_path_factory, "smollm2", lambda root: convert_smollm2(root / "smollm2")) / "smollm2"


@pytest.fixture
def model():
    """A fresh tiny random Llama (``tests/ptq/ptq_testing.tiny_llama``), for the PTQ and quantizer tests."""
    from ptq_testing import tiny_llama

    return tiny_llama()


@pytest.fixture
def input_ids():
    """A seeded ``(2, 12)`` batch of token ids of the tiny Llama's vocabulary."""
    import torch
    from ptq_testing import TINY

    return torch.randint(0, TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
