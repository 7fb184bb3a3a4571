"""*Is finer better? The limits of microscaling formats in LLMs* (Fasoli et al., ICLR 2026): the analytic MSE
of block quantization with quantized scales (:mod:`common.theory`), validated by simulation, the block-size
inversion on real weight tensors and on perplexity, and UE5M3 scales as the fix.

Modules: :mod:`.settings` (config), :mod:`.curves` (theory and simulation cells, their comparison and the
crossovers), :mod:`.analytic_models` (the paper's analytic model and ours against simulation on the authors'
grid), :mod:`.conventions` (our numerics against the authors'), :mod:`.tensors` (real weight tensors: fitted
sigma, measured vs predicted MSE), :mod:`.model_study` (perplexity gap per block size and scale variant),
:mod:`.claims`, :mod:`.figures`, :mod:`.context`; ``python -m papers.microscaling_limits --help`` runs each step.
"""
