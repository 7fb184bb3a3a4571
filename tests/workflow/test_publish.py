"""``make publish`` (workflow/publish.py) on a planted build in a toy git repository (Snakemake's summary planted
too): what is staged, what is left out, and every reason it refuses."""

import json
import subprocess
from pathlib import Path

import pytest

import workflow.publish as publish_module
from common.report.summary import BEGIN, END
from workflow.build_platform import recorded_platforms
from workflow.publish import (
    cited_unpublished,
    cut_off,
    excluded,
    final_outputs,
    output_files,
    publish,
    remade_in_clone,
    replaced_large,
    report_problems,
)
from workflow.published_mtimes import metadata_file
from workflow.status import PlannedJob, paper_of

COMMIT_FIELD = "provenance"
HERE = {"machine": "x86_64", "cpu": "a CPU", "vector_unit": "AVX512", "torch": "2.13.0+cpu"}
PLATFORM = "results/platform.json"
CONFIG = """profile: default
profiles: {default: {}}
publish: {max_mb: 1, large_mb: 0.001, exclude: [results/models/trained/*]}
verify: {volatile: [], cells: {alpha: [a_cells]}, sample: [results/alpha/cells/c1.json]}
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def row(path: str, rule: str, date: str = "Sat") -> dict[str, str]:
    return {"output_file": path, "date": date, "rule": rule, "log-file(s)": "", "status": "ok", "plan": "no update"}


@pytest.fixture
def build(tmp_path, monkeypatch):
    """A repository with one paper, ``alpha``, whose default build is finished at its last commit: two cells, a
    base model folder, a trained checkpoint (left out), claims, a context, the report and the index, each with its
    Snakemake record."""
    root = tmp_path
    (root / "papers/alpha").mkdir(parents=True)
    (root / "papers/alpha/rules.smk").write_text("")
    (root / "workflow/config").mkdir(parents=True)
    (root / "workflow/config/default.yaml").write_text(CONFIG)
    (root / "README.md").write_text(f"intro\n{BEGIN}\nold\n{END}\n")
    (root / "reports").mkdir()
    (root / "reports/README.md").write_text("reports\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code")
    commit = git(root, "rev-parse", "HEAD").strip()
    files = {
        "results/alpha/cells/c1.json": "{}", "results/alpha/cells/c2.json": "{}",
        "results/models/base/m/model.safetensors": "w" * 2000, "results/models/base/m/config.json": "{}",
        "results/models/trained/alpha/r/seed0/model.safetensors": "t" * 2000,
        "results/alpha/claims.json": json.dumps({"claims": [], "checks": [], "coverage": []}),
        "results/alpha/report/context.json": json.dumps(
            {"paper": {"title": "Alpha"}, COMMIT_FIELD: {"git": {"commit": commit, "dirty": False}}}),
        "reports/alpha.html": "<html>", "reports/index.html": "<html>",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "reports/alpha.SHA256SUMS").write_text("0" * 64 + "  results/alpha/cells/c1.json\n"
                                                   + "0" * 64 + "  papers/alpha/rules.smk\n")  # tracked: in a clone
    rows = [row("results/alpha/cells/c1.json", "a_cells"), row("results/alpha/cells/c2.json", "a_cells"),
            row("results/models/base/m", "pretrain_base_model"),
            row("results/models/trained/alpha/r/seed0", "a_train"),
            row("results/alpha/claims.json", "a_claims"), row("results/alpha/report/context.json", "a_context"),
            row("reports/alpha.html", "render_report"), row("reports/alpha.SHA256SUMS", "render_report"),
            row("reports/index.html", "report_index"), row("data/archives/x.tgz", "fetch_corpus", date="-")]
    for entry in rows:
        if entry["date"] != "-":
            record = root / metadata_file(entry["output_file"])
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text("{}")
    reads = {"results/alpha/cells/c1.json": ("results/models/base/m",), "results/alpha/cells/c2.json":
             ("results/models/base/m",), "results/alpha/claims.json": ("results/alpha/cells/c1.json",
                                                                       "results/alpha/cells/c2.json")}
    jobs = [PlannedJob(entry["rule"], reads.get(entry["output_file"], ()), (entry["output_file"],)) for entry in rows]
    monkeypatch.setattr(publish_module, "summary_rows", lambda profile, folder: rows)
    monkeypatch.setattr(publish_module, "planned_jobs", lambda profile, folder: jobs)
    monkeypatch.setattr(publish_module, "this_platform", lambda: HERE)
    return root


def test_a_finished_build_is_staged_with_its_records(build):
    done = publish(build, "default")
    staged = set(git(build, "diff", "--cached", "--name-only").split())
    outputs = {"results/alpha/cells/c1.json", "results/alpha/cells/c2.json", "results/models/base/m/config.json",
               "results/models/base/m/model.safetensors", "results/alpha/claims.json",
               "results/alpha/report/context.json", "reports/alpha.html", "reports/alpha.SHA256SUMS",
               "reports/index.html"}
    records = {str(metadata_file(p)) for p in ("results/alpha/cells/c1.json", "results/alpha/cells/c2.json",
                                                "results/models/base/m", "results/alpha/claims.json",
                                                "results/alpha/report/context.json", "reports/alpha.html",
                                                "reports/alpha.SHA256SUMS", "reports/index.html")}
    assert staged == outputs | records | {"README.md", PLATFORM}  # not the trained checkpoint, nor its record
    assert done["files"] == len(outputs | records) + 1
    assert recorded_platforms(build, "default") == [HERE]
    assert f"| [Alpha](reports/alpha.html) | 0 | 0 | 0 | 0 | 0 of 0 | 0 | 0 of 0 | commit {done['commit'][:7]} (" \
        in (build / "README.md").read_text()
    assert (build / "README.md").read_text().splitlines()[2].endswith("| results now |")
    published = [name for name in outputs | records if paper_of(name, "default", ["alpha"]) == "alpha"]
    assert done["bytes"]["alpha"] == sum((build / name).stat().st_size for name in published)
    assert done["bytes"]["shared"] == 2002 + 2 * len(records) + len("<html>")  # base model, records, index


def test_a_republication_drops_what_is_no_longer_made_and_keeps_a_large_file_once(build, monkeypatch):
    publish(build, "default")
    git(build, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "publish")
    rows = publish_module.summary_rows("default", build)
    monkeypatch.setattr(publish_module, "summary_rows", lambda profile, folder: [r for r in rows if "c2" not in
                                                                                r["output_file"]])
    publish(build, "default")
    assert git(build, "diff", "--cached", "--name-status").split() == [
        "D", str(metadata_file("results/alpha/cells/c2.json")), "D", "results/alpha/cells/c2.json"]  # same platform
    (build / "results/models/base/m/model.safetensors").write_text("v" * 2000)  # pretrained again, other bytes
    with pytest.raises(ValueError, match=r"model\.safetensors: committed with other bytes"):
        publish(build, "default")
    publish(build, "default", replace_large=True)
    assert replaced_large(build, ["results/models/base/m/model.safetensors"], 0.001) == [
        "results/models/base/m/model.safetensors"]  # staged, not yet committed


def unfinished(root: Path) -> None:
    """The build before its last steps: no context, no report, no SHA256SUMS."""
    for name in ("results/alpha/report/context.json", "reports/alpha.html", "reports/alpha.SHA256SUMS"):
        (root / name).unlink()


@pytest.mark.parametrize(("change", "message"), [
    (lambda root: (root / "reports/index.html").unlink(), "missing report reports/index.html"),
    (unfinished, "missing report reports/alpha.SHA256SUMS\n  alpha: no report context yet"),
    (lambda root: (root / "reports/alpha.SHA256SUMS").write_text("0" * 64 + "  results/models/trained/alpha/r/"
                                                                  "seed0/model.safetensors\n"),
     "cited but not published: alpha.SHA256SUMS: results/models/trained/alpha/r/seed0/model.safetensors"),
    (lambda root: (root / metadata_file("results/alpha/claims.json")).unlink(),
     "no Snakemake record .snakemake/metadata/"),
    (lambda root: (root / "results/alpha/cells/c1.json").write_text("x" * 2 * 1024 * 1024),
     "MiB to publish, over publish.max_mb = 1"),
])
def test_what_refuses(build, change, message):
    change(build)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        publish(build, "default", dry_run=True)
    assert git(build, "diff", "--cached", "--name-only") == ""


def test_a_build_under_way_is_staged_without_its_claims_context_and_reports(build):
    unfinished(build)
    done = publish(build, "default", unfinished=True)
    staged = set(git(build, "diff", "--cached", "--name-only").split())
    made = ("results/alpha/cells/c1.json", "results/alpha/cells/c2.json", "results/models/base/m")
    assert staged == {"results/alpha/cells/c1.json", "results/alpha/cells/c2.json",
                      "results/models/base/m/config.json", "results/models/base/m/model.safetensors",
                      *(str(metadata_file(p)) for p in made), "README.md", PLATFORM}  # not the claims, checkpoint
    assert "| alpha (`reports/alpha.html`) | - | - | - | - | - | - | - | not built | build under way, current |" \
        in (build / "README.md").read_text()  # the claims built here are not read: a clone has none
    assert done["commit"] == git(build, "rev-parse", "HEAD").strip()
    git(build, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "under way")
    for name, text in {"results/alpha/report/context.json": json.dumps(
            {"paper": {"title": "Alpha"}, COMMIT_FIELD: {"git": {"commit": done["commit"], "dirty": False}}}),
            "reports/alpha.html": "<html>", "reports/alpha.SHA256SUMS": ""}.items():
        (build / name).write_text(text)
    publish(build, "default")  # the finished publication adds the rest and keeps what is committed
    assert set(git(build, "diff", "--cached", "--name-only").split()) == {
        "README.md", "results/alpha/claims.json", "results/alpha/report/context.json", "reports/alpha.html",
        "reports/alpha.SHA256SUMS", "reports/index.html",
        *(str(metadata_file(p)) for p in ("results/alpha/claims.json", "results/alpha/report/context.json",
                                           "reports/alpha.html", "reports/alpha.SHA256SUMS", "reports/index.html"))}


@pytest.mark.parametrize(("change", "message"), [
    (lambda root, monkeypatch: (root / "README.md").write_text("edited"), "uncommitted changes at"),
    (lambda root, monkeypatch: monkeypatch.setattr(publish_module, "snakemake_processes", lambda folder: [4242]),
     "a Snakemake run is in progress in .* \\(process 4242\\): stop it first"),
])
def test_what_refuses_a_build_under_way(build, monkeypatch, change, message):
    change(build, monkeypatch)
    with pytest.raises(ValueError, match=message):
        publish(build, "default", dry_run=True, unfinished=True)
    rows = publish_module.summary_rows("default", build)
    stale = [{**r, "status": "params changed", "plan": "update pending"} if r["output_file"].endswith("c1.json")
             else r for r in rows]
    monkeypatch.setattr(publish_module, "summary_rows", lambda profile, folder: stale)
    with pytest.raises(ValueError, match=r"stale: results/alpha/cells/c1\.json \(params changed\)"):
        publish(build, "default", dry_run=True, unfinished=True)
    assert git(build, "diff", "--cached", "--name-only") == ""


def test_the_outputs_of_a_job_cut_off_are_left_out_of_a_build_under_way(build, monkeypatch):
    """A run stopped hard leaves a job's partial outputs marked incomplete (Snakemake: ``update pending``)."""
    rows = publish_module.summary_rows("default", build)
    partial = "results/alpha/cells/c2.json"
    marked = [{**r, "plan": "update pending"} if r["output_file"] == partial else r for r in rows]
    monkeypatch.setattr(publish_module, "summary_rows", lambda profile, folder: marked)
    unfinished(build)
    with pytest.raises(ValueError, match=r"stale: results/alpha/cells/c2\.json"):
        publish(build, "default", dry_run=True, unfinished=True)  # without the mark: a stale result
    mark = build / ".snakemake/incomplete" / metadata_file(partial).name
    mark.parent.mkdir(parents=True)
    mark.write_text("")
    assert cut_off(marked, build) == {partial}
    done = publish(build, "default", unfinished=True)
    assert done["left_out"] == [partial]
    staged = set(git(build, "diff", "--cached", "--name-only").split())
    assert "results/alpha/cells/c1.json" in staged
    assert partial not in staged
    assert str(metadata_file(partial)) not in staged


