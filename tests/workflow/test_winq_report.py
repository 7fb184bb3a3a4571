"""End to end, winq specifics from the session's smoke build (``conftest.py``): the claims as evidence over two
seeds, each training cell <run>/seed<k> a file target that reruns alone, trained models checkpoint-quantized to packed
codes and learned scales that rebuild the trained effective weights bit-exactly, curves and Hessian cells for the
summary, and a wrong config value that stops the run before any work. The checks every report shares are in
``test_reports.py``."""

import json
import re

import pytest

pytestmark = pytest.mark.slow
PAPER = "winq"
RUN = "w1-winq/seed1"  # smoke: W1 x every method x seeds 0 and 1
TRAINED = f"results/smoke/models/trained/{PAPER}/{RUN}"
QUANTIZED = f"results/smoke/models/quantized/paretoq_learned/trained/{PAPER}/{RUN}"


def read_json(path):
    return json.loads(path.read_text())


def test_the_claims_are_evidence(smoke_build):
    """Every prediction of the config is a row. The smoke model keeps 41% of its parameters out of the quantized
    linears (untied embeddings), below the regime card's bound of 60% that every claim requires: every row is not
    testable at this scale and says so with both numbers, and still shows its estimate where one can be made.
    The rows without an estimate are those the smoke study cannot make (one bit width, settings outside its study,
    no Hadamard setting); every other has a 95% interval over its two seeds around its value, and every
    implementation check passed."""
    import yaml

    document = read_json(smoke_build / f"results/smoke/{PAPER}/claims.json")
    specs = yaml.safe_load((smoke_build / f"papers/{PAPER}/config.yaml").read_text())[PAPER]["claims"]
    rows = {c["id"]: c for c in document["claims"]}
    assert set(rows) == set(specs)
    card = {r["id"]: r for r in document["regime"]}
    assert not card["quantized_share"]["inside"]
    assert 0.3 < card["quantized_share"]["ours"] < 0.6
    for cid, row in rows.items():
        assert row["verdict"] == "not testable at this scale", cid
        assert "quantized share of the parameters is 0.4" in row["outside_regime"], cid
    assert document["outside_regime"] == len(rows)
    no_estimate = {cid for cid, c in rows.items() if c["estimate"] is None}
    outside = {f"{claim}_{s}" for claim in ("winq_faster", "winq_lower_perplexity") for s in ("w2", "w3", "w1a8")}
    assert no_estimate == {"fewer_bits_near_zero_trend", "fewer_bits_largest_trend", "hadamard_winq_improves",
                           *outside}
    for cid in set(rows) - no_estimate:
        estimate = rows[cid]["estimate"]
        assert estimate["level"] == 0.95, cid
        assert estimate["low"] <= estimate["value"] <= estimate["high"], cid
        assert estimate["method"].startswith("t-interval over 2 seeds"), cid
    assert [c["id"] for c in document["checks"]] == ["paired_test_units", "scores_give_metrics",
                                                      "spectrum_from_probes", "bits_per_weight_identity",
                                                      "interpolation_count", "interpolation_keeps_codes",
                                                      "seed_cells"]
    assert all(c["passed"] for c in document["checks"])
    assert sum(sum(counts.values()) for counts in document["counts_by_kind"].values()) == len(rows)


def test_one_run_reruns_alone(smoke_build, plan_snakemake):
    dry = plan_snakemake(smoke_build, "--forcerun", TRAINED, "--", TRAINED)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {"wq_train": "1", "total": "1"}


def test_checkpoint_quantization_rebuilds_the_trained_weights(smoke_build):
    import torch

    from common.ptq import load_quantized_checkpoint
    from common.qat import load_lowbit_model

    trained = read_json(smoke_build / TRAINED / "lowbit_metadata.json")
    config = read_json(smoke_build / QUANTIZED / "quantization_config.json")
    assert config["modules"] == trained["qat"]["layers"]
    assert config["recipe"]["weights"]["elem"] == "binary"  # 1 bit: sign(W) alpha
    assert config["recipe"]["weights"]["rule"] is None  # learned scales
    assert read_json(smoke_build / QUANTIZED / "size_report.json")["bits_per_weight"] < 1.5
    _, _, handle = load_lowbit_model(smoke_build / TRAINED)
    rebuilt, _ = load_quantized_checkpoint(smoke_build / QUANTIZED)
    modules = dict(rebuilt.named_modules())
    for name in handle.names:
        assert torch.equal(modules[name].weight, handle.quantized_weight(name)), name
    record = read_json(smoke_build / f"results/smoke/{PAPER}/eval/{RUN}.json")  # eval/w1-winq/seed1.json
    assert record["quantization"]["recipe"] == config["recipe"]
    assert set(record["metrics"]) == {"perplexity", "cloze", "choice"}


def test_summary_reads_every_curve_and_spectrum(smoke_build):
    summary = read_json(smoke_build / f"results/smoke/{PAPER}/summary.json")
    assert [r["run"] for r in summary["runs"]] == [f"w1-{m}" for m in ("baseline", "winq", "interpolation", "noise")]
    assert len(summary["curves"]) == 8  # 4 runs x 2 seeds
    assert all(c["steps"] == [2, 4, 6, 8, 10, 12] for c in summary["curves"].values())  # 12 steps, every 2
    assert [h["cell"] for h in summary["hessian"]] == [f"w1-{m}/seed{k}" for m in ("baseline", "interpolation",
                                                                                   "noise") for k in (0, 1)]
    assert all(h["probes"] == 2 and h["steps"] == 5 for h in summary["hessian"])
    winq = read_json(smoke_build / TRAINED / "lowbit_metadata.json")["qat"]
    # K = a quarter of 12 steps: after steps 3, 6, 9 and 12 (the last included); the noise seeded with the cell's
    assert (winq["method"], winq["interpolations"], winq["every"], winq["noise_seed"]) == ("winq", 4, 3, 1)
    assert winq["format_version"] == 1


def test_a_wrong_config_value_stops_before_any_work(smoke_build, plan_snakemake, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("winq:\n  methods: [baseline, winqq]\n")
    run = plan_snakemake(smoke_build, "--configfile", str(bad), "--", f"reports/smoke/{PAPER}.html")
    assert run.returncode != 0
    assert "winqq" in run.stdout + run.stderr
