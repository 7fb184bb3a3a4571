"""*Finer is Better (with the Right Scaling)* (Schaefer & Tabak 2026): FP4 microscaling with E4M3 block
scales, abs-max vs prevent-zero vs 4-over-6 vs brute-force vs hierarchical scales, MSE and perplexity vs block
size.

Modules: :mod:`.settings` (config checks, variants as ``quantize_blocks`` options, cell names),
:mod:`.numerical` (Monte Carlo cells, Regions A and B, the claims' sigmas from the theory), :mod:`.model_study`
(the perplexity cells on the function-preserving weight-scale sweep), :mod:`.claims` (rows as evidence and the
implementation checks), :mod:`.authors` (the authors' published gaps as data, ``data/authors_results.csv``),
:mod:`.figures`, :mod:`.context` (the report context); ``python -m
papers.finer_is_better --help`` runs each step (the Snakemake rules in ``rules.smk`` call it).
"""
