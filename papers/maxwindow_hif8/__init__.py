"""*Max-Window scale estimation for near-lossless HiF8 W8A8 QAT* (Cheng et al. 2026): delayed-scaling amax
observers, saturation, BF16 warmup and forgetting at high learning rate.

Status: the run step (:mod:`.run`: one continual-pretraining run, BF16 or HiF8 W8A8 QAT with an observer and a
warmup, with saturation telemetry) exists; the Snakemake rules, claims and report come next (issue 6).
"""
