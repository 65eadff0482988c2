"""Every benchmark script answers --help (exit 0) and a bad flag with one usage error (exit 2), never
a traceback. The scripts run in-process (runpy, as ``python benchmarks/X.py`` would) up to argparse."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def _run(script: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", [str(script), *argv])
    monkeypatch.setattr(sys, "path", [str(BENCHMARKS), *sys.path])  # as python puts a script's folder first
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(script), run_name="__main__")
    return int(exc.value.code or 0)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_exits_0_and_a_bad_flag_is_one_usage_error(
    script: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(script, ["--help"], monkeypatch) == 0
    assert capsys.readouterr().out.startswith(f"usage: {script.name}")
    assert _run(script, ["--no-such-flag"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"{script.name}: error: unrecognized arguments: --no-such-flag"
    assert "Traceback" not in err


def test_a_count_flag_below_one_is_one_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(BENCHMARKS / "bench_diagnose.py", ["--runs", "0"], monkeypatch) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "bench_diagnose.py: error: argument --runs: 0 is below 1"


def test_capacity_accuracy_names_a_missing_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "cases.yaml"
    assert _run(BENCHMARKS / "capacity_accuracy.py", [str(missing)], monkeypatch) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"capacity_accuracy.py: error: {missing}: No such file or directory"
