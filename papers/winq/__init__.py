"""*WinQ: Accelerating QAT of Language Models Around Saddle Points* (Li, Liu et al., ICML 2026): low-bit QAT with
ParetoQ quantizers, periodic interpolation of the latent weights toward their quantized values and training noise
(``common.quantizers.lowbit``, :mod:`.method`; what they do to the codes: :mod:`.diagnostics`), and the Hessian spectrum
that motivates them (``common.analysis.hessian``).

The pipeline (``rules.smk``; ``snakemake reports/winq.html``): :mod:`.settings` (config and the grid of bit-width
settings x methods) -> :mod:`.run` (one QAT run of one seed: its validation-perplexity curve and diagnostics) -> the
shared checkpoint quantization and evaluation, and :mod:`.hessian` (one Hessian spectrum per cell) -> :mod:`.study`
(the summary) -> :mod:`.figures`, :mod:`.regime`, :mod:`.claims` -> :mod:`.context` (the report).
``python -m papers.winq --help`` lists the steps.
"""
