"""pfr.options: one rule per option, one message wherever the value comes from."""

from __future__ import annotations

import math

import pytest

import pfr
from pfr.design.types import Design
from pfr.errors import PfrError
from pfr.options import (
    DRAWS,
    PROBABILITY_OPEN,
    SEED,
    TEMPERATURE,
    Number,
    OneOf,
    OptionError,
    Switch,
    check_memory,
    env,
)


@pytest.mark.parametrize("value", ["0", 0, 0.0, -1, "nan", math.nan, "inf", math.inf, "abc", "", True, None, [1]])
def test_temperature_refuses(value: object) -> None:
    with pytest.raises(OptionError, match=r"^temperature=.*: must be a finite number > 0$"):
        TEMPERATURE.parse("temperature", value)


@pytest.mark.parametrize(("value", "out"), [("0.5", 0.5), (2, 2.0), (" 1e-3 ", 1e-3)])
def test_temperature_accepts(value: object, out: float) -> None:
    assert TEMPERATURE.parse("temperature", value) == out


def test_whole_numbers() -> None:
    assert DRAWS.parse("draws", "12") == 12 and DRAWS.parse("draws", 12.0) == 12
    for bad in ("1.5", 1.5, "abc", 0, True):
        with pytest.raises(OptionError, match="must be a whole number >= 1"):
            DRAWS.parse("draws", bad)
    with pytest.raises(OptionError, match=r"seed=-1: must be a whole number from 0 to 4294967295"):
        SEED.parse("seed", -1)


def test_bounds_are_spelled_out() -> None:
    assert PROBABILITY_OPEN.allowed() == "a finite number > 0 and < 1"
    assert Number(whole=True, low=2, high=62).allowed() == "a whole number from 2 to 62"
    assert Number().allowed() == "a finite number"


def test_one_of_and_switch() -> None:
    assert OneOf(("a", "b")).parse("x", " b ") == "b"
    with pytest.raises(OptionError, match=r"^x=c: must be one of a, b$"):
        OneOf(("a", "b")).parse("x", "c")
    assert Switch().parse("s", "YES") is True and Switch().parse("s", 0) is False
    with pytest.raises(OptionError, match="s=maybe: must be on or off"):
        Switch().parse("s", "maybe")


def test_values_that_need_quotes_are_quoted() -> None:
    with pytest.raises(OptionError, match=r"^x='a b': "):
        OneOf(("a",)).parse("x", "a b")
    with pytest.raises(OptionError, match=r"^x='': "):
        OneOf(("a",)).parse("x", "")


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PFR_TEST_N", "x")
    with pytest.raises(OptionError, match=r"^PFR_TEST_N=x: must be a whole number >= 1$"):
        env("PFR_TEST_N", DRAWS)
    monkeypatch.setenv("PFR_TEST_N", "7")
    assert env("PFR_TEST_N", DRAWS) == 7
    monkeypatch.delenv("PFR_TEST_N")
    assert env("PFR_TEST_N", DRAWS, 3) == 3


def test_memory_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PFR_MEMORY_GIB", "1")
    check_memory("x", 2**29)
    with pytest.raises(OptionError, match=r"^draws=9 needs about 2\.0 GiB of memory and 1\.0 GiB is available"):
        check_memory("draws=9", 2**31)


def test_design_factors_and_api_give_the_same_messages() -> None:
    with pytest.raises(PfrError, match=r"^options=six: must be a whole number from 2 to 62$"):
        Design(k="six")  # type: ignore[arg-type]
    with pytest.raises(PfrError, match=r"^layout=grid: must be one of line, breaks$"):
        Design(layout="grid")
    assert Design(k="6").k == 6  # type: ignore[arg-type]
    with pytest.raises(PfrError, match=r"^model option temperature=0: must be a finite number > 0$"):
        pfr.load_model("baseline:oracle", {"temperature": 0})
    with pytest.raises(PfrError, match=r"^model option seed=abc: must be a whole number"):
        pfr.load_model("baseline:random", {"seed": "abc"})