def test_a_build_under_way_leaves_out_what_a_clone_would_make_again(build, monkeypatch):
    """A step still to run (a summary) reads a trained checkpoint, which is not published: a clone would train the
    run again and redo what is made from it, so the run's log and evaluation are left out; once the summary is
    built, they are published with it."""
    checkpoint, log, evaluation, summary = ("results/models/trained/alpha/r/seed0", "results/alpha/runs/r/log.csv",
                                            "results/alpha/eval/r.json", "results/alpha/summary.json")
    rows = [*publish_module.summary_rows("default", build), row(log, "a_train"), row(evaluation, "a_evaluate"),
            row(summary, "a_summary", date="-")]
    jobs = [job for job in publish_module.planned_jobs("default", build) if job.outputs != (checkpoint,)]
    jobs += [PlannedJob("a_train", ("results/models/base/m",), (checkpoint, log)),
             PlannedJob("a_evaluate", (checkpoint,), (evaluation,)),
             PlannedJob("a_summary", (evaluation, checkpoint), (summary,))]
    monkeypatch.setattr(publish_module, "summary_rows", lambda profile, folder: rows)
    monkeypatch.setattr(publish_module, "planned_jobs", lambda profile, folder: jobs)
    for name in (log, evaluation):
        (build / name).parent.mkdir(parents=True, exist_ok=True)
        (build / name).write_text("{}")
        (build / metadata_file(name)).write_text("{}")
    unfinished(build)
    assert publish(build, "default", dry_run=True, unfinished=True)["left_out"] == [evaluation, log]
    assert remade_in_clone(jobs, {"results/models/base/m", evaluation, log}, ["results/models/trained/*"]) == {
        checkpoint, log, evaluation, summary, "results/alpha/cells/c1.json", "results/alpha/cells/c2.json",
        "results/alpha/claims.json", "results/alpha/report/context.json", "reports/alpha.html",
        "reports/alpha.SHA256SUMS", "reports/index.html", "data/archives/x.tgz"}  # not published there: they run
    (build / summary).write_text("{}")
    (build / metadata_file(summary)).write_text("{}")
    rows[-1] = row(summary, "a_summary")
    assert publish(build, "default", unfinished=True)["left_out"] == []
    staged = set(git(build, "diff", "--cached", "--name-only").split())
    assert {log, evaluation, summary} <= staged
    assert checkpoint not in " ".join(staged)


