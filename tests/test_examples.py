"""The runnable examples in examples/ run and print what they promise."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_currency_conversion_prints_as_of_next_to_latest(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    runpy.run_path(str(EXAMPLES / "currency_conversion.py"), run_name="__main__")
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    # p5 was made at 1.5 h, when USD was 0.90, and arrived after the change to 0.95.
    assert rows["p5"][4:6] == ["95.00", "90.00"]
    assert rows["p6"][4:6] == ["60.00", "57.50"]
    assert rows["p3"][4:6] == ["95.00", "95.00"]
