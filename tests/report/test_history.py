"""common.report.history on a toy git history: when each prediction was written, and a prediction revised after
its results existed (a README results-table row, a published claims.json) caught with its earlier prediction; a
revision known from review read at its commit's parent; outside a checkout nothing is dated."""

import json
import os
import subprocess

import pytest
import yaml

from common.report import history
from common.report.history import NO_GIT, prediction_record, results_records, row_histories


def row(threshold, statistic="ppl(4) / ppl(8) - 1", requires=None):
    entry = {"kind": "paper", "statistic": statistic, "direction": "above", "threshold": threshold}
    return {**entry, "requires": requires} if requires else entry


def commit(repo, files, message, day):
    """Write ``files`` (path -> text or mapping as YAML) and commit them on 2026-12-``day`` at noon UTC."""
    for path, content in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    stamp = f"2026-12-{day:02d}T12:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", message], cwd=repo, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def config(**rows):
    return {"demo": {"claims": rows, "coverage": []}}


def readme(built):
    return ("# demo\n\n| paper | reproduced | claims written |\n| --- | --: | --- |\n"
            f"| [Demo](reports/demo.html) | 1 | 2026-12-03, commit {built[:7]} + uncommitted changes |\n")


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    subprocess.run(["git", "config", "user.email", "t@example.org"], cwd=tmp_path, check=True)
    subprocess.run(["git", "config", "user.name", "t"], cwd=tmp_path, check=True)
    return tmp_path


def histories(repo, entries, revised=None):
    predictions = {cid: prediction_record(e["statistic"], e["direction"], e["threshold"], e.get("requires") or {})
                   for cid, e in entries.items()}
    return row_histories(predictions, revised or {}, "demo", repo)


def test_a_prediction_changed_after_its_results_is_caught_with_the_earlier_one(repo):
    commit(repo, {"papers/demo/config.yaml": config(a=row(0.5), b=row(2.0))}, "predictions", 1)
    c1 = commit(repo, {"papers/demo/config.yaml": config(a=row(0.5), b=row(1.0))}, "b before any result", 2)
    r = commit(repo, {"README.md": readme(c1)}, "results table", 3)
    entries = {"a": row(0.3), "b": row(1.0), "c": row(0.0)}
    c3 = commit(repo, {"papers/demo/config.yaml": config(**entries)}, "a tightened after results; c added", 4)
    result = histories(repo, entries)
    assert result["a"]["prediction"] == {"commit": c3, "date": "2026-12-04T12:00:00+00:00"}
    assert result["a"]["revision"] == {
        "earlier": {"statistic": "ppl(4) / ppl(8) - 1", "direction": "above", "threshold": 0.5, "requires": []},
        "commit": c3, "date": "2026-12-04T12:00:00+00:00", "how": "git",
        "results": f"README.md at {r[:7]} (2026-12-03), built at {c1[:7]}"}
    assert result["b"] == {"prediction": {"commit": c1, "date": "2026-12-02T12:00:00+00:00"}, "revision": {}}
    assert result["c"] == {"prediction": {"commit": c3, "date": "2026-12-04T12:00:00+00:00"}, "revision": {}}
    # a revision known from review (no tracked results before c1): the earlier prediction is c1's parent's
    reviewed = histories(repo, entries, {"b": {"commit": c1[:7], "why": "the review found the results of day 1"}})
    assert reviewed["b"]["revision"]["earlier"]["threshold"] == 2.0
    assert reviewed["b"]["revision"]["commit"] == c1
    assert reviewed["b"]["revision"]["how"] == "review: the review found the results of day 1"
    with pytest.raises(ValueError, match=r"demo\.claims\.b\.revised: no prediction of the row at the parent of "
                                         r"commit 'c0ffee0'"):
        histories(repo, entries, {"b": {"commit": "c0ffee0", "why": "x"}})
    stated = {"commit": c3[:7], "why": "made and revised in one commit",
              "earlier": {"statistic": "mean ratio", "direction": "below", "threshold": 0.02}}
    made = histories(repo, entries, {"c": stated})["c"]  # no results record has c, c3's parent has no c
    assert made["revision"]["earlier"] == {"statistic": "mean ratio", "direction": "below", "threshold": 0.02,
                                           "requires": []}
    assert made["revision"]["commit"] == c3


