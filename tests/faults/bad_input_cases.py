"""The bad-input matrix: each case is a `pfr` command line a user could type, the exit code it must
end with and a pattern its one stderr line must match. ``tests/faults/test_bad_inputs.py`` runs
them; ``scripts/bad_inputs.py`` prints them as a table for the docs."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pfr

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


@dataclass(frozen=True)
class Case:
    """One bad input: ``args`` may hold ``{w}`` (the work folder prepared by :func:`prepare`)."""

    name: str
    args: tuple[str, ...]
    code: int
    says: str  # a regular expression the single stderr line must match
    env: tuple[tuple[str, str], ...] = ()

    def argv(self, work: Path) -> list[str]:
        return [a.replace("{w}", str(work)) for a in self.args]


USER_MODELS = """
import math, sys

def exits(r):
    sys.exit(0)

def raises(r):
    raise RuntimeError("user bug")

def ctrl_c(r):
    raise KeyboardInterrupt

def nan(r):
    return [math.nan] * len(r.options)

def wrong_length(r):
    return [0.0]

def text(r):
    return ["high"] * len(r.options)
"""

STUDY = """
store = "{store}"
[[models]]
model = "baseline:oracle"
[[datasets]]
dataset = "demo"
limit = 4
[[designs]]
{design}
"""

FILES: dict[str, str] = {
    "ragged.csv": "text,label\nhow do I pay,billing\nan unquoted, comma,billing\n",
    "short.csv": "text,label\nhow do I pay,billing\nno label here\n",
    "quote.csv": 'text,label\nhow do I pay,billing\n"never closed,billing\nnext,account\n',
    "nul.csv": "text,label\nhow do I pay,bill\x00ing\n",
    "nocol.csv": "text,category\nhow do I pay,billing\n",
    "tabs.tsv": "text\tlabel\nhow\tdo I pay\tbilling\n",
    "bad.jsonl": '{"text": "how do I pay", "label": "billing"}\n{"text": "oops", "label": \n',
    "bool.jsonl": '{"text": "how do I pay", "label": true}\n',
    "array.jsonl": '["how do I pay", "billing"]\n',
    "latin1.csv": "text,label\ncaf\xe9,billing\n",
    "empty.csv": "",
    "descs.json": '{"billing": 3}',
    "descs.csv": "id,description\nbilling,Bills\nbilling ,Bills again\n",
    "ok.csv": "text,label\nhow do I pay,billing\nreset my password,account\nmy card is lost,card\n",
}


def prepare(work: Path) -> Path:
    """Write every file the cases read into ``work``, with a small real store (an oracle on demo)."""
    work.mkdir(parents=True, exist_ok=True)
    for name, body in FILES.items():
        (work / name).write_bytes(body.encode("latin-1" if name == "latin1.csv" else "utf-8"))
    (work / "models.py").write_text(USER_MODELS)
    designs = {"six": 'options = "six"', "layout": 'layout = "grid"', "pos": "position = 0"}
    for name, design in designs.items():
        (work / f"study_{name}.toml").write_text(STUDY.format(store=work / f"study_{name}", design=design))
    (work / "study_alpha.toml").write_text(
        STUDY.format(store=work / "study_alpha", design="") + "[thresholds]\nalpha = 2\n"
    )
    draws = STUDY.format(store=work / "study_draws", design="") + "[report]\ndraws = 0\n"
    (work / "study_draws.toml").write_text(draws)
    (work / "study_limit.toml").write_text(
        STUDY.format(store=work / "study_limit", design="").replace("limit = 4", 'limit = "many"')
    )
    (work / "study_opt.toml").write_text(
        STUDY.format(store=work / "study_opt", design="").replace(
            'model = "baseline:oracle"', 'model = "baseline:random"\nmodel-opt = {seed = "abc"}'
        )
    )
    (work / "study_toml.toml").write_text("[[models]\nmodel = 1\n")
    if not (work / "store").exists():
        pfr.run("baseline:oracle", pfr.build("demo", limit=8), work / "store")
    (work / "requests.jsonl").write_text(json.dumps({"request_id": "x"}) + "\n")
    return work


R = ("run", "--dataset", "demo", "--limit", "4", "--no-progress", "--store", "{w}/run")
RB = ("run", "--dataset", "demo", "--limit", "4", "--no-progress", "--store", "{w}/run", "-m", "baseline:oracle")
U = ("build", "--out", "{w}/out.jsonl", "--dataset")

CASES: tuple[Case, ...] = (
    # options: CLI flags and --model-opt values
    Case("--temperature 0", (*RB, "--temperature", "0"), 2, r"temperature=0\.0: must be a finite number > 0"),
    Case("--temperature nan", (*RB, "--temperature", "nan"), 2, r"temperature=nan: must be a finite number > 0"),
    Case("--temperature -inf", (*RB, "--temperature", "-inf"), 2, r"temperature=-inf: must be a finite"),
    Case("--model-opt seed=abc", (*R, "-m", "baseline:random", "--model-opt", "seed=abc"), 2,
         r"seed=abc: must be a whole number from 0 to"),
    Case("router --model-opt tau=abc", (*R, "-m", "minilm-router", "--model-opt", "tau=abc"), 2,
         r"tau=abc: must be a finite number from -1 to 1"),
    Case("--model-opt temperature=0 (python)", (*R, "-m", "python:{w}/models.py:nan", "--model-opt",
         "temperature=0"), 2, r"temperature=0: must be a finite number > 0"),
    Case("--model-opt without =", (*RB, "--model-opt", "seed"), 2, r"must be key=value"),
    Case("--batch-size 0", (*RB, "--batch-size", "0"), 2, r"batch-size=0: must be a whole number >= 1"),
    Case("--progress-every nan", (*RB, "--progress-every", "nan"), 2, r"progress-every=nan: must be a finite"),
    Case("--options 1", (*U, "demo", "--options", "1"), 2, r"options=1: must be a whole number from 2 to 62"),
    Case("--options 99", (*U, "demo", "-k", "99"), 2, r"options=99: must be a whole number from 2 to 62"),
    Case("--options abc", (*U, "demo", "-k", "abc"), 2, r"Invalid value for '--options' / '-k'"),
    Case("--wording 7", (*U, "demo", "--wording", "7"), 2, r"wording=7: must be a whole number from 1 to 3"),
    Case("--info bogus", (*U, "demo", "--info", "bogus"), 2, r"info=bogus: must be one of text, text\+label, label"),
    Case("--layout grid", (*U, "demo", "--layout", "grid"), 2, r"layout=grid: must be one of line, breaks"),
    Case("--task bogus", (*U, "demo", "--task", "bogus"), 2, r"task=bogus: must be one of category"),
    Case("--position 0", (*U, "demo", "--position", "0"), 2, r"position=0: must be a whole number from 1 to 16"),
    Case("--choice-set -1", (*U, "demo", "--choice-set", "-1"), 2, r"choice-set=-1: must be a whole number >= 0"),
    Case("--limit -3", (*U, "demo", "--limit", "-3"), 2, r"limit=-3: must be a whole number >= 0"),
    Case("report --draws 1000000000", ("report", "{w}/store", "--draws", "1000000000"), 2,
         r"draws=1000000000 needs about \d+\.\d GiB of memory and .* GiB is available"),
    Case("report --draws 0", ("report", "{w}/store", "--draws", "0"), 2, r"draws=0: must be a whole number >= 1"),
    Case("report --seed -1", ("report", "{w}/store", "--seed", "-1"), 2, r"seed=-1: must be a whole number from 0"),
    Case("report --format bogus", ("report", "{w}/store", "-f", "bogus"), 2, r"unknown report format 'bogus'"),
    Case("PFR_MEMORY_GIB=abc", ("report", "{w}/store", "--draws", "10"), 2,
         r"PFR_MEMORY_GIB=abc: must be a finite number > 0", (("PFR_MEMORY_GIB", "abc"),)),
    Case("thresholds --alpha 2", ("thresholds", "--dev", "{w}/store", "--test", "{w}/store", "--alpha", "2"), 2,
         r"alpha=2\.0: must be a finite number > 0 and < 1"),
    Case("thresholds --alpha nan", ("thresholds", "--dev", "{w}/store", "--test", "{w}/store", "--alpha", "nan"),
         2, r"alpha=nan: must be a finite number > 0 and < 1"),
    Case("thresholds --draws 0", ("thresholds", "--dev", "{w}/store", "--test", "{w}/store", "--draws", "0"), 2,
         r"draws=0: must be a whole number >= 1"),
    # study files
    Case("study options = \"six\"", ("study", "{w}/study_six.toml"), 2,
         r"study_six\.toml: designs\[0\]: options=six: must be a whole number from 2 to 62"),
    Case("study layout = \"grid\"", ("study", "{w}/study_layout.toml"), 2, r"designs\[0\]: layout=grid: must be one"),
    Case("study position = 0", ("study", "{w}/study_pos.toml"), 2, r"designs\[0\]: position=0: must be a whole"),
    Case("study thresholds.alpha = 2", ("study", "{w}/study_alpha.toml"), 2,
         r"thresholds: alpha=2: must be a finite number > 0 and < 1"),
    Case("study report.draws = 0", ("study", "{w}/study_draws.toml"), 2, r"report: draws=0: must be a whole number"),
    Case("study limit = \"many\"", ("study", "{w}/study_limit.toml"), 2,
         r"datasets\[0\]: limit=many: must be a whole number >= 0"),
    Case("study model-opt seed = \"abc\"", ("study", "{w}/study_opt.toml"), 2, r"seed=abc: must be a whole number"),
    Case("study not TOML", ("study", "{w}/study_toml.toml"), 2, r"study_toml\.toml: not valid TOML"),
    # data files
    Case("CSV unquoted comma", (*U, "{w}/ragged.csv"), 2, r"ragged\.csv: line 3: 3 fields where the header has 2"),
    Case("CSV short row", (*U, "{w}/short.csv"), 2, r"short\.csv: line 3: 1 fields where the header has 2"),
    Case("CSV unclosed quote", (*U, "{w}/quote.csv"), 2, r"quote\.csv: line 3: a double quote opened in this"),
    Case("CSV NUL byte", (*U, "{w}/nul.csv"), 2, r"nul\.csv: line 2: label 'bill\\x00ing' holds a control"),
    Case("CSV missing column", (*U, "{w}/nocol.csv"), 2, r"nocol\.csv: line 1: missing column 'label'"),
    Case("CSV not UTF-8", (*U, "{w}/latin1.csv"), 2, r"latin1\.csv: line 2: not valid utf-8"),
    Case("CSV empty file", (*U, "{w}/empty.csv"), 2, r"empty\.csv: no header line"),
    Case("TSV unquoted tab", (*U, "{w}/tabs.tsv"), 2, r"tabs\.tsv: line 2: 3 fields .*an unquoted tab"),
    Case("JSONL broken line", (*U, "{w}/bad.jsonl"), 2, r"bad\.jsonl: line 2: not valid JSON"),
    Case("JSONL label true", (*U, "{w}/bool.jsonl"), 2, r"line 1: field 'label' must be a text or a number"),
    Case("JSONL array", (*U, "{w}/array.jsonl"), 2, r"array\.jsonl: line 1: expected a JSON object"),
    Case("descriptions not text", (*U, "{w}/ok.csv", "--descriptions", "{w}/descs.json"), 2,
         r"descs\.json: category 'billing': the description must be a non-empty text"),
    Case("descriptions id twice", (*U, "{w}/ok.csv", "--descriptions", "{w}/descs.csv"), 2,
         r"descs\.csv: category 'billing' is listed twice"),
    Case("unsupported file type", (*U, "{w}/models.py"), 2, r"unknown dataset|unsupported file type"),
    Case("requests file not requests", ("run", "-m", "baseline:oracle", "--requests", "{w}/requests.jsonl",
         "--store", "{w}/run"), 2, r"requests\.jsonl: line 1"),
    # user code
    Case("python: model sys.exit(0)", (*R, "-m", "python:{w}/models.py:exits"), 2,
         r"python model .*models\.py:exits failed on request \w+: it called sys\.exit\(0\)"),
    Case("python: model raises", (*R, "-m", "python:{w}/models.py:raises"), 2,
         r"python model .*:raises failed on request \w+: RuntimeError: user bug"),
    Case("python: model Ctrl-C", (*R, "-m", "python:{w}/models.py:ctrl_c"), 130,
         r"interrupted in python model .*:ctrl_c on request \w+"),
    Case("python: model NaN", (*R, "-m", "python:{w}/models.py:nan"), 2, r"returned NaN"),
    Case("python: model wrong length", (*R, "-m", "python:{w}/models.py:wrong_length"), 2, r"returned 1 scores for"),
    Case("python: model text scores", (*R, "-m", "python:{w}/models.py:text"), 2, r"returned a non-numeric score"),
    Case("python: no such function", (*R, "-m", "python:{w}/models.py:nope"), 2, r"has no callable 'nope'"),
)  # fmt: skip


def command(case: Case, work: Path) -> list[str]:
    return [sys.executable, "-c", "from pfr.cli import main; main()", *case.argv(work)]
