"""`pfr check CAND --baseline BASE --max-drop …`: the regression gate, on real runs of small Python decision
functions over the TREC main panel (40 texts), against `pfr compare` and an independent computation from
two `pfr export` files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pfr import api
from pfr.errors import PfrError

Cli = Callable[..., Any]
DRAWS = "500"
LIMIT = 40

#: one function that answers the fallback whenever it should, one that never does (the first regular
#: option instead), and one that misses it on a hash-chosen 30 % of texts; scores are distinct, no ties
MODELS = """
import hashlib


def _pick(req, target):
    scores = [-3.0 - 0.25 * i for i in range(len(req.options))]
    scores[target] = -0.5
    return scores


def _first_regular(req):
    return next(i for i in range(len(req.options)) if i != req.fallback_index)


def careful(req):
    return _pick(req, req.expected)


def never(req):
    return _pick(req, req.expected if req.assignment == "R" else _first_regular(req))


def sometimes(req):
    missed = int(hashlib.sha256(req.text_id.encode()).hexdigest()[:8], 16) % 10 < 3
    return _pick(req, _first_regular(req) if req.assignment == "F" and missed else req.expected)


def overuses(req):
    odd = int(hashlib.sha256(req.text_id.encode()).hexdigest()[:8], 16) % 2 == 1
    return _pick(req, req.fallback_index if req.assignment == "R" and odd else req.expected)
