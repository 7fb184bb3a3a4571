"""Command-line step running: bad input becomes one error line and exit status 2; paths are checked by flag; one
step runs several times in one process (a paper's figures)."""

import argparse
import json

import pytest

from common.cli import (
    FIGURE_ARGUMENTS,
    MANY,
    REQUIRED,
    require_paths,
    run_each,
    run_step,
    step_parser,
    write_cell_records,
)


def step(error):
    def run(args):
        if error is not None:
            raise error
        args.ran = True
    return argparse.Namespace(run=run, ran=False)


@pytest.mark.parametrize("error", [ValueError("bad value 3"), KeyError("missing"), FileNotFoundError("no file x")])
def test_bad_input_is_one_line_and_status_2(error, capsys):
    assert run_step(step(error)) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_success_and_other_errors():
    args = step(None)
    assert run_step(args) == 0
    assert args.ran
    with pytest.raises(ZeroDivisionError):  # a bug is not bad input: it keeps its traceback
        run_step(step(ZeroDivisionError()))


def test_require_paths_names_the_flag(tmp_path):
    require_paths({"--model": tmp_path})
    with pytest.raises(ValueError, match=r"--split '.*missing\.jsonl' does not exist"):
        require_paths({"--model": tmp_path, "--split": tmp_path / "missing.jsonl"})


def test_step_parser_runs_the_chosen_step():
    seen = []
    parser = step_parser("prog", "what it does", [
        ("first", lambda args: seen.append(("first", args.out)), "one", [("--out", REQUIRED)]),
        ("second", lambda args: seen.append(("second", args.cells)), "two", [("--cells", MANY)]),
    ])
    assert run_step(parser.parse_args(["second", "--cells", "a", "b"])) == 0
    assert run_step(parser.parse_args(["first", "--out", "x.json"])) == 0
    assert seen == [("second", ["a", "b"]), ("first", "x.json")]
    with pytest.raises(SystemExit):
        parser.parse_args(["first"])  # --out is required
    with pytest.raises(SystemExit):
        parser.parse_args([])  # a step is required


def test_cell_records_pair_with_their_outputs(tmp_path):
    evaluated = []

    def evaluate(cells):
        evaluated.extend(cells)
        return [{"cell": cell, "value": len(cell)} for cell in cells]

    outs = [tmp_path / "a.json", tmp_path / "sub" / "bb.json"]
    write_cell_records(["a", "bb"], outs, evaluate)
    assert [json.loads(o.read_text()) for o in outs] == [{"cell": "a", "value": 1}, {"cell": "bb", "value": 2}]
    with pytest.raises(ValueError, match="--cells and --out must pair up: 3 cells, 2 outputs"):
        write_cell_records(["a", "bb", "c"], [tmp_path / "x.json", tmp_path / "y.json"], evaluate)
    with pytest.raises(ValueError, match="--blocks and --out must pair up: 1 cells, 2 outputs"):
        write_cell_records([4], [tmp_path / "x.json", tmp_path / "y.json"], evaluate, "--blocks")
    assert evaluated == ["a", "bb"]  # refused before any work
    assert not (tmp_path / "x.json").exists()


def figures_parser(drawn):
    """A paper's two figure steps: ``figure`` draws one (records it), ``figures`` each ``--figure`` through it."""
    def figures(args):
        run_each(parser, "figure", args.figure)

    parser = step_parser("prog", None, [
        ("figure", lambda args: drawn.append((args.kind, args.inputs, args.png)), "one",
         [("kind", {"choices": ["curves", "gap"]}), ("--inputs", MANY), ("--png", REQUIRED)]),
        ("figures", figures, "several", [FIGURE_ARGUMENTS])])
    return parser


def test_run_each_runs_the_step_once_per_argument_line_in_order():
    drawn = []
    parser = figures_parser(drawn)
    args = parser.parse_args(["figures", "--figure", "gap --inputs a.json 'b c.json' --png gap.png",
                              "--figure", "curves --inputs s.json --png curves.png"])
    assert run_step(args) == 0
    assert drawn == [("gap", ["a.json", "b c.json"], "gap.png"), ("curves", ["s.json"], "curves.png")]


def test_run_each_parses_every_line_before_it_runs_one():
    drawn = []
    parser = figures_parser(drawn)
    args = parser.parse_args(["figures", "--figure", "gap --inputs a.json --png gap.png", "--figure", "spectra"])
    with pytest.raises(SystemExit):  # argparse's error: an unknown kind, no --png
        run_step(args)
    assert drawn == []
    with pytest.raises(SystemExit):
        parser.parse_args(["figures"])  # at least one --figure