def test_final_outputs():
    rows = [row("results/p/claims.json", "p_claims"), row("results/p/report/context.json", "p_context"),
            row("results/p/figures/f.png", "p_figures"), row("results/p/cells/c.json", "p_cells"),
            row("reports/p.html", "render_report"), row("reports/p.pdf", "report_pdf"),
            row("reports/index.html", "report_index")]
    assert final_outputs(rows, ["p"]) == {"results/p/claims.json", "results/p/report/context.json",
                                          "reports/p.html", "reports/p.pdf", "reports/index.html"}


def test_report_problems():
    status = {"alpha": {"current": 3, "stale": {"results/alpha/claims.json": "params changed"}, "absent": 0}}
    contexts = {"alpha": {"provenance": {"git": {"commit": "a" * 40, "dirty": True}}},
                "beta": {"provenance": {"git": {"commit": "b" * 40, "dirty": False}}},
                "gamma": {"provenance": {"git": {"commit": "c" * 40, "dirty": False}}}, "delta": None}
    assert report_problems(status, contexts, ["reports/x.html"]) == [
        "missing report reports/x.html", "stale: results/alpha/claims.json (params changed)",
        "alpha: built at aaaaaaa + uncommitted changes",
        "delta: no report context yet (the build has not reached it)",
        "built at several commits: beta bbbbbbb, gamma ccccccc"]
    assert report_problems({}, {"alpha": {"provenance": {"git": {}}}}, []) == [
        "alpha: its report context names no commit (built outside a git checkout?)"]


