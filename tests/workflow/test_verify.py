"""``make verify`` (workflow/verify.py): the comparison on planted records, its configuration against the workflow's
rules, and end to end on the smoke build: the profile's sample recomputes identically and leaves the copy as it was,
and a deliberately altered record is caught; and CI's sample of the published default results (in a copy of this
checkout, once ``make publish`` has put them in it) recomputes identically."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_testing import copy_worktree

import workflow.verify as verify_module
from workflow.published_mtimes import metadata_file
from workflow.verify import (
    comparable,
    digest,
    first_difference,
    judged,
    papers_of,
    recompute,
    rederive_arguments,
    spread,
    verdict_changes,
    verify_config,
)

ROOT = Path(__file__).resolve().parents[2]
VOLATILE = frozenset({"wall_time_s", "seconds"})


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_records_are_compared_without_their_timings(tmp_path):
    a = write(tmp_path / "a.json", json.dumps({"ppl": 12.5, "wall_time_s": 3.0, "rows": [{"x": 1, "seconds": 9}]}))
    b = write(tmp_path / "b.json", json.dumps({"ppl": 12.5, "wall_time_s": 4.0, "rows": [{"x": 1, "seconds": 1}]}))
    assert comparable(a, VOLATILE) == comparable(b, VOLATILE) == {"ppl": 12.5, "rows": [{"x": 1}]}
    assert digest(comparable(a, VOLATILE)) == digest(comparable(b, VOLATILE))
    c = write(tmp_path / "c.csv", "step,loss,seconds\n0,6.28,0.34\n1,6.01,0.35\n")
    d = write(tmp_path / "d.csv", "step,loss,seconds\n0,6.28,0.51\n1,6.02,0.52\n")
    assert first_difference(comparable(c, VOLATILE), comparable(d, VOLATILE)) == "[1].loss: '6.01' -> '6.02'"
    e = write(tmp_path / "e.jsonl", '{"step": 1, "changed": 0.5}\n{"step": 2, "changed": 0.25}\n')
    f = write(tmp_path / "f.jsonl", '{"step": 1, "changed": 0.5}\n')
    assert first_difference(comparable(e, VOLATILE), comparable(f, VOLATILE)) == "the record: 2 -> 1 entries"
    assert comparable(write(tmp_path / "g.txt", "x"), VOLATILE) == b"x"
    text = "step,loss\n0,6.28\n"  # a gzip file by what it holds: two compressions of one CSV are one record
    fast, best = (tmp_path / "fast.csv.gz", tmp_path / "best.csv.gz")
    fast.write_bytes(gzip.compress(text.encode(), compresslevel=1, mtime=1))
    best.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    assert fast.read_bytes() != best.read_bytes()
    assert comparable(fast, VOLATILE) == comparable(best, VOLATILE) == [{"step": "0", "loss": "6.28"}]


@pytest.mark.parametrize(("published", "recomputed", "rtol", "expected"), [
    ({"a": {"b": 1.0}}, {"a": {"b": 1.0}}, 0.0, None),
    ({"a": {"b": 1.0}}, {"a": {"b": 1.0000001}}, 0.0, "a.b: 1.0 -> 1.0000001"),
    ({"a": {"b": 1.0}}, {"a": {"b": 1.0000001}}, 1e-6, None),  # another platform's stated tolerance
    ({"a": {"b": 1.0}}, {"a": {"b": 1.1}}, 1e-6, "a.b: 1.0 -> 1.1"),
    ({"a": "x"}, {"a": "y"}, 1e-3, "a: 'x' -> 'y'"),  # text is never close
    ({"a": 1}, {"b": 1}, 0.0, ".a: present -> absent"),
    ({"a": float("nan")}, {"a": float("nan")}, 1e-9, None),
    (b"\x00", b"\x01", 0.0, "the file: bytes differ"),
])
def test_first_difference(published, recomputed, rtol, expected):
    assert first_difference(published, recomputed, rtol) == expected


SPREADS = verify_config(ROOT, "default")["spreads"]
EVIDENCE = {"level": 0.95, "resamples": 2000, "seed": 0}
WINDOWS = {"mean_nll": 4.0, "nll_sum": 400.0, "perplexity": 54.6, "window_nll": [90.0, 110.0, 95.0, 105.0],
           "window_tokens": [25, 25, 25, 25], "windows": 4}


def test_a_perplexity_is_judged_by_the_bootstrap_over_its_windows():
    interval = spread(WINDOWS, "mean_nll", SPREADS["mean_nll"], EVIDENCE)
    assert interval.low < 4.0 < interval.high
    assert "4 windows" in interval.method
    moved = {**WINDOWS, "mean_nll": 4.01, "nll_sum": 401.0, "window_nll": [91.0, 110.0, 95.0, 105.0]}
    result, same = judged({"ppl": WINDOWS}, {"ppl": moved}, 1e-5, SPREADS, EVIDENCE)
    assert same is True
    assert result.startswith("inside its spread: ppl.mean_nll 4.0 -> 4.01 inside [")
    far = {**moved, "mean_nll": interval.high + 0.01}
    result, same = judged({"ppl": WINDOWS}, {"ppl": far}, 1e-5, SPREADS, EVIDENCE)
    assert same is False
    assert result.startswith("outside its spread: ppl.mean_nll")
    assert judged(WINDOWS, {**WINDOWS, "windows": 5}, 1e-5, SPREADS, EVIDENCE) == ("differs where no spread covers "
                                                                                  "it: windows: 4 -> 5", None)
    assert judged(WINDOWS, moved, 1e-5, {}, EVIDENCE) == ("mean_nll: 4.0 -> 4.01", False)  # bits expected


def test_an_accuracy_is_judged_by_its_clopper_pearson_interval():
    published = {"acc": 0.25, "correct": 100, "examples": 400, "example_correct": [1, 0]}
    result, same = judged(published, {**published, "acc": 0.2475, "correct": 99, "example_correct": [0, 0]},
                          1e-5, SPREADS, EVIDENCE)
    assert same is True
    assert result == ("inside its spread: acc 0.25 -> 0.2475 inside [0.208302, 0.295442] (Clopper-Pearson exact "
                      "binomial interval over 400 examples)")
    assert judged(published, {**published, "acc": 0.5, "correct": 200}, 1e-5, SPREADS, EVIDENCE)[1] is False
    assert judged(published, {**published, "acc": 0.25 * (1 + 1e-7)}, 1e-5, SPREADS, EVIDENCE) == (
        "within rtol 1e-05", True)


def test_verdicts_are_compared_row_by_row():
    row = {"id": "r", "verdict": "reproduced", "estimate": {"value": 1.0, "low": 0.5, "high": 1.5}}
    published = {"claims": [row], "checks": [{"id": "c", "passed": True}]}
    same = verdict_changes(published, published, 1e-5)
    assert same == {"verdicts": [], "outside": [], "moved": []}
    moved = {"claims": [{**row, "estimate": {"value": 1.2, "low": 0.7, "high": 1.7}}],
             "checks": [{"id": "c", "passed": True}]}
    assert verdict_changes(published, moved, 1e-5)["moved"] == ["r: 1 -> 1.2 in [0.5, 1.5]"]
    out = {"claims": [{**row, "estimate": {"value": 1.6, "low": 1.1, "high": 2.1}}], "checks": []}
    changes = verdict_changes(published, out, 1e-5)
    assert changes["outside"] == ["r: 1 -> 1.6 in [0.5, 1.5]"]
    assert changes["verdicts"] == ["check c: passed True -> None"]
    flipped = {"claims": [{**row, "verdict": "inconclusive"}], "checks": [{"id": "c", "passed": True}]}
    assert verdict_changes(published, flipped, 1e-5)["verdicts"] == ["r: reproduced -> inconclusive"]


def test_cells_belong_to_the_paper_whose_rules_make_them():
    rows = [{"output_file": "results/a/x.json", "rule": "fib_mse_cells"},
            {"output_file": "results/b/y.json", "rule": "wq_evaluate"}]
    config = verify_config(ROOT, "default")
    assert papers_of(["results/a/x.json", "results/b/y.json", "results/c"], rows, config) == {
        "finer_is_better": ["results/a/x.json"], "winq": ["results/b/y.json"]}
    assert rederive_arguments(["c1"], ["p/claims.json"]) == ["--forcerun", "c1", "--", "c1", "p/claims.json"]
    assert rederive_arguments(["c1"], []) == ["--force", "c1"]


def test_metadata_file_is_snakemakes_name():
    assert metadata_file("data/tokenizers/sotu-bpe2048").name == "ZGF0YS90b2tlbml6ZXJzL3NvdHUtYnBlMjA0OA=="


def test_the_configured_cells_are_rules_of_their_papers():
    config = verify_config(ROOT, "default")
    for paper, rules in config["cells"].items():
        defined = {line.split()[1].rstrip(":") for line in (ROOT / f"papers/{paper}/rules.smk").read_text().splitlines()
                   if line.startswith("rule ")}
        assert set(rules) <= defined, (paper, set(rules) - defined)
    assert sorted(config["cells"]) == sorted(p.parent.name for p in ROOT.glob("papers/*/rules.smk"))
    assert {Path(cell).parts[1] for cell in config["sample"]} == set(config["cells"])  # a cell of every paper
    smoke = verify_config(ROOT, "smoke")
    assert all(cell.startswith("results/smoke/") for cell in smoke["sample"])
    assert yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())["verify"]["sample"] == config["sample"]


def test_what_a_recomputation_made_first_is_removed_and_what_it_rewrote_put_back(tmp_path, monkeypatch):
    """The cell's job needs a rescaled model that the publication left out: the run makes it first (with its
    record), and afterwards it is gone again, so that it does not postdate the published results; the cell, its
    record and its log are put back as they were (contents and times)."""
    cell, model, log = "results/p/cell.json", "results/models/sweep/m", "logs/p/cell.log"
    for name, text in {cell: '{"mse": 1.0, "seconds": 3}', str(metadata_file(cell)): '{"endtime": 2, "starttime": 1}',
                       log: "published log"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = {name: ((tmp_path / name).read_bytes(), (tmp_path / name).stat().st_mtime_ns)
              for name in (cell, str(metadata_file(cell)), log)}
    plan = f"rule rescale:\n    output: {model}\nrule cells:\n    input: {model}\n    output: {cell}\n    log: {log}\n"

    def fake_snakemake(profile, folder, *args):
        if "--dry-run" not in args:
            (folder / model).mkdir(parents=True)
            (folder / model / "model.safetensors").write_text("weights")
            for name, text in {str(metadata_file(model)): "{}", cell: '{"mse": 1.0, "seconds": 4}',
                               str(metadata_file(cell)): '{"endtime": 9, "starttime": 5}', log: "new log"}.items():
                (folder / name).write_text(text)
        return subprocess.CompletedProcess(args, 0, plan, "")

    monkeypatch.setattr(verify_module, "snakemake", fake_snakemake)
    rows, rederived = recompute("default", tmp_path, [cell], VOLATILE)
    assert [(row["result"], row["seconds"]) for row in rows] == [("identical", 4)]
    assert rederived == {}
    assert not (tmp_path / model).exists()
    assert not (tmp_path / metadata_file(model)).exists()
    assert {name: ((tmp_path / name).read_bytes(), (tmp_path / name).stat().st_mtime_ns) for name in before} == before


def verify(copy: Path, *args: str, profile: str = "smoke") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workflow.verify", "--profile", profile, *args], cwd=copy,
                          capture_output=True, text=True, timeout=1200, check=False)


@pytest.mark.slow
def test_the_sample_recomputes_identically_and_an_altered_record_is_caught(smoke_build, run_snakemake):
    """``make verify PROFILE=smoke``: the profile's sample (config verify.sample), recomputed as a user's command
    does (cold steps); then one record altered in its last digits. (Every cell of one paper: the same code on more
    cells, whose selection tests/workflow/test_report_commands.py runs.)"""
    cells = verify_config(smoke_build, "smoke")["sample"]
    kept = [*cells, *(str(metadata_file(c)) for c in cells)]
    before = {name: (smoke_build / name).read_bytes() for name in kept}
    done = verify(smoke_build)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for cell in cells:
        row = next(line for line in lines if line.startswith(cell + " "))
        assert row.endswith("identical"), row
        assert " s  " in row  # the job's time
    assert f"{len(cells)} of {len(cells)} cells identical" in done.stdout
    assert {name: (smoke_build / name).read_bytes() for name in kept} == before  # put back as it was

    cell = next(c for c in cells if "/mse/" in c)
    record = smoke_build / cell
    data = json.loads(before[cell])
    data["rows"][0]["mse"] *= 1 + 1e-12  # a change in the last digits of one number
    record.write_text(json.dumps(data))
    try:
        done = verify(smoke_build, "--cells", cell)
        assert done.returncode == 1, done.stdout + done.stderr[-3000:]
        assert "1 of 1 cells differ from their records" in done.stdout
        assert "rows[0].mse: " in done.stdout
        assert json.loads(record.read_text()) == data  # the altered record stays as it was found
    finally:
        record.write_bytes(before[cell])


def test_a_bad_request_is_named():
    done = subprocess.run([sys.executable, "-m", "workflow.verify", "--paper", "nopaper"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "--paper 'nopaper' is not a paper of this checkout" in done.stderr
    done = subprocess.run([sys.executable, "-m", "workflow.verify", "--rtol", "-1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "--rtol must be a finite number >= 0, got -1.0" in done.stderr
    done = subprocess.run([sys.executable, "-m", "workflow.verify", "--profile", "nope"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "unknown profile 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "workflow.status", "--profile", "nope"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "workflow/profiles/nope" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_published_sample_recomputes_identically(tmp_path):
    """``make verify`` on the published default results, as CI's check of them: the default profile's sample (one
    cheap cell a paper, one from the published `small`), recomputed cold from the published base models, corpora
    and configs in a copy of this checkout, identical to the published records; on a machine that is not the
    recorded platform (results/platform.json), within config ``verify.other_platform_rtol``, which the output says."""
    cells = verify_config(ROOT, "default")["sample"]
    if not all((ROOT / cell).is_file() and (ROOT / metadata_file(cell)).is_file() for cell in cells):
        pytest.skip("this checkout has no published default results (make publish)")
    copy_worktree(tmp_path)
    done = verify(tmp_path, profile="default")
    print(done.stdout)  # the table, and the platforms where they differ, in CI's log
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    status = subprocess.run([sys.executable, "-m", "workflow.status", "--profile", "default"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, check=False)
    assert "no result is stale" in status.stdout, status.stdout  # what it made first is gone, the records put back
    elsewhere = "note: the published records were not computed on this platform" in done.stdout
    assert f"{len(cells)} of {len(cells)} cells identical" in done.stdout or (
        elsewhere and f"{len(cells)} of {len(cells)} cells agree within the tolerance or their published spreads"
        in done.stdout and "verdicts changed" not in done.stdout)
