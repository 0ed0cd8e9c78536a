"""The rule for non-finite and tied scores (pfr.models.scores), on the values a backend can return."""

from __future__ import annotations

import math

import pytest

from pfr.errors import ModelError
from pfr.models.scores import LOG_FLOOR, settle
from pfr.options import OptionError

INF = math.inf


def test_finite_scores_are_a_floored_log_softmax() -> None:
    lp, choice = settle([0.0, math.log(3.0), -100.0])
    assert choice == 1
    assert lp[0] == pytest.approx(math.log(0.25)) and lp[1] == pytest.approx(math.log(0.75))
    assert lp[2] == LOG_FLOOR
    assert sum(math.exp(x) for x in lp[:2]) == pytest.approx(1.0)


def test_one_plus_inf_takes_all_the_probability() -> None:
    lp, choice = settle([5.0, INF, 1e300, -INF])
    assert choice == 1
    assert lp == [LOG_FLOOR, 0.0, LOG_FLOOR, LOG_FLOOR]
    assert str(lp[1]) == "0.0"  # not -0.0


def test_several_plus_inf_share_it_and_the_first_wins() -> None:
    lp, choice = settle([INF, 0.0, INF])
    assert choice == 0
    assert lp[0] == lp[2] == pytest.approx(math.log(0.5)) and lp[1] == LOG_FLOOR


def test_minus_inf_is_probability_zero() -> None:
    lp, choice = settle([-INF, 0.0, 0.0])
    assert choice == 1 and lp[0] == LOG_FLOOR and lp[1] == lp[2] == pytest.approx(math.log(0.5))


def test_all_minus_inf_prefer_nothing() -> None:
    lp, choice = settle([-INF] * 4)
    assert lp == [pytest.approx(math.log(0.25))] * 4 and choice == 0


def test_ties_go_to_the_first_option_in_order() -> None:
    assert settle([1.0, 3.0, 3.0, 2.0])[1] == 1
    assert settle([7.0] * 5)[1] == 0


def test_temperature_scales_and_huge_finite_scores_do_not_overflow() -> None:
    lp, choice = settle([1e307, 1e308], temperature=1e-3)
    assert choice == 1 and lp == [LOG_FLOOR, 0.0]
    cold, _ = settle([0.0, 1.0], temperature=0.5)
    assert cold[1] == pytest.approx(-math.log1p(math.exp(-2.0)))


@pytest.mark.parametrize("bad", [[math.nan, 0.0], [0.0, INF, math.nan]])
def test_nan_is_refused_naming_model_request_and_option(bad: list[float]) -> None:
    with pytest.raises(ModelError, match=r"python model f\.py:g returned NaN for option \d of \d \(request r1\)"):
        settle(bad, model="python model f.py:g", request="r1")


@pytest.mark.parametrize("t", [0.0, -1.0, math.nan, INF])
def test_temperature_must_be_positive_and_finite(t: float) -> None:
    with pytest.raises(OptionError, match=r"temperature=.*: must be a finite number > 0"):
        settle([0.0, 1.0], temperature=t)
