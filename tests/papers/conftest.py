"""Fixtures of the paper tests: ``close`` registers a matplotlib figure to close after the test."""

import matplotlib.pyplot as plt
import pytest


@pytest.fixture
def close():
    made = []
    yield made.append
    for fig in made:
        plt.close(fig)
