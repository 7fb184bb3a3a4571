"""The LaTeX report compiles and fits its page: a realistic context (long statements, math, every verdict, a
not-testable row, checks, a figure, a wide numeric table, a table with a long text column and one with long
headers and names, long identifiers in the claims and setup tables) built with ``latexmk``.

Skipped when latexmk is absent (``.ci/run`` installs it where apt-get is available). It fails on a LaTeX error
and on any ``Overfull \\hbox``/``\\vbox`` anywhere in the document's log: the claims table is the part that
used to overflow, but a box running into the margin reads badly in any section, so the test does not tell them
apart.
"""

import shutil

import matplotlib
import pytest

from common.report import assemble, build_pdf, provenance, render_latex
from common.report.figures import save_figure
from common.report.render import overfull_boxes

matplotlib.use("Agg")
import matplotlib.pyplot as plt

pytestmark = pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk is not installed")

BLOCKS = [4, 8, 16, 32, 64, 128, 256]


def realistic_context(root, claims_doc):
    """A report context like the finer-is-better one, its figure under ``root`` (in a folder with ``_``)."""
    figures = root / "finer_is_better" / "figures"
    figures.mkdir(parents=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.loglog([1e-5, 1e-3, 1], [3e-11, 2e-7, 0.02], label="b4")
    ax.set(xlabel="sigma", ylabel="MSE")
    ax.legend()
    save_figure(fig, figures / "mse-small.png", figures / "mse-small.pdf", dpi=40)
    relative = [[scale, variant, f"{sigma:.3g}", *(f"{0.0123 * b / (1 + sigma):.4g}" for b in BLOCKS)]
                for scale in ("UE4M3", "UE5M3") for variant in ("absmax", "four_over_six_pz", "hierarchical")
                for sigma in (1e-5, 1e-3, 1.0)]
    regions = [["A", "[1e-05, 0.00245]", 17, "abs-max reverses (MSE(n) > 1.02 MSE(2n) for consecutive block sizes) "
                "and at least 1% of its smallest-block scales round to zero"],
               ["B", "none", 0, "prevent-zero still reverses at the same sigma"]]
    return assemble(
        paper={"key": "demo", "title": "Finer is Better (with the Right Scaling)",
               "citation": "Schaefer & Tabak 2026, arXiv 2605.08565. Reproduced by lowbit-lab at small scale.",
               "question": "With abs-max scaling and E4M3 block scales, smaller FP4 blocks can give higher MSE. Is "
                           "that inherent to fine granularity, or fixable by the scale selection?",
               "method": "FP4 E2M1 elements with UE4M3 block scales: abs-max $s = \\mathrm{E4M3}(b_{\\max}/6)$; "
                         "prevent-zero (a zero scale becomes $2^{-9}$); 4-over-6 ($s_4 = \\mathrm{E4M3}(1.5\\, "
                         "b_{\\max}/6)$ replaces $s_6$ iff its block MSE is smaller). Monte Carlo MSE of "
                         "Normal$(0, \\sigma^2)$ data on a log grid of 41 values of $\\sigma$."},
        figures=[{"id": "mse", "caption": "Relative MSE $\\mathrm{MSE}/\\sigma^2$ against $\\sigma$ for every "
                                          "block size $n$ (abs-max, UE4M3 scales); Region A shaded.",
                  "png": str(figures / "mse-small.png"), "pdf": str(figures / "mse-small.pdf")}],
        tables=[{"caption": "Regions found in the data ($\\sigma$ intervals of the grid)",
                 "columns": ["region", "sigma intervals", "points", "detection rule"], "rows": regions},
                {"caption": "Relative MSE ($\\mathrm{MSE}/\\sigma^2$) at three sigmas, by block size",
                 "columns": ["scale", "variant", "sigma", *(f"b{b}" for b in BLOCKS)], "rows": relative},
                {"caption": "Saturation of the activation observers over training",
                 "columns": ["trace", "observer", "saturated steps", "worst overshoot", "headroom lost (bits)",
                             "spikes", "median |theory/measured - 1|", "loss APE (%)"],
                 "rows": [[f"qat-hif8-seed{seed}-layer{layer}.mlp.down_proj", observer, 12, "1.37", "0.452", 3,
                           "-0.0123", "2.1e-03"] for seed in (0, 1) for layer in (0, 11)
                          for observer in ("max-window", "ema-absmax")]}],
        claims=claims_doc,
        provenance=provenance({"x": 1}, seeds={"data": 0, "numerical": 1234}, stage_seconds={"mse": 181.25}),
        rerun=[{"cell": "the whole report",
                "command": "snakemake --profile workflow/profiles/default reports/finer_is_better.html"},
               {"cell": "e2m1-ue4m3-b4-hierarchical_four_over_six.json",
                "command": "snakemake --profile workflow/profiles/default "
                           "results/finer_is_better/mse/e2m1-ue4m3-b4-hierarchical_four_over_six.json"}],
        artifacts=[],
        setup=[{"aspect": "Layers quantized", "paper": "every linear layer, weights and activations",
                "ours": "the linears matching (self_attn\\.(q|k|v|o)_proj|mlp\\.(gate|up|down)_proj)\\$, weights "
                        "and activations"}])


def with_long_words(claims_doc):
    """``claims_doc`` whose first row names a long file and whose second row's detail is a ratio of two long math
    terms: words a narrow column of the claims table can set only where it may break them."""
    first, second, *rest = claims_doc["claims"]
    return {**claims_doc, "claims": [
        {**first, "paper": f"{first['paper']} (the authors' modelling_errors_from_theory_fp8_scales.py)"},
        {**second, "detail": "largest $\\mathrm{ppl}_{hier\\,4/6}(4)/\\mathrm{ppl}_{v}(4) - 1$ over the rules; "
                             "sum_k (MSE_sim(sigma_k) - MSE_paper(sigma_k))^2 / MSE_paper(sigma_k)"}, *rest]}


def test_the_report_compiles_without_overfull_boxes(tmp_path, claims_doc):
    """Long identifiers (a regex of layer names, a file name, a ratio in math) wrap in their narrow columns."""
    context = realistic_context(tmp_path, with_long_words(claims_doc))
    render_latex(context, tmp_path / "demo.tex")
    pdf = build_pdf(tmp_path / "demo.tex", log=tmp_path / "demo.log")
    assert pdf == tmp_path / "demo.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    log = (tmp_path / "demo.log").read_text()
    assert overfull_boxes(log) == []
    assert "LaTeX Warning" not in log  # no undefined reference, float too large or lost figure
    assert not (tmp_path / ".latex-demo").exists()


def test_a_latex_error_is_named_and_keeps_the_build_folder(tmp_path):
    (tmp_path / "bad.tex").write_text("\\documentclass{article}\\begin{document}\\undefinedmacro\\end{document}\n")
    with pytest.raises(RuntimeError, match=r"LaTeX failed on .*bad\.tex.*Undefined control sequence"):
        build_pdf(tmp_path / "bad.tex")
    assert (tmp_path / ".latex-bad" / "bad.log").is_file()
    assert not (tmp_path / "bad.pdf").exists()