"""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("regression")
    models = root / "models.py"
    models.write_text(MODELS, encoding="utf-8")
    reqs = api.build("trec", "main", data_dir=data_dir, limit=LIMIT)
    out = {}
    for name, func in (("base", "careful"), ("same", "careful"), ("never", "never"), ("sometimes", "sometimes"),
                       ("overuses", "overuses")):  # fmt: skip
        out[name] = root / name
        api.run(f"python:{models}:{func}", reqs, out[name], progress=False)
    out["both"] = root / "both"  # one store holding two versions: STORE@MODEL picks each
    for func in ("careful", "never"):
        api.run(f"python:{models}:{func}", reqs, out["both"], progress=False)
    out["demo"] = root / "demo"  # another dataset: no text in common with the others
    api.run(f"python:{models}:careful", api.build("demo", "main", limit=5), out["demo"], progress=False)
    out["part"] = root / "part"  # the careful model on the first 10 of the 40 texts
    api.run(f"python:{models}:careful", api.build("trec", "main", data_dir=data_dir, limit=10), out["part"],
            progress=False)  # fmt: skip
    out["wide"] = root / "wide"  # the careful model on TREC and on the demo data: two settings
    for requests in (reqs, api.build("demo", "main", limit=5)):
        api.run(f"python:{models}:careful", requests, out["wide"], progress=False)
    return out


def _json(res: Any) -> dict[str, Any]:
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


def test_identical_versions_pass(stores: dict[str, Path], pfr_cli: Cli) -> None:
    """Two runs of the same model: every Δ is 0 with an interval [0, 0], so even zero limits pass."""
    res = pfr_cli("check", str(stores["same"]), "--baseline", str(stores["base"]), "--max-drop", "P4=0",
                  "--max-drop", "A-=0", "--max-drop", "J=0", "--max-rise", "F+=0", "--max-rise", "DR-F=0",
                  "--max-rise", "INV=0", "--draws", DRAWS)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all 9 checks pass" in res.stdout and "FAIL" not in res.stdout
    assert "ΔP4 vs " in res.stdout and "Δ +0.000 [+0.000, +0.000]" in res.stdout


def test_a_worse_candidate_fails_with_junit_and_step_summary(
    stores: dict[str, Path], pfr_cli: Cli, tmp_path: Path
) -> None:
    """A candidate that never answers the fallback: P4 and A− drop, the gate fails (exit 1), and every
    failing line states Δ, its interval, n and the MDE, in the table, the JUnit XML and the step summary."""
    xml = tmp_path / "gate.xml"
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    res = pfr_cli("check", str(stores["never"]), "--baseline", str(stores["base"]), "--max-drop", "P4=0.02",
                  "--max-rise", "F+=0.02", "--junit", str(xml), "--draws", DRAWS,
                  env={"GITHUB_STEP_SUMMARY": str(summary)})  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "PFR gate: 1 of 3 checks FAIL." in res.stdout
    [row] = [line for line in res.stdout.splitlines() if line.rstrip().endswith("FAIL")]
    assert f" {LIMIT} " in row and "ΔP4 vs " in row and "≥ -0.02" in row
    assert "Δ -1.000 [-1.000, -1.000], mde " in row and "-1.000 (lower)" in row
    assert f"{LIMIT} text(s) newly broken (P4 in BASE, not in CAND); the first 5:" in res.stdout
    root = ET.parse(xml).getroot()
    assert len(root.findall(".//testcase")) == 3  # ΔP4, ΔF+ (U), ΔF+ (C)
    [failure] = root.findall(".//testcase/failure")
    msg = failure.get("message", "")
    assert msg.startswith("ΔP4 vs ") and "Δ -1.000 [-1.000, -1.000], mde 0." in msg, msg
    assert f"lower bound -1.000 vs limit -0.02 (n = {LIMIT} paired texts; b = {LIMIT} regressed, c = 0" in msg, msg
    assert (failure.text or "").count(" chose ") == 5 * 4  # five newly broken texts, four decisions each
    assert (failure.text or "").count("(expected Other)") >= 5  # … each missing the fallback: X → Y
    assert "Other → " in (failure.text or "")
    md = summary.read_text(encoding="utf-8")
    assert md.startswith("# earlier step\n") and md.count("**FAIL**") == 1
    assert "| ΔP4 vs " in md and "Δ -1.000 \\[-1.000, -1.000\\], mde" in md


def _per_text(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """P4 and A− (C) per text, from exported rows alone (docs/method.md §6)."""
    quads: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        quads.setdefault(r["text_id"], {})[r["assignment"] + r["definition"]] = r
    return {
        t: {"P4": float(all(r["choice"] == r["expected"] for r in q.values())),
            "A-_C": float(q["FC"]["choice"] == q["FC"]["fallback_index"])}
        for t, q in quads.items()
    }  # fmt: skip


def test_the_gate_uses_compares_deltas_and_intervals(stores: dict[str, Path], pfr_cli: Cli, tmp_path: Path) -> None:
    """The Δ, interval, b, c and MDE a limit is checked against are `pfr compare`'s for the same pair; Δ, b
    and c also match a plain computation over two exports; the verdict turns exactly at the bound."""
    base, cand = str(stores["base"]), str(stores["sometimes"])
    comp = _json(pfr_cli("compare", base, cand, "--format", "json", "--draws", DRAWS, "--seed", "3"))
    [setting] = comp["settings"]
    gate = _json(pfr_cli("check", cand, "--baseline", base, "--max-drop", "P4=0.5", "--max-drop", "A-_C=0.5",
                         "--format", "json", "--draws", DRAWS, "--seed", "3"))  # fmt: skip
    assert gate["passed"] and [c["metric"] for c in gate["checks"]] == ["P4", "A-_C"]
    rows = {}
    for name in ("base", "sometimes"):
        out = tmp_path / f"{name}.jsonl"
        assert pfr_cli("export", str(stores[name]), "-o", str(out)).returncode == 0
        rows[name] = _per_text([json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()])
    for check in gate["checks"]:
        m = setting["metrics"][check["metric"]]
        for key in ("base", "cand", "delta", "low", "high", "b", "c", "mde"):
            assert check[key] == m[key], (check["metric"], key)
        assert check["n"] == setting["n"] == LIMIT and check["kind"] == "max_drop" and check["bound"] == m["low"]
        xb = [rows["base"][t][check["metric"]] for t in rows["base"]]
        xc = [rows["sometimes"][t][check["metric"]] for t in rows["base"]]
        assert check["delta"] == pytest.approx(sum(c - b for b, c in zip(xb, xc)) / LIMIT)
        assert check["b"] == sum(b == 1 and c == 0 for b, c in zip(xb, xc)) > 0
        assert check["c"] == sum(b == 0 and c == 1 for b, c in zip(xb, xc)) == 0
    low, delta = setting["metrics"]["P4"]["low"], setting["metrics"]["P4"]["delta"]
    assert low < delta < 0  # a real interval, so the bound and the point differ
    for limit, code in ((-low + 0.001, 0), (-low - 0.001, 1)):
        res = pfr_cli("check", cand, "--baseline", base, "--max-drop", f"P4={limit:.6f}", "--draws", DRAWS,
                      "--seed", "3")  # fmt: skip
        assert res.returncode == code, (limit, low, res.stdout)
    between = -(low + delta) / 2  # −delta < between < −low: the interval fails, the point passes
    argv = ("check", cand, "--baseline", base, "--max-drop", f"P4={between:.6f}", "--draws", DRAWS, "--seed", "3")
    assert pfr_cli(*argv).returncode == 1
    assert pfr_cli(*argv, "--on", "point").returncode == 0


def test_store_at_model_and_absolute_limits_together(stores: dict[str, Path], pfr_cli: Cli) -> None:
    """One store holding both versions: STORE@MODEL picks each; --min/--max beside the limits check the
    candidate alone, and the exit code is 1 when either kind fails."""
    labels = sorted({m["model"] for m in api.metrics(stores["both"])})
    never = next(label for label in labels if label.endswith("never"))
    careful = next(label for label in labels if label.endswith("careful"))
    cand, base = f"{stores['both']}@{never}", f"{stores['both']}@{careful}"
    res = pfr_cli("check", cand, "--baseline", base, "--max-drop", "P4=0.02", "--min", "A+=0.9", "--format",
                  "json", "--draws", DRAWS)  # fmt: skip
    checks = _json(res)["checks"]
    assert res.returncode == 1
    assert [(c["metric"], c["kind"], c["passed"]) for c in checks] == [
        ("A+_U", "min", True), ("A+_C", "min", True), ("P4", "max_drop", False)
    ]  # fmt: skip
    assert {c["model"] for c in checks} == {never} and checks[-1]["base_model"] == careful
    passing = pfr_cli("check", cand, "--baseline", base, "--max-drop", "A+=0", "--min", "A+=0.9", "--draws", DRAWS)
    assert passing.returncode == 0, passing.stdout
    failing_min = pfr_cli("check", cand, "--baseline", base, "--max-drop", "A+=0", "--min", "A-=0.5", "--draws", DRAWS)
    assert failing_min.returncode == 1 and "A− (U) ≥ 0.5" in failing_min.stdout


def test_a_failed_limit_lists_the_texts_regressed_on_its_own_metric(stores: dict[str, Path], pfr_cli: Cli) -> None:
    """BASE over-uses the fallback on half the texts (P4 fails there, A− (C) does not); CAND never answers
    it. A− (C) regresses on every text, P4 only on the other half: each failed check lists its own."""
    base, cand = str(stores["overuses"]), str(stores["never"])
    results = api.check([cand], baseline=base, max_drop=["A-_C=0.02", "P4=0.02"], draws=200)
    by_metric = {r.threshold.metric: r for r in results}
    assert not by_metric["A-_C"].passed and not by_metric["P4"].passed
    comp = api.compare(base, cand, draws=200)
    [s] = comp.settings
    broken = {t.text_id for t in s.newly_broken}
    assert 0 < len(broken) < LIMIT  # the texts BASE got right
    assert by_metric["P4"].n_failing == len(broken)
    assert by_metric["A-_C"].n_failing == LIMIT == by_metric["A-_C"].change.b  # every text: McNemar's b
    assert {f.text_id for f in by_metric["A-_C"].failing} - broken  # texts P4 alone would not have listed
    res = pfr_cli("check", cand, "--baseline", base, "--max-drop", "A-_C=0.02", "--draws", DRAWS)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{LIMIT} text(s) regressed on A− (C) (passing it in BASE, not in CAND); the first 5:" in res.stdout


def test_a_setting_the_candidate_did_not_score_fails(stores: dict[str, Path], pfr_cli: Cli, tmp_path: Path) -> None:
    """BASE scored TREC and the demo data, CAND only TREC (the same model): TREC passes, and each limit on
    the demo setting fails, named, in the table, JSON and JUnit (a gate must not pass a candidate for not
    having run). The other way round the extra setting has nothing to regress from: it is named as not
    checked (JUnit: skipped; JSON: passed null) and the gate passes on what it could check."""
    xml = tmp_path / "gate.xml"
    res = pfr_cli("check", str(stores["same"]), "--baseline", str(stores["wide"]), "--max-drop", "P4=0.02",
                  "--junit", str(xml), "--draws", DRAWS)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "PFR gate: 1 of 2 checks FAIL." in res.stdout
    [row] = [line for line in res.stdout.splitlines() if line.rstrip().endswith("FAIL")]
    assert "demo" in row and "not scored by CAND" in row and " 0 " in row, row
    [passed] = [line for line in res.stdout.splitlines() if line.rstrip().endswith("pass")]
    assert "trec" in passed and f" {LIMIT} " in passed
    [failure] = ET.parse(xml).getroot().findall(".//testcase/failure")
    assert "not scored by CAND" in failure.get("message", "")
    checks = _json(pfr_cli("check", str(stores["same"]), "--baseline", str(stores["wide"]), "--max-drop", "P4=0.02",
                           "--max-rise", "F+=0.1", "--format", "json", "--draws", DRAWS))["checks"]  # fmt: skip
    missing = [c for c in checks if not c["passed"]]
    assert [(c["dataset"], c["metric"], c["missing"], c["n"]) for c in missing] == [
        ("demo", "P4", "not scored by CAND", 0), ("demo", "F+_U", "not scored by CAND", 0),
        ("demo", "F+_C", "not scored by CAND", 0)]  # fmt: skip
    assert all(c["passed"] for c in checks if c["dataset"] == "trec")
    wider = pfr_cli("check", str(stores["wide"]), "--baseline", str(stores["same"]), "--max-drop", "P4=0.02",
                    "--junit", str(xml), "--draws", DRAWS)  # fmt: skip
    assert wider.returncode == 0, wider.stdout + wider.stderr
    assert ("PFR gate: all 1 checks pass. 1 not checked: a setting only CAND scored has no baseline to regress "
            "from.") in wider.stdout  # fmt: skip
    [unchecked] = [line for line in wider.stdout.splitlines() if line.rstrip().endswith("not checked")]
    assert "demo" in unchecked and "not scored by BASE" in unchecked, unchecked
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("failures") == "0"
    [skipped] = suite.findall(".//testcase/skipped")
    assert "not scored by BASE" in skipped.get("message", "")
    data = _json(pfr_cli("check", str(stores["wide"]), "--baseline", str(stores["same"]), "--max-drop", "P4=0.02",
                         "--format", "json", "--draws", DRAWS))  # fmt: skip
    assert data["passed"] is True
    assert [(c["dataset"], c["passed"], c.get("skipped")) for c in data["checks"]] == [
        ("trec", True, None), ("demo", None, "not scored by BASE")]  # fmt: skip


def test_texts_the_candidate_did_not_score_are_named(stores: dict[str, Path], pfr_cli: Cli, tmp_path: Path) -> None:
    """CAND scored 10 of BASE's 40 texts: the gate checks the 10 (n = 10) and says, under the table, in
    the step summary and in JSON, that the other 30 were not checked; CAND scoring more texts than BASE
    is not worth a note (nothing to regress from)."""
    summary = tmp_path / "summary.md"
    res = pfr_cli("check", str(stores["part"]), "--baseline", str(stores["base"]), "--max-drop", "P4=0.02",
                  "--draws", DRAWS, env={"GITHUB_STEP_SUMMARY": str(summary)})  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    note = ("checked on the 10 texts both scored; 30 text(s) BASE scored were not scored by CAND and are not "
            "checked")  # fmt: skip
    assert "note: python:" in res.stdout and note in res.stdout, res.stdout
    assert note in summary.read_text(encoding="utf-8")
    [check] = _json(pfr_cli("check", str(stores["part"]), "--baseline", str(stores["base"]), "--max-drop",
                            "P4=0.02", "--format", "json", "--draws", DRAWS))["checks"]  # fmt: skip
    assert (check["n"], check["base_only_texts"], check["passed"]) == (10, 30, True)
    wider = pfr_cli("check", str(stores["base"]), "--baseline", str(stores["part"]), "--max-drop", "P4=0.02",
                    "--draws", DRAWS)  # fmt: skip
    assert wider.returncode == 0 and "note:" not in wider.stdout, wider.stdout + wider.stderr


def test_in_python(stores: dict[str, Path]) -> None:
    from pfr.report.regression import RegressionResult

    results = api.check([stores["never"]], baseline=stores["base"], max_drop=["J_C=0.1"], draws=200)
    assert [type(r) for r in results] == [RegressionResult] and not results[0].passed
    assert results[0].change.delta == -1.0 and results[0].bound == -1.0 and results[0].threshold.value == -0.1


def test_bad_limits_are_refused(stores: dict[str, Path], pfr_cli: Cli) -> None:
    """Checked like --min/--max before a store is read: a metric a comparison has, a fraction in [0, 1],
    the direction in which the metric gets worse, a baseline for the limits and limits for the baseline."""
    for drops, rises, baseline, says in (
        (["P5=0.02"], [], "b", "unknown metric 'P5'"),
        (["dA+=0.02"], [], "b", "--max-drop 'dA+=0.02': a comparison has no dA+"),
        ([], ["INV_RU=0.02"], "b", "a comparison has no INV_RU"),
        (["P4=2"], [], "b", "--max-drop 'P4=2': P4 is a fraction in [0, 1]; write P4=0.02, not 2"),
        (["P4=-0.1"], [], "b", "P4 is a fraction in [0, 1]"),
        (["P4"], [], "b", "write METRIC=VALUE"),
        (["F+=0.02"], [], "b", "lower is better for F+ (U), so a regression is a rise: write --max-rise F+=0.02"),
        ([], ["P4=0.02"], "b", "higher is better for P4, so a regression is a drop: write --max-drop P4=0.02"),
        ([], [], "b", "--baseline needs at least one --max-drop or --max-rise"),
        (["P4=0.02"], [], None, "--max-drop and --max-rise bound a change from a baseline: give --baseline BASE"),
    ):
        with pytest.raises(PfrError) as err:
            api.check(["not-read"], max_drop=drops, max_rise=rises, baseline=baseline)
        assert says in str(err.value), str(err.value)
    for argv, says in ((["--max-drop", "P4=2"], "write P4=0.02, not 2"), ([], "--baseline needs at least one")):
        res = pfr_cli("check", str(stores["never"]), "--baseline", str(stores["base"]), *argv)
        assert res.returncode == 2 and says in res.stderr, (argv, res.stdout, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_bad_pairs_exit_2(stores: dict[str, Path], pfr_cli: Cli) -> None:
    """No common text, a limit without a baseline, two candidates, a store of several models: one line, exit 2."""
    for argv, says in (
        ([str(stores["demo"]), "--baseline", str(stores["base"])], "share no scored text"),
        ([str(stores["never"]), str(stores["same"]), "--baseline", str(stores["base"])], "not 2 stores"),
        ([str(stores["both"]), "--baseline", str(stores["base"])], "pick one as"),
        ([str(stores["never"]), "--baseline", str(stores["base"]) + "-missing"], "no results store"),
    ):
        res = pfr_cli("check", *argv, "--max-drop", "P4=0.02")
        assert res.returncode == 2, (argv, res.stdout, res.stderr)
        assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_limits_parse_to_bounds_on_delta() -> None:
    from pfr.report.regression import parse_limits

    drop, rise_u, rise_c = parse_limits(["p4=0.05"], ["F+=0.1"])
    assert (drop.metric, drop.kind, drop.value) == ("P4", "min", -0.05)
    assert [(t.metric, t.kind, t.value) for t in (rise_u, rise_c)] == [("F+_U", "max", 0.1), ("F+_C", "max", 0.1)]
    with pytest.raises(PfrError, match="not a number"):
        parse_limits(["P4=little"])


STUDY = """
name = "gate"
store = "runs/{model}"
data-dir = "{data_dir}"
[[models]]
model = "python:models.py:{model}"
[[datasets]]
dataset = "trec"
[[designs]]
[report]
format = ["text"]
draws = 500
[check]
baseline = "{baseline}"
max_drop = {{ P4 = 0.02 }}
max-rise = ["DR-F=0.02"]
"""


def test_study_check_baseline(stores: dict[str, Path], pfr_cli: Cli, tmp_path: Path, data_dir: Path) -> None:
    """`baseline` in a study's [check] (relative to the study file) gates each model like `pfr check --baseline`."""
    (tmp_path / "models.py").write_text(MODELS, encoding="utf-8")
    (tmp_path / "runs").mkdir()
    baseline = tmp_path / "runs" / "v1"
    baseline.symlink_to(stores["base"], target_is_directory=True)
    for model, code in (("careful", 0), ("sometimes", 1)):
        study = STUDY.format(model=model, data_dir=data_dir, baseline="runs/v1")
        (tmp_path / "gate.toml").write_text(study, encoding="utf-8")
        res = pfr_cli("study", "gate.toml", "--no-progress", "--limit", str(LIMIT), cwd=tmp_path)
        assert res.returncode == code, res.stdout + res.stderr
        store = tmp_path / "runs" / model
        checks = json.loads((store / "check.json").read_text(encoding="utf-8"))["checks"]
        assert [(c["metric"], c["kind"], c["n"]) for c in checks] == [("P4", "max_drop", LIMIT),
                                                                      ("DR_F", "max_rise", LIMIT)]  # fmt: skip
        failures = ET.parse(store / "check.xml").getroot().findall(".//failure")
        assert [f.get("message", "").split(" vs ")[0] for f in failures] == ([] if code == 0 else ["ΔP4"])
    for bad, says in (
        ('baseline = "runs/v1"\n', "--baseline needs at least one --max-drop or --max-rise"),
        ("max_drop = { P4 = 0.02 }\n", "give --baseline BASE"),
        ('baseline = "runs/v1"\nmax_drop = { "F+" = 0.02 }\n', "a regression is a rise"),
    ):
        text = STUDY.format(model="careful", data_dir=data_dir, baseline="x").split("[check]")[0] + "[check]\n" + bad
        (tmp_path / "bad.toml").write_text(text, encoding="utf-8")
        res = pfr_cli("study", "bad.toml", "--no-progress", cwd=tmp_path)
        assert res.returncode == 2 and "bad.toml: check: " in res.stderr and says in res.stderr, res.stderr
