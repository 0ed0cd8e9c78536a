"""Running a study closes each model after its runs, also when a run fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pfr.studies import load_study, run_study


def _study(tmp_path: Path, data_dir: Path, *models: str) -> Any:
    rows = "".join(f'[[models]]\nmodel = "{m}"\n' for m in models)
    path = tmp_path / "s.toml"
    path.write_text(
        f'name = "closing"\ndata-dir = "{data_dir}"\nstore = "s"\n{rows}'
        '[[datasets]]\ndataset = "trec"\nlimit = 2\n[[designs]]\nmembership = [false, true]\n'
        '[report]\nformat = "json"\ndraws = 10\n',
        encoding="utf-8",
    )
    return load_study(path)


def test_each_model_is_closed_after_its_runs(closing: Any, tmp_path: Path, data_dir: Path) -> None:
    run_study(_study(tmp_path, data_dir, "closing:oracle", "closing:random"), progress=False, log=False)
    assert closing.CLOSED == ["oracle", "random"]


def test_a_failing_model_is_closed_too(closing: Any, tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(RuntimeError, match="scoring failed"):
        run_study(_study(tmp_path, data_dir, "closing:fail"), progress=False, log=False)
    assert closing.CLOSED == ["oracle"]
