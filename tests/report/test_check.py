"""`pfr check`: the PFR Test as a release gate, on real stores of the baselines on the bundled demo data."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pfr import api
from pfr.errors import PfrError
from pfr.report.gate import canonical, evaluate, parse_thresholds
from pfr.report.render import load_report
from pfr.run.store import Store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate")
    reqs = api.build("demo", "main")
    out = {}
    for name in ("oracle", "random"):
        out[name] = root / name
        api.run(f"baseline:{name}", reqs, out[name], progress=False)
    out["empty"] = root / "empty"
    with Store(out["empty"]):
        pass
    return out


def test_metric_spellings() -> None:
    assert canonical("P4") == ["P4"]
    assert canonical("A+") == ["A+_U", "A+_C"]
    assert canonical("a-_c") == ["A-_C"] == canonical("A−_C")
    assert canonical("DR-F") == ["DR_F"] == canonical("dr_f") == canonical("DRF")
    for spelling in ("ΔA−", "ΔA-", "dA-", "DA-", "delta-A-"):
        assert canonical(spelling) == ["ΔA-"], spelling
    assert canonical("ΔF+") == ["ΔF+"]
    assert canonical("INV") == ["INV"] and canonical("inv_rc") == ["INV_RC"] == canonical("INV (RC)")
    for bad in ("Q", "P5", "ΔP4", "DR-X", "", "INV_RX", "ΔINV"):
        with pytest.raises(PfrError, match="unknown metric"):
            canonical(bad)
    with pytest.raises(PfrError, match="METRIC=VALUE"):
        parse_thresholds(["P4"])
    with pytest.raises(PfrError, match="not a number"):
        parse_thresholds(["P4=high"])


def test_thresholds_out_of_range_are_refused_with_the_fraction_meant(
    stores: dict[str, Path], pfr_cli: Callable[..., Any]
) -> None:
    """A rate is in [0, 1] and a Δ in [−1, 1]: ``--max DR-F=10`` would pass every setting and ``--min P4=1.5``
    fail every one, whatever the data; both are usage errors naming the fraction a percentage means."""
    for mins, maxs, says in (
        (["P4=80"], [], "--min 'P4=80': P4 is a fraction in [0, 1]; write P4=0.8, not 80"),
        (["P4=1.5"], [], "write P4=0.015, not 1.5"),
        ([], ["DR-F=10"], "--max 'DR-F=10': DR-F is a fraction in [0, 1]; write DR-F=0.1, not 10"),
        ([], ["INV=5"], "write INV=0.05, not 5"),
        ([], ["A-_C=-0.1"], "A-_C is a fraction in [0, 1]"),
        ([], ["dF+=5"], "a Δ is a difference of fractions, in [-1, 1]; write dF+=0.05, not 5"),
        (["ΔA-=-2"], [], "write ΔA-=-0.02, not -2"),
        ([], ["P4=1000"], "P4 is a fraction in [0, 1]"),
    ):
        with pytest.raises(PfrError) as err:
            parse_thresholds(mins, maxs)
        assert says in str(err.value), str(err.value)
    # the ends of the ranges are fine
    assert [t.value for t in parse_thresholds(["P4=0", "dA-=-1"], ["DR-F=1", "INV=0"])] == [0.0, -1.0, 1.0, 0.0]
    for argv in (["--max", "DR-F=10"], ["--min", "P4=1.5"]):
        res = pfr_cli("check", str(stores["random"]), *argv)
        assert res.returncode == 2, (argv, res.returncode, res.stdout)
        assert len(res.stderr.strip().splitlines()) == 1 and "is a fraction in [0, 1]" in res.stderr, res.stderr


def test_cli_exit_codes(stores: dict[str, Path], pfr_cli: Callable[..., Any]) -> None:
    ok = pfr_cli("check", str(stores["oracle"]), "--min", "P4=0.9")
    assert ok.returncode == 0, ok.stderr
    assert "all 1 checks pass" in ok.stdout and "pass" in ok.stdout.splitlines()[-1]
    bad = pfr_cli("check", str(stores["random"]), "--min", "P4=0.9")
    assert bad.returncode == 1, bad.stderr
    assert "FAIL" in bad.stdout and "failing input(s)" in bad.stdout
    unknown = pfr_cli("check", str(stores["oracle"]), "--min", "P5=0.9")
    assert unknown.returncode == 2 and "unknown metric 'P5'" in unknown.stderr
    assert "Traceback" not in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1
    empty = pfr_cli("check", str(stores["empty"]), "--min", "P4=0.9")
    assert empty.returncode == 2 and "no complete quads" in empty.stderr
    report = pfr_cli("report", str(stores["empty"]))
    assert report.returncode == 2 and "no complete quads" in report.stderr
    none = pfr_cli("check", str(stores["oracle"]))
    assert none.returncode == 2 and "--min or --max" in none.stderr
    for bad_opt in (["--on", "mean"], ["--format", "xml"]):
        res = pfr_cli("check", str(stores["oracle"]), "--min", "P4=0.9", *bad_opt)
        assert res.returncode == 2 and bad_opt[0] in res.stderr, res.stderr


def test_interval_bound_versus_point(stores: dict[str, Path]) -> None:
    rep = load_report([str(stores["random"])], draws=2000)
    dr_f = rep.settings[0].metrics["DR_F"]
    threshold = (dr_f.value + dr_f.hi) / 2  # above the estimate, below the upper bound
    [on_interval] = evaluate(rep, parse_thresholds(maxs=[f"DR-F={threshold}"]))
    [on_point] = evaluate(rep, parse_thresholds(maxs=[f"DR-F={threshold}"]), on="point")
    assert not on_interval.passed and on_interval.bound == dr_f.hi
    assert on_point.passed and on_point.bound == dr_f.value
    assert on_interval.n_failing == rep.settings[0].counts["DR_F"]


def test_failing_inputs_are_the_failures(stores: dict[str, Path]) -> None:
    rep = load_report([str(stores["random"])], draws=500)
    [p4] = evaluate(rep, parse_thresholds(["P4=0.5"]))
    assert not p4.passed and len(p4.failing) == 5
    assert p4.n_failing == p4.setting.n - p4.setting.counts["P4"]
    for f in p4.failing:
        assert f.text and [c for c, _, _ in f.choices] == ["RU", "RC", "FU", "FC"]
        assert any(chosen != expected for _, chosen, expected in f.choices)  # P4 = 0: some request is wrong


def test_junit_and_step_summary(stores: dict[str, Path], pfr_cli: Callable[..., Any], tmp_path: Path) -> None:
    xml = tmp_path / "out" / "pfr.xml"
    xml.parent.mkdir()  # --junit writes into an existing folder (tests/cli/test_outputs.py)
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    res = pfr_cli(
        "check", str(stores["random"]), "--min", "P4=0.9", "--min", "A+=0.01", "--max", "DR-F=0.99",
        "--junit", str(xml), env={"GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    failed_rows = [line for line in res.stdout.splitlines() if line.rstrip().endswith("FAIL")]
    root = ET.parse(xml).getroot()
    cases = root.findall(".//testcase")
    failures = root.findall(".//testcase/failure")
    assert len(cases) == 4  # P4, A+ (U), A+ (C), DR-F
    assert len(failures) == len(failed_rows) >= 1
    assert int(root.find("testsuite").get("failures")) == len(failures)  # type: ignore[union-attr]
    p4 = next(f for f in failures if "P4" in f.get("message", ""))
    assert "[" in p4.get("message", "") and "threshold 0.9" in p4.get("message", "")
    assert (p4.text or "").count(" chose ") == 5 * 4  # five inputs, four decisions each
    md = summary.read_text(encoding="utf-8")
    assert md.startswith("# earlier step\n")
    assert "| model | dataset |" in md and md.count("**FAIL**") == len(failures)
