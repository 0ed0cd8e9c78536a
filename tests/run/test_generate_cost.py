"""``--dry-run`` and the progress ETA cover ``decide=generate`` (issue 33 item 4): the prompt tokens to compute
plus the decode steps (``max_tokens`` per request, the upper bound), each weighed as a few prompt tokens;
the progress still counts requests."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest

from pfr import api
from pfr.run import progress
from pfr.run.cost import DECODE_STEP_TOKENS, Cost, Rate, describe, estimate, new_tokens

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def generating() -> Any:
    from pfr.models.registry import load_model

    return load_model("smollm2-135m", {"decide": "generate", "max_tokens": "5"})


def test_the_estimate_adds_the_decode_steps(generating: Any) -> None:
    reqs = api.build("trec", limit=2, data_dir=DATA)
    cost = estimate(generating, reqs, None, measure=False)
    scoring = estimate(generating.lm, reqs, None, measure=False)
    c = cost.counts
    assert c.requests == 8 and c.decode_steps == 8 * 5 and scoring.counts.decode_steps == 0
    assert c.distinct_tokens == scoring.counts.distinct_tokens  # the same prompts to compute
    timed = Cost(cost.model, c, 0, Rate(1000, 2.0, "token"), 0.0)
    assert timed.expected_seconds == pytest.approx((c.distinct_tokens + DECODE_STEP_TOKENS * 40) / 500)
    assert timed.to_dict()["decode_steps"] == 40 and "decode_steps" not in scoring.to_dict()
    lines = describe(timed)
    assert any(re.search(r"new tokens to generate at most 40 \(5 per request, max_tokens\)", x) for x in lines), lines
    assert "distinct tokens and weighed decode steps" in lines[-1], lines


def test_the_progress_eta_weighs_the_decode_steps_and_counts_requests(generating: Any) -> None:
    reqs = api.build("trec", limit=1, data_dir=DATA)
    prompts = [generating.prompt(r) for r in reqs]
    plain = new_tokens([generating.encode(p) for p in prompts])
    weights = progress.work_weights(generating, prompts)
    assert weights == [n + DECODE_STEP_TOKENS * 5 for n in plain]
    assert progress.work_weights(generating.lm, prompts) == plain
    stream = io.StringIO()
    log = progress.ProgressLog(total=len(reqs), every=0.0, stream=stream, work=sum(weights))
    log.advance(1, weights[0])
    assert re.fullmatch(r"pfr: scored 1/4 \(\d+%\), [\d.]+ req/s, eta \d+s", stream.getvalue().strip())
