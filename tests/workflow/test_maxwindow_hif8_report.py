"""End to end, maxwindow_hif8 specifics from the session's smoke build (``conftest.py``): the claims it must check,
each training cell <run>/seed<k> a file target that reruns alone, trained models checkpoint-quantized to HiF8 codes
on exactly the layers QAT trained and evaluated in BF16 and HiF8, telemetry that accounts for every layer, role,
step and call, and a wrong config value that stops the run before any work. The checks every report shares are in
``test_reports.py``."""

import csv
import gzip
import json
import re

import pytest
import yaml

from common.quantizers import TELEMETRY_FIELDS
from common.recipes import ROLES
from papers.maxwindow_hif8.run import TELEMETRY_FILE

pytestmark = pytest.mark.slow
PAPER = "maxwindow_hif8"
RECIPE = "max_window-lrlow-w4/seed1"  # the smoke profile's warmup is 4 steps; its seeds 0 and 1
RUN = f"results/smoke/models/trained/{PAPER}/{RECIPE}"
CALLS = 2  # smoke: grad_accum 2, one history entry per call


def read_json(path):
    return json.loads(path.read_text())


def test_the_paper_claims_are_all_checked(smoke_build):
    document = read_json(smoke_build / f"results/smoke/{PAPER}/claims.json")
    claims = {c["id"]: c for c in document["claims"]}
    specs = yaml.safe_load((smoke_build / f"papers/{PAPER}/config.yaml").read_text())[PAPER]["claims"]
    assert list(claims) == list(specs)
    assert [c["id"] for c in document["checks"] if not c["passed"]] == []
    assert {"telemetry_accounts_max_window_lrlow_w4_seed0", "telemetry_accounts_max_window_lrlow_w4_seed1"} <= {
        c["id"] for c in document["checks"]}
    for untrained in ("forgets_current", "cts_jitter", "cts_hurts", "exp_smooth_saturates"):
        assert claims[untrained]["verdict"] == "not testable at this scale"  # smoke trains no current/exp_smooth
    for claim in claims.values():
        assert (claim["estimate"] is None) == bool(claim["reason"]), claim["id"]
        if claim["estimate"] is not None:  # two seeds: every interval is over them
            assert "over 2 seeds" in claim["estimate"]["method"], claim["id"]


def test_one_run_reruns_alone(smoke_build, plan_snakemake):
    dry = plan_snakemake(smoke_build, "--forcerun", RUN, "--", RUN)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {"mw_train": "1", "total": "1"}


def test_checkpoint_quantization_holds_hif8_codes_of_the_trained_layers(smoke_build):
    trained = read_json(smoke_build / RUN / "lowbit_metadata.json")
    quantized = smoke_build / f"results/smoke/models/quantized/hif8_w8a8/trained/{PAPER}/{RECIPE}"
    config = read_json(quantized / "quantization_config.json")
    assert config["modules"] == trained["qat"]["layers"]
    assert config["recipe"]["weights"]["elem"] == "hif8"
    assert config["recipe"]["activations"]["rule"] == "unit"
    record = read_json(smoke_build / f"results/smoke/{PAPER}/eval/hif8/{RECIPE}/pretrain.json")
    assert record["quantization"]["recipe"] == config["recipe"]
    assert set(record["metrics"]) == {"perplexity", "cloze", "choice"}
    shift = read_json(smoke_build / f"results/smoke/{PAPER}/eval/hif8/{RECIPE}/shift.json")
    assert set(shift["metrics"]) == {"perplexity"}
    plain = read_json(smoke_build / f"results/smoke/{PAPER}/eval/bf16/{RECIPE}/pretrain.json")  # the paper's evaluation
    assert plain["quantization"] is None
    assert plain["metrics"]["perplexity"]["perplexity"] != record["metrics"]["perplexity"]["perplexity"]


def test_telemetry_accounts_for_every_layer_role_and_step(smoke_build):
    runs = smoke_build / f"results/smoke/{PAPER}/runs"
    layers = read_json(smoke_build / RUN / "lowbit_metadata.json")["qat"]["layers"]
    with gzip.open(runs / RECIPE / TELEMETRY_FILE, "rt", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    steps = sorted({int(r["step"]) for r in rows})
    assert steps == list(range(4, 12))  # HiF8 from the warmup step W = 4 to the last of 12 steps
    assert len(rows) == len(layers) * len(ROLES) * len(steps) * CALLS
    assert all(0 <= float(r["rel_error"]) < 1 for r in rows)
    cold = [r for r in rows if r["cold_start"] == "True"]
    assert {int(r["step"]) for r in cold} == {4}  # observers reset at W: each role's first scale is its own amax
    saturation = read_json(runs / RECIPE / "saturation.json")
    for role in ROLES:
        mine = [r for r in rows if r["role"] == role and r["cold_start"] == "False"]
        assert saturation[role]["calls"] == len(mine)
        assert saturation[role]["overflow_rate"] == sum(r["overflow"] == "True" for r in mine) / len(mine)
    assert gzip.decompress((runs / "bf16-lrlow/seed0" / TELEMETRY_FILE).read_bytes()) == \
        (",".join(TELEMETRY_FIELDS) + "\n").encode()
    qat = read_json(smoke_build / RUN / "lowbit_metadata.json")["qat"]
    assert (qat["history_unit"], qat["observer"]) == ("call", "max_window")
    seeds = {read_json(runs / f"{RECIPE[:-1]}{k}/train_summary.json")["config"]["seed"] for k in (0, 1)}
    assert seeds == {0, 1}


def test_a_wrong_config_value_stops_before_any_work(smoke_build, plan_snakemake, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("maxwindow_hif8:\n  observers: [most_recent, max_windw]\n")
    run = plan_snakemake(smoke_build, "--configfile", str(bad), "--", f"reports/smoke/{PAPER}.html")
    assert run.returncode != 0
    assert "max_windw" in run.stdout + run.stderr
