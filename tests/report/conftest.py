"""A realistic claims document for the report tests: every verdict, a not-testable row, long statements, math
spans, several rows under one group, and implementation checks; the report context around it."""

import matplotlib
import pytest

from common.report import Check, ClaimSpec, Prediction, assemble, claims_document, judge, provenance
from common.uncertainty import Estimate, normal_interval, t_interval

REVERSAL = "Finer blocks can be worse: the reversal of abs-max scaling in Region A"


def spec(cid, group, statement, paper, statistic, direction, threshold, source):
    return ClaimSpec(cid, group, statement, paper, Prediction(statistic, direction, threshold, source))


@pytest.fixture
def claims_doc():
    """``claims_document`` of five rows (reproduced, inconclusive, contradicted, reproduced within a margin, not
    testable) in three groups, and two passed checks."""
    claims = [
        judge(spec("reversal_absmax", REVERSAL,
                   "With abs-max scaling and UE4M3 block scales, halving the block size raises the MSE of "
                   "Normal$(0, \\sigma^2)$ data for small $\\sigma$: $\\mathrm{MSE}(n)/\\mathrm{MSE}(2n) > 1$ "
                   "below $\\sigma \\approx 10^{-3}$, because more block scales round to zero.",
                   "Fig. 2 and Sec. 3.1: a reversal for every $n \\le 16$ below $\\sigma = 2^{-9}$",
                   "$\\mathrm{MSE}(4)/\\mathrm{MSE}(8)$ at $\\sigma = 10^{-4}$", "above", 1.02,
                   "the paper's reversal, with a 2% tolerance for Monte Carlo noise"),
              normal_interval(1.31, 0.012, method="Monte Carlo standard error over 1048576 samples"),
              detail="MSE(4) 3.1e-09, MSE(8) 2.37e-09; 33% of the block-4 scales are zero",
              evidence=("results/finer_is_better/mse/e2m1-ue4m3-b4-absmax.json",)),
        judge(spec("reversal_prevent_zero", REVERSAL,
                   "Prevent-zero scaling (a scale that rounds to zero becomes $2^{-9}$) removes the reversal.",
                   "Sec. 3.2, Fig. 3", "$\\mathrm{MSE}(4)/\\mathrm{MSE}(8)$ with prevent-zero at $\\sigma = "
                   "10^{-4}$", "below", 1.02, "the reversal tolerance above"),
              Estimate(1.004, 0.981, 1.032, "Monte Carlo standard error over 1048576 samples, normal interval"),
              detail="MSE(4) 2.41e-09, MSE(8) 2.40e-09"),
        judge(spec("perplexity_gap", "Perplexity of the quantized language model",
                   "On a language model the perplexity gap to the unquantized model grows when the block "
                   "shrinks from 16 to 4 under abs-max scaling, and 4-over-6 scale selection closes most of it.",
                   "Table 3: gap 1.9% at b4 against 0.8% at b16 (Llama-3 8B, WikiText-2)",
                   "gap(b4) - gap(b16), in % of perplexity", "above", 0.0, "the paper: a positive difference"),
              Estimate(-0.0123, -0.031, -0.0021, "paired bootstrap over 64 windows (2000 resamples, seed 0, "
                       "percentile)"),
              detail="gap b4 0.412% (perplexity 18.31), b16 0.424% (perplexity 18.31); baseline 18.23"),
        judge(spec("ue5m3_equivalent", "Perplexity of the quantized language model",
                   "UE5M3 block scales are as good as UE4M3 ones with 4-over-6.", "Sec. 4.3",
                   "$\\Delta$ perplexity UE5M3 $-$ UE4M3 (4-over-6, b16)", "within", 0.05,
                   "a tie: 0.05 perplexity, a tenth of the smallest gap the paper reports"),
              t_interval([0.011, -0.004, 0.02], unit="seeds"), detail="per seed: 0.011, -0.004, 0.020"),
        judge(spec("region_b", "Region B: prevent-zero still reverses",
                   "Even with prevent-zero, very small $\\sigma$ (Region B) reverse again, as $2^{-9}$ dominates the "
                   "block's range.", "Fig. 3, $\\sigma < 10^{-6}$", "$\\mathrm{MSE}(4)/\\mathrm{MSE}(8)$ at $\\sigma "
                   "= 10^{-7}$", "above", 1.02, "the reversal tolerance"),
              None, reason="our grid stops at $\\sigma = 10^{-5}$ (the paper's smallest $\\sigma$ needs $2^{30}$ "
                           "samples a point, beyond a 2-core CPU)"),
    ]
    checks = [
        Check("closed_form_mse", "The closed-form block MSE of common.theory equals the Monte Carlo MSE within "
              "three standard errors at every $\\sigma$ of the grid", "max |z| = 1.7 over 41 sigmas", True),
        Check("e2m1_round_trip", "E2M1 encode then decode is exact on its 16 codes", "0 mismatches of 16", True,
              ("results/finer_is_better/checks.json",)),
        Check("zero_block", "A block of zeros quantizes to zeros, its scale to the smallest one", "MSE 0.0", True),
    ]
    coverage = [{"claim": "Abs-max reverses in Region A; prevent-zero removes it", "where": "Sec. 3, Figs. 2-3",
                 "rows": ["reversal_absmax", "reversal_prevent_zero"], "not_tested": "", "profile": ""},
                {"claim": "The block-4 perplexity gap and the UE5M3 tie", "where": "Table 3, Sec. 4.3",
                 "rows": ["perplexity_gap", "ue5m3_equivalent"], "not_tested": "", "profile": ""},
                {"claim": "Region B reverses again", "where": "Fig. 3", "rows": ["region_b"], "not_tested": "",
                 "profile": ""},
                {"claim": "The same holds for 70B models", "where": "Sec. 5", "rows": [],
                 "not_tested": "the scale: a 70B model needs GPUs", "profile": "paper"}]
    return claims_document(claims, checks, coverage=coverage)


@pytest.fixture
def context(tmp_path, claims_doc):
    """A report context: one figure (PNG and PDF), one table, the claims document above."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    fig.savefig(tmp_path / "f.png")
    fig.savefig(tmp_path / "f.pdf")
    plt.close(fig)
    context = assemble(
        paper={"key": "demo", "title": "Demo <paper>", "citation": "A. Author, 2026",
               "question": "Is finer better?", "method": "Block quantization, a zero scale becomes $2^{-9}$."},
        figures=[{"id": "mse", "caption": "MSE vs $\\sigma$", "png": str(tmp_path / "f.png"),
                  "pdf": str(tmp_path / "f.pdf")}],
        tables=[{"caption": "Gaps", "columns": ["block", "gap_%"], "rows": [[4, "-0.27"]]}],
        claims=claims_doc,
        provenance=provenance({"x": 1}, seeds={"data": 0}, stage_seconds={"train": 1.5}),
        rerun=[{"cell": "block 4", "command": "snakemake results/demo/b4.json"}], artifacts=[])
    context["claims"][0]["statement"] = "MSE < 1 & ratio 50%"
    return context
