"""Theory tests: Monte Carlo references run single-threaded (helpers in theory_testing.py).

quantize_blocks on 2^20 values takes ~10 ms on one thread but 0.1-1 s on two when the shared 2-core machine is
busy (thread-pool contention), which would decide whether the full Monte Carlo grid fits in its two minutes.
"""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
