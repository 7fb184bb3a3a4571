"""lowbit-lab's shared library: formats, block scaling, observers, QAT, theory, and the pipeline stages."""