def test_requires_and_statistic_changes_are_revisions_and_uncommitted_ones_are_named(repo):
    c0 = commit(repo, {"papers/demo/config.yaml": config(a=row(0.5))}, "predictions", 1)
    commit(repo, {"results/demo/claims.json": json.dumps({"claims": []}),
                  "results/demo/report/context.json": json.dumps({"provenance": {"git": {"commit": c0}}})},
           "published results", 2)
    assert [r["built"] for r in results_records(repo, "demo")] == [c0]
    premise = row(0.5, requires={"premise": "the baseline stagnates"})
    commit(repo, {"papers/demo/config.yaml": config(a=premise)}, "a premise added after results", 3)
    assert histories(repo, {"a": premise})["a"]["revision"]["earlier"]["requires"] == []
    assert "why" not in histories(repo, {"a": premise})["a"]["revision"]
    # git finds the revision; the config says why (the commit it names is the one git found)
    stated = histories(repo, {"a": premise}, {"a": {"commit": "HEAD", "why": "the premise, before the new runs"}})
    assert (stated["a"]["revision"]["how"], stated["a"]["revision"]["why"]) == ("git",
                                                                               "the premise, before the new runs")
    (repo / "papers/demo/config.yaml").write_text(yaml.safe_dump(config(a=row(0.5, statistic="ppl(4) - ppl(8)"))))
    dirty = histories(repo, {"a": row(0.5, statistic="ppl(4) - ppl(8)")})["a"]
    assert dirty["prediction"] == {"note": "uncommitted changes"}
    assert dirty["revision"]["earlier"]["statistic"] == "ppl(4) / ppl(8) - 1"
    assert dirty["revision"]["commit"] not in ("", None)


def test_a_prediction_written_before_every_result_is_not_revised(repo):
    c0 = commit(repo, {"papers/demo/config.yaml": config(a=row(0.5))}, "predictions", 1)
    commit(repo, {"README.md": readme(c0)}, "results", 2)
    commit(repo, {"papers/demo/config.yaml": config(a={**row(0.5), "statement": "reworded"})}, "wording", 3)
    assert histories(repo, {"a": row(0.5)})["a"] == {"prediction": {"commit": c0, "date": "2026-12-01T12:00:00+00:00"},
                                                     "revision": {}}


def test_outside_a_checkout_nothing_is_dated(tmp_path):
    assert histories(tmp_path, {"a": row(0.5)}) == {"a": {"prediction": {"note": NO_GIT}, "revision": {}}}


def test_each_version_of_the_config_is_parsed_once_whatever_the_number_of_rows(repo, monkeypatch):
    entries = {f"r{i}": row(0.1 * i) for i in range(6)}
    commit(repo, {"papers/demo/config.yaml": config(**entries)}, "predictions", 1)
    commit(repo, {"papers/demo/config.yaml": config(**{**entries, "r0": row(0.05)})}, "r0 tightened", 2)
    parsed = []
    monkeypatch.setattr(yaml, "safe_load", lambda text: parsed.append(text) or yaml.load(text, yaml.SafeLoader))
    history.parsed_config.cache_clear()
    result = histories(repo, {**entries, "r0": row(0.05)})
    assert len(parsed) == 2  # two versions (the working tree's is the newest), not one per row and version
    assert result["r1"]["prediction"]["date"] == "2026-12-01T12:00:00+00:00"
    assert result["r0"]["prediction"]["date"] == "2026-12-02T12:00:00+00:00"
