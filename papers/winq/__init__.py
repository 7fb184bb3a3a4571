"""*WinQ: Accelerating QAT of Language Models Around Saddle Points* (Li, Liu et al., ICML 2026): low-bit QAT with
ParetoQ quantizers, periodic interpolation of the latent weights toward their quantized values and training noise
(``common.qat.lowbit``, ``common.winq``), and the Hessian spectrum that motivates them (``common.analysis.hessian``).

Status: the configuration (``config.yaml``, :mod:`.settings`: the 24-run grid of 6 bit-width settings x 4 methods),
the run step (:mod:`.run`: one QAT run, its validation-perplexity curve and a checkpoint that
:func:`.run.load_lowbit_model` rebuilds exactly) and the Hessian cell (:mod:`.hessian`) exist; the rules, claims and
report come next. ``python -m papers.winq --help`` lists the steps.
"""
