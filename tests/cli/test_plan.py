"""Planning past this machine (issue 35 item 7): ``pfr study FILE --dry-run --workers N`` (``--gpus N``)
prints the study's expected wall time on N workers from the dry run's counts and each model's rate,
saying which figures are measured and which given, with the tail, straggler and merge overheads."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pfr.api import plan_study as plan_file
from pfr.run.cost import Cost, Rate, TokenCounts, duration
from pfr.studies import load_study
from pfr.studies.plan import MergeTiming, plan_study
from pfr.studies.ray_executor import plan_units

from .inprocess import run_pfr as _pfr

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

STUDY = """
name = "plan"
store = "store"
[[models]]
model = "baseline:random"
[[models]]
model = "baseline:oracle"
[[datasets]]
dataset = "trec"
limit = 40
[[datasets]]
dataset = "demo"
limit = 24
[[designs]]
wording = [1, 2]
"""


@pytest.fixture
def study(tmp_path: Path) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    return path


def _line(out: str, start: str) -> str:
    return next(line.strip() for line in out.splitlines() if line.strip().startswith(start))


def test_plan_on_n_workers_states_what_is_measured_and_what_given(
    capsys: pytest.CaptureFixture[str], study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PFR_DATA_DIR", str(DATA))
    rates = ["--rate", "baseline:random=40", "--rate", "baseline:oracle=20"]
    code, out, err = _pfr(capsys, "study", str(study), "--dry-run", "--workers", "1", "--no-progress", *rates)
    assert code == 0, err
    # the dry run's costs come first, then the plan
    total = int(re.search(r"baseline:random · total: ([\d,]+) requests", out).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert total == 2 * 4 * (40 + 24)  # two designs, four requests a text
    assert "plan on 1 worker (a batch array of 1 task," in out
    assert "40.0 requests/s per worker, given by --rate" in _line(out, "baseline:random:")
    work = total / 40 + total / 20
    assert _line(out, "work:").startswith(f"work: {duration(work)} of scoring")
    assert f"schedule: {duration(work)}: the slowest task" in out  # one task holds everything
    assert re.search(r"merge: \d+\.\d\d s per store and \d+\.\d{3} ms per result, measured here just now; the stores "
                     rf"of 1 task, {2 * total:,} results", out)  # fmt: skip
    one = _line(out, "expected wall time")

    code, out, err = _pfr(capsys, "study", str(study), "--dry-run", "--gpus", "8", "--executor", "ray",
                          "--no-progress", "--rate", "baseline:oracle=20")  # fmt: skip
    assert code == 0, err
    assert "plan on 8 GPUs (--executor ray: each model's units from its own queue" in out
    assert "requests/s per worker, measured here" in _line(out, "baseline:random:")
    assert "given by --rate" in _line(out, "baseline:oracle:")
    assert "up to 64 whole texts (--unit-texts)" in _line(out, "schedule:")
    assert "baseline:random 1 × 1, baseline:oracle 1 × 1; at most 2 of 8 GPUs" in _line(out, "actors")
    stragglers = _line(out, "stragglers (--straggler 3)")
    assert "the largest unit's expected time" in stragglers and "shard 1/1" in stragglers
    assert "the largest unit's" in _line(out, "merge:")
    eight = _line(out, "expected wall time")
    seconds = [float(m) for m in re.findall(r"about (\d+) s", one + eight)]
    assert len(seconds) == 2 and seconds[1] < seconds[0]  # eight GPUs beat one worker


def test_schedules_and_tail() -> None:
    def cost(model: str, requests: int, per_s: float | None, load: float = 0.0) -> Cost:
        rate = Rate(per_s, 1.0, "request") if per_s else None
        unknown = "" if per_s else "a service"
        return Cost(model, TokenCounts(requests), 0, rate, load, unknown)

    costs = [
        ("a · d/main · direct", cost("a", 400, 10.0, 5.0)),  # 40 s
        ("a · e/main · direct", cost("a", 80, 10.0, 5.0)),  # 8 s
        ("a · total", cost("a", 480, 10.0, 5.0)),
        ("s · d/main · direct", cost("s", 40, None)),
        ("s · total", cost("s", 40, None)),
    ]
    timing = MergeTiming(0.5, 0.001)
    plan = plan_study(costs, 2, executor="ray", merge=timing)
    assert plan.unknown == ("s",)  # a service is named, not planned
    assert plan.work == pytest.approx(48.0)
    assert (plan.makespan, plan.busy) == (pytest.approx(5.0 + 48.0), 1)  # one replica: one actor, one worker
    # the executor's units (request set, label, requests) on two replicas, each taking the next unit of the queue
    units = [(0, "a · d/main · direct · shard 1/2", 200), (0, "a · d/main · direct · shard 2/2", 200),
             (1, "a · e/main · direct · shard 1/1", 80)]  # fmt: skip
    plan = plan_study(costs, 2, executor="ray", merge=timing, units=units, actors={"a": (2, 1)})
    assert [u.seconds for u in plan.units] == pytest.approx([20.0, 20.0, 8.0])
    assert (plan.makespan, plan.busy) == (pytest.approx(5.0 + 20.0 + 8.0), 2)
    assert plan.wall == pytest.approx(plan.makespan + 0.5 + 0.001 * 200)  # the largest unit's merge
    # a replica holding two GPUs: two of four hold one actor; the model's actors end and free them
    plan = plan_study(costs, 4, executor="ray", merge=timing, units=units, actors={"a": (3, 2)}, gpus=True)
    assert (plan.makespan, plan.busy) == (pytest.approx(5.0 + 20.0 + 8.0), 4)
    batch = plan_study(costs, 2, executor="local", merge=timing, shares={"d/main · direct": [0.75, 0.25]})
    assert batch.makespan == pytest.approx(5.0 + 40 * 0.75 + 8 * 0.5)  # the hash's imbalance counted
    assert batch.wall == pytest.approx(batch.makespan + 2 * 0.5 + 0.001 * 480)
    rated = plan_study(costs, 2, executor="ray", merge=timing, rates={"s": 4.0})
    assert rated.unknown == () and rated.work == pytest.approx(58.0)


def test_ray_plan_has_the_executors_units(
    capsys: pytest.CaptureFixture[str], study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's units are the ones ``pfr study --executor ray`` dispatches, for any --unit-texts."""
    monkeypatch.setenv("PFR_DATA_DIR", str(DATA))
    counts = []
    for texts in (64, 8, 5):
        _, plan = plan_file(study, 4, executor="ray", progress=False, unit_texts=texts, straggler=2.0)
        dispatched = plan_units(load_study(study), texts)
        assert [(u.label, u.requests) for u in plan.units] == [(u.label, len(u.requests)) for u in dispatched]
        assert plan.unit_texts == texts and plan.straggler == 2.0
        counts.append(len(plan.units))
    assert counts == [2 * 2 * 2, 2 * 2 * (5 + 3), 2 * 2 * (8 + 5)]  # models × designs × units of trec, demo
    code, out, err = _pfr(capsys, "study", str(study), "--dry-run", "--workers", "4", "--executor", "ray",
                          "--unit-texts", "8", "--straggler", "2", "--no-progress")  # fmt: skip
    assert code == 0, err
    assert f"({counts[1]} units of up to 8 whole texts (--unit-texts)" in _line(out, "schedule:")
    assert _line(out, "stragglers").startswith("stragglers (--straggler 2): once a model's queue is empty")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--workers", "4"], "--workers plans a scale-out run: it goes with --dry-run"),
        (["--dry-run", "--workers", "2", "--gpus", "2"], "--workers and --gpus say the same"),
        (["--dry-run", "--workers", "0"], "--workers 0: need at least 1"),
        (["--dry-run", "--gpus", "2", "--rate", "baseline:nope=3"], "--rate baseline:nope: not a model of the study"),
        (["--dry-run", "--gpus", "2", "--rate", "baseline:random"], "--rate baseline:random: expected MODEL=RATE"),
        (["--dry-run", "--rate", "baseline:random=3"], "--rate goes with --workers N"),
        (["--dry-run", "--workers", "2", "--executor", "slurm"], "--executor slurm: expected local or ray"),
    ],
)
def test_bad_plans_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], study: Path, args: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PFR_DATA_DIR", str(DATA))
    code, out, err = _pfr(capsys, "study", str(study), "--no-progress", *args)
    assert (code, out) == (2, "") and err.count("\n") == 1 and says in err, err
