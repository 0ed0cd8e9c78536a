"""Study files: key validation (unknown keys name themselves and the valid ones), paths relative to
the file, command-line overrides, a declared Holm family, the thresholds section, and one study
file per analysis of the paper that loads and builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfr import api
from pfr.design.types import Design
from pfr.errors import DataError
from pfr.studies import load_study, run_study
from pfr.studies.schema import DATASET_KEYS, DESIGN_KEYS, MODEL_KEYS, REPORT_KEYS, TOP_KEYS

ROOT = Path(__file__).resolve().parents[2]
#: the paper's analyses → the study file that runs each
ANALYSES = {
    "main": "table1", "reference": "reference", "category information": "category-information",
    "cross-backbone": "cross-backbone", "scale": "scale", "position": "choice-set-position",
    "replacement and layout": "replacement-layout", "wording": "wording", "names": "fallback-names",
    "membership": "table2-membership", "thresholds and calibration": "thresholds", "quality-cost": "policies",
    "boundary": "boundary", "category policy": "category-policy", "matched length": "matched-length",
}  # fmt: skip

MODEL = "def score(req):\n    return [0.0 if i == req.expected else -1.0 - 0.1 * i for i in range(len(req.options))]\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_every_analysis_has_a_study_file_that_builds(data_dir: Path) -> None:
    files = {p.stem for p in (ROOT / "studies").glob("*.toml")}
    assert set(ANALYSES.values()) <= files
    for stem in ANALYSES.values():
        study = load_study(ROOT / "studies" / f"{stem}.toml", limit=1)
        assert study.store.is_absolute() and study.store.parent == ROOT / "runs"  # relative to the file
        for d in study.datasets:
            for design in study.designs:
                reqs = api.build(d.name, d.panel, design, data_dir=data_dir, limit=d.limit, fmt=d.fmt)
                assert reqs, (stem, d.name, d.panel, design.name)
    # the datasets the paper uses for each analysis
    datasets = {
        stem: {d.name for d in load_study(ROOT / "studies" / f"{stem}.toml").datasets} for stem in ANALYSES.values()
    }
    three = {"clinc150", "banking77", "trec"}
    for stem in ("table1", "reference", "category-information", "scale", "choice-set-position", "wording",
                 "fallback-names", "table2-membership", "thresholds", "category-policy", "matched-length"):  # fmt: skip
        assert datasets[stem] == three, stem
    for stem in ("cross-backbone", "replacement-layout", "policies", "boundary"):
        assert datasets[stem] == {"trec"}, stem
    boundary = load_study(ROOT / "studies" / "boundary.toml")
    assert {d.panel for d in boundary.datasets} == {"boundary-zero-gain", "boundary-negative-gain", "boundary-tie"}
    assert {d.task for d in load_study(ROOT / "studies" / "reference.toml").designs} == {
        "category",
        "classify-then-map",
    }


_M = '[[models]]\nmodel = "baseline:oracle"\n'
_D = '[[datasets]]\ndataset = "trec"\n'


@pytest.mark.parametrize(
    ("text", "where", "key", "valid"),
    [
        ('nmae = "x"\n' + _M + _D, "", "nmae", TOP_KEYS),
        ('[[models]]\nmodel = "baseline:oracle"\ntemprature = 1\n' + _D, "models[0]", "temprature", MODEL_KEYS),
        (_M + '[[datasets]]\ndataset = "trec"\npanl = "main"\n', "datasets[0]", "panl", DATASET_KEYS),
        (_M + _D + "[[designs]]\nfalback = 'None'\n", "designs[0]", "falback", tuple(DESIGN_KEYS)),
        (_M + _D + "[report]\nformts = ['text']\n", "report", "formts", REPORT_KEYS),
    ],
)
def test_unknown_key_is_refused(tmp_path: Path, text: str, where: str, key: str, valid: tuple[str, ...]) -> None:
    path = _write(tmp_path / "s.toml", text)
    with pytest.raises(DataError) as exc:
        load_study(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: {where}") and f"unknown key {key!r}" in msg
    assert msg.endswith(f"(valid keys: {', '.join(valid)})")


def test_cli_misspelt_key_exits_2_naming_it(tmp_path: Path, pfr_cli) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path / "s.toml", '[[models]]\nspec = "baseline:oracle"\n[[datasets]]\ndataset = "trec"\n'
                  '[[designs]]\nchoice-sett = 1\n')  # fmt: skip
    proc = pfr_cli("study", str(path))
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "'choice-sett'" in line and "choice-set" in line and "designs[0]" in line


def test_keys_are_the_cli_flags(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.toml", '[[models]]\nmodel = "baseline:oracle"\nmodel-opt = ["seed=3"]\n'
                  '[[datasets]]\ndataset = "trec"\ntext-col = "t"\n[[designs]]\noptions = 8\nchoice-set = [0, 1]\n'
                  'policy_info = "utilities"\nposition = 2\n')  # fmt: skip
    s = load_study(path)
    assert s.models[0].spec == "baseline:oracle" and dict(s.models[0].options) == {"seed": "3"}
    assert s.datasets[0].fmt.text_col == "t"
    assert s.designs == (Design(k=8, choice_set=0, policy_info="utilities", position=2),
                         Design(k=8, choice_set=1, policy_info="utilities", position=2))  # fmt: skip
    both = _write(
        tmp_path / "b.toml",
        '[[models]]\nmodel = "x"\n[[datasets]]\ndataset = "trec"\n[[designs]]\nk = 4\noptions = 4\n',
    )
    with pytest.raises(DataError, match="'options' and 'k' name the same setting"):
        load_study(both)


def _user_study(folder: Path) -> Path:
    """A study of a user CSV, its descriptions and a python: model, all named relative to the file."""
    _write(folder / "data" / "tickets.csv", "text,label\n" + "".join(f"ticket {i} text,c{i % 6}\n" for i in range(30)))
    _write(folder / "data" / "cats.csv", "id,description\n" + "".join(f"c{i},category {i}\n" for i in range(6)))
    _write(folder / "models" / "m.py", MODEL)
    return _write(
        folder / "study.toml",
        'name = "mine"\nstore = "out/store"\n[[models]]\nmodel = "python:models/m.py:score"\n'
        '[[datasets]]\ndataset = "data/tickets.csv"\ndescriptions = "data/cats.csv"\n'
        '[[designs]]\noptions = 4\n[report]\nformat = ["json", "text"]\ndraws = 50\n',
    )


def test_paths_resolve_relative_to_the_study_file(tmp_path: Path, pfr_cli) -> None:  # type: ignore[no-untyped-def]
    study = _user_study(tmp_path / "proj")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    proc = pfr_cli("study", str(study), "--no-progress", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "proj" / "out" / "store" / "report.json").read_text())
    (s,) = report["settings"]
    assert s["n"] == 30 and s["dataset"].startswith("tickets") and s["J_U"]["value"] == 1.0  # the oracle-like model
    assert not any(elsewhere.iterdir())


def test_overrides(tmp_path: Path, pfr_cli) -> None:  # type: ignore[no-untyped-def]
    study = _user_study(tmp_path / "proj")
    store = tmp_path / "other"
    proc = pfr_cli("study", str(study), "--model", "baseline:always-fallback", "--limit", "7", "--store", str(store),
                   "--no-progress")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (s,) = json.loads((store / "report.json").read_text())["settings"]
    assert s["model"] == "baseline:always-fallback" and s["n"] == 7 and s["A-_U"]["value"] == 1.0
    assert not (tmp_path / "proj" / "out").exists()


def test_declared_family(tmp_path: Path, data_dir: Path) -> None:
    _write(tmp_path / "m.py", MODEL)
    study = _write(
        tmp_path / "fam.toml",
        f'name = "fam"\ndata-dir = "{data_dir}"\nstore = "s"\n'
        '[[family]]\ndesign = "membership"\n[[family]]\ndesign = "direct"\ndataset = "nothing"\n'
        '[[models]]\nmodel = "python:m.py:score"\n[[datasets]]\ndataset = "trec"\nlimit = 12\n'
        '[[designs]]\nmembership = [false, true]\n[report]\nformat = "json"\ndraws = 20\n',
    )
    run_study(load_study(study), progress=False, log=False)
    rep = json.loads((tmp_path / "s" / "report.json").read_text())
    assert {k: rep["family"][k] for k in ("name", "tests", "method", "alpha")} == {
        "name": "fam", "tests": 2, "method": "holm", "alpha": 0.05}  # fmt: skip
    holm = {s["design"]: [t["p_holm"] for t in s["tests"]] for s in rep["settings"]}
    assert holm["direct"] == [None, None] and None not in holm["membership"]
    bad = _write(
        tmp_path / "bad.toml", '[[family]]\ndesgin = "x"\n[[models]]\nmodel = "m"\n[[datasets]]\ndataset = "trec"\n'
    )
    with pytest.raises(DataError, match=r"unknown key 'desgin' \(valid keys: model, dataset, panel, design\)"):
        load_study(bad)


def test_thresholds_section(tmp_path: Path, data_dir: Path) -> None:
    study = _write(
        tmp_path / "t.toml",
        f'data-dir = "{data_dir}"\nstore = "s"\n[[models]]\nmodel = "baseline:random"\n'
        '[[datasets]]\ndataset = "trec"\nlimit = 16\n[thresholds]\ndev-panel = "development-32"\ndraws = 50\n'
        '[report]\nformat = "text"\ndraws = 20\n',
    )
    written = run_study(load_study(study), progress=False, log=False)
    assert {p.name for p in written} == {"report.txt", "thresholds.txt", "thresholds.json"}
    (row,) = json.loads((tmp_path / "s" / "thresholds.json").read_text())
    assert row["n"] == 16 and row["n_dev"] == 16 and row["panel"] == "main"
    assert "development" not in (tmp_path / "s" / "report.txt").read_text()  # dev scores kept apart


def test_reproduction_study_files_build_what_docs_results_reports(data_dir: Path) -> None:
    """scripts/reproduce.sh runs these two files (docs/results/): main + membership + thresholds on the
    three main sets, and the classify-then-map reference on TREC (its 50 categories fit 62 symbols)."""
    main = load_study(ROOT / "studies" / "reproduction.toml", limit=2)
    assert {d.name for d in main.datasets} == {"clinc150", "banking77", "trec"}
    assert [d.membership for d in main.designs] == [False, True]
    assert main.thresholds is not None and main.thresholds.dev_panel == "development"
    ref = load_study(ROOT / "studies" / "reproduction-reference.toml", limit=2)
    assert ref.store == main.store  # one store: the report puts the reference next to direct selection
    assert [d.name for d in ref.datasets] == ["trec"]
    assert [d.task for d in ref.designs] == ["category", "classify-then-map"]
    for study in (main, ref):
        for d in study.datasets:
            for design in study.designs:
                assert api.build(d.name, d.panel, design, data_dir=data_dir, limit=d.limit, fmt=d.fmt)
    big = load_study(ROOT / "studies" / "reproduction-1.5b.toml", limit=2)
    assert big.store == main.store and big.thresholds is None
    assert [d.name for d in big.datasets] == ["trec", "banking77", "clinc150"]
    assert [d.membership for d in big.designs] == [False, True]
    script = (ROOT / "scripts" / "reproduce.sh").read_text(encoding="utf-8")
    for needed in ('"studies/$main.toml"', "studies/reproduction-reference.toml", "studies/reference.toml",
                   " reproduction\"", " reproduction-1.5b "):  # fmt: skip
        assert needed in script


def test_ray_resources_per_model(tmp_path: Path, pfr_cli) -> None:  # type: ignore[no-untyped-def]
    """``num-cpus``, ``num-gpus`` and ``replicas`` size a model's Ray actors; a bad one is exit 2 naming it."""
    path = _write(tmp_path / "s.toml", '[[models]]\nmodel = "baseline:oracle"\nnum-gpus = 0.5\nreplicas = 4\n'
                  '[[models]]\nmodel = "baseline:random"\n' + _D)  # fmt: skip
    first, second = load_study(path).models
    assert (first.num_cpus, first.num_gpus, first.replicas) == (1.0, 0.5, 4)
    assert (second.num_cpus, second.num_gpus, second.replicas) == (1.0, 0.0, 1)
    _write(path, '[[models]]\nmodel = "baseline:oracle"\nreplicas = 0\n' + _D)
    proc = pfr_cli("study", str(path), "--executor", "ray")
    assert proc.returncode == 2 and "models[0]" in proc.stderr and "replicas" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    _write(path, _M + _D)
    for args, what in ((["--executor", "spark"], "expected local or ray"), (["--address", "x:1"], "--executor ray")):
        proc = pfr_cli("study", str(path), *args)
        assert proc.returncode == 2 and what in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