def test_helpers(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m/a").write_text("1")
    (tmp_path / "f.json").write_text("{}")
    assert output_files([row("m", "r"), row("f.json", "r"), row("gone.json", "r", "-")], tmp_path) == {
        "m/a": "m", "f.json": "f.json"}
    assert excluded("results/models/trained/x/seed0/model.safetensors", ["results/models/trained/*"])
    assert not excluded("results/winq/runs/x/seed0/train_log.csv", ["results/models/trained/*"])
    sums = tmp_path / "p.SHA256SUMS"
    sums.write_text(f"{'0' * 64}  a.json\n{'1' * 64}  b.json\n")
    assert cited_unpublished([sums], {"a.json"}) == ["p.SHA256SUMS: b.json"]


def test_a_publication_on_another_platform_adds_it_to_the_record(build, monkeypatch):
    """A build resumed on another machine: both platforms are recorded, so make verify expects no bit-identity."""
    unfinished(build)
    publish(build, "default", unfinished=True)
    git(build, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "under way")
    elsewhere = {**HERE, "cpu": "another CPU", "vector_unit": "AVX2"}
    monkeypatch.setattr(publish_module, "this_platform", lambda: elsewhere)
    publish(build, "default", unfinished=True)
    assert recorded_platforms(build, "default") == [HERE, elsewhere]
    assert PLATFORM in git(build, "diff", "--cached", "--name-only").split()
