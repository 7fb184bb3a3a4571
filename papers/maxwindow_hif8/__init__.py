"""*Max-Window scale estimation for near-lossless HiF8 W8A8 QAT* (Cheng et al. 2026): delayed-scaling amax
observers, saturation, BF16 warmup and forgetting at high learning rate.

The pipeline (``rules.smk``; ``snakemake reports/maxwindow_hif8.html``): :mod:`.settings` (config and the 18-run
grid) -> :mod:`.run` (one continual-pretraining run with saturation telemetry) -> the shared checkpoint
quantization and evaluation -> :mod:`.study` (summary, synthetic observer study) -> :mod:`.figures`,
:mod:`.claims` -> :mod:`.context` (the report). ``python -m papers.maxwindow_hif8 --help`` lists the steps.
"""
