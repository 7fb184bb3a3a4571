"""*Max-Window scale estimation for near-lossless HiF8 W8A8 QAT* (Cheng et al. 2026): delayed-scaling amax
observers, saturation, BF16 warmup and forgetting at high learning rate.

Status (issue 6): the configuration and its 18-run grid (:mod:`.settings`, ``config.yaml`` with its schema) and
the run step (:mod:`.run`: one continual-pretraining run, BF16 or HiF8 W8A8 QAT with an observer and a warmup,
with saturation telemetry) exist; the Snakemake rules (runs, checkpoint quantization, evaluation), claims and
report come next, so the workflow does not include this paper yet.
"""
