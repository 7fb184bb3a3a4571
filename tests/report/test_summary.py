"""``python -m common.report.summary``: the README's results table from planted claims documents (workflow.status
writes it into the README with its status column)."""

import json
import os
import subprocess

import pytest

from common.report.summary import (
    BEGIN,
    END,
    claims_row,
    commit_date,
    main,
    paper_keys,
    replace_table,
    results_table,
    run_label,
)

NOON_2026_12_03 = 1796299200  # 2026-12-03T12:00:00Z


@pytest.fixture
def repo(tmp_path, claims_doc):
    """Three paper pipelines (``alpha`` with claims and a report context, ``beta`` with claims only, ``gamma``
    built in the smoke profile only) and a folder without a pipeline."""
    for paper in ("alpha", "beta", "gamma"):
        (tmp_path / "papers" / paper).mkdir(parents=True)
        (tmp_path / "papers" / paper / "rules.smk").write_text("")
    (tmp_path / "papers" / "notes").mkdir()
    for folder in ("results/alpha", "results/beta", "results/smoke/gamma"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "claims.json").write_text(json.dumps(claims_doc))
        os.utime(tmp_path / folder / "claims.json", (NOON_2026_12_03, NOON_2026_12_03))
    (tmp_path / "results/alpha/report").mkdir()
    (tmp_path / "results/alpha/report/context.json").write_text(json.dumps(
        {"paper": {"title": "Alpha & co"}, "provenance": {"git": {"commit": "0123456789abcdef", "dirty": True}}}))
    return tmp_path  # not a git repository: the commit's date is unknown, the claims file's is used


HEADER = ("| paper | reproduced | contradicted | inconclusive | not testable | paper's claims tested | our findings "
          "| checks passed | claims made at |\n"
          "| --- | --: | --: | --: | --: | --: | --: | --: | --- |\n")


def test_paper_keys_are_the_folders_with_a_pipeline(repo):
    assert paper_keys(repo) == ["alpha", "beta", "gamma"]


def test_claims_row_counts_every_verdict_and_the_checks(claims_doc):
    # the planted document: reproduced twice (one an equivalence), contradicted, inconclusive, not testable once
    assert claims_row(claims_doc) == {
        "counts": {"reproduced": 2, "contradicted": 1, "inconclusive": 1, "not testable at this scale": 1},
        "tested": 3, "listed": 4, "findings": 0, "checks_passed": 3, "checks": 3}


def test_results_table_of_the_default_profile(repo):
    assert results_table(repo) == HEADER + (
        "| [Alpha & co](reports/alpha.html) | 2 | 1 | 1 | 1 | 3 of 4 | 0 | 3 of 3 | commit 0123456 + "
        "uncommitted changes (2026-12-03) |\n"
        "| [beta](reports/beta.html) | 2 | 1 | 1 | 1 | 3 of 4 | 0 | 3 of 3 | 2026-12-03 |\n"
        "| gamma (`reports/gamma.html`) | - | - | - | - | - | - | - | not built |")


def test_results_table_of_another_profile_reads_and_links_its_folders(repo):
    assert results_table(repo, "smoke").splitlines()[2:] == [
        "| alpha (`reports/smoke/alpha.html`) | - | - | - | - | - | - | - | not built |",
        "| beta (`reports/smoke/beta.html`) | - | - | - | - | - | - | - | not built |",
        "| [gamma](reports/smoke/gamma.html) | 2 | 1 | 1 | 1 | 3 of 4 | 0 | 3 of 3 | 2026-12-03 |"]


def test_bad_documents_are_named(repo, claims_doc):
    claims_doc["claims"][0]["verdict"] = "plausible"
    (repo / "results/beta/claims.json").write_text(json.dumps(claims_doc))
    with pytest.raises(ValueError, match=r"results/beta/claims.json: unknown verdicts \['plausible'\]"):
        results_table(repo)
    with pytest.raises(ValueError, match=r"'x\.json' has no 'checks'"):
        claims_row({"claims": []}, "'x.json'")
    with pytest.raises(ValueError, match="no paper pipeline"):
        results_table(repo / "papers")


def test_replace_table_keeps_everything_outside_the_markers():
    text = f"# Title\n\n{BEGIN}\n| old |\n| row |\n{END}\n\nafter\n"
    assert replace_table(text, "| new |") == f"# Title\n\n{BEGIN}\n| new |\n{END}\n\nafter\n"
    for broken in (f"{BEGIN}\n", f"{END}\n{BEGIN}\n", f"{BEGIN}\n{BEGIN}\n{END}\n"):
        with pytest.raises(ValueError, match=r"README\.md must hold the line"):
            replace_table(broken, "| new |", "README.md")


def test_the_status_column(repo):
    table = results_table(repo, status={"alpha": "current", "beta": "stale: 3 of 40"}).splitlines()
    assert table[0].endswith("| claims made at | results now |")
    assert table[1].endswith("| --- | --- |")
    assert table[2].endswith("(2026-12-03) | current |")
    assert table[3].endswith("| 2026-12-03 | stale: 3 of 40 |")
    assert table[4].endswith("| not built | - |")
    under_way = results_table(repo, status={"alpha": "current", "gamma": "current"}, claims=False).splitlines()
    assert under_way[2:] == [
        "| alpha (`reports/alpha.html`) | - | - | - | - | - | - | - | not built | build under way, current |",
        "| beta (`reports/beta.html`) | - | - | - | - | - | - | - | not built | - |",
        "| gamma (`reports/gamma.html`) | - | - | - | - | - | - | - | not built | build under way, current |"]


def test_the_date_of_the_commit_the_claims_were_made_at(repo):
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", "--date=2026-11-30T10:00:00Z")
    commit = git("rev-parse", "HEAD")
    context = {"provenance": {"git": {"commit": commit, "dirty": False}}}
    assert commit_date(commit, repo) == git("show", "-s", "--format=%cs", commit)
    assert run_label(repo / "results/beta/claims.json", context, repo) == \
        f"commit {commit[:7]} ({commit_date(commit, repo)})"
    assert commit_date("0" * 40, repo) is None


def test_command_line_prints(repo, capsys):
    assert main(["--root", str(repo)]) == 0
    assert capsys.readouterr().out == results_table(repo) + "\n"
    assert main(["--root", str(repo / "papers")]) == 2
    assert "no paper pipeline" in capsys.readouterr().err
