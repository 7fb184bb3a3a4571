"""Fixtures of the PTQ tests (helpers in ptq_testing.py)."""

import pytest
import torch
import transformers
from ptq_testing import TINY, tiny_llama


@pytest.fixture
def model() -> transformers.LlamaForCausalLM:
    return tiny_llama()


@pytest.fixture
def input_ids() -> torch.Tensor:
    return torch.randint(0, TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(1))
