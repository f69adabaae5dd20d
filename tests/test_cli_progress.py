"""Outside a terminal a run prints a plain progress line every few seconds, not nothing until the end."""

from __future__ import annotations

import io

from rich.console import Console

from sp_dspy._metrics import PolicyRecord
from sp_dspy._runner._progress import ProgressView

RECORD = PolicyRecord.model_validate(
    {"id": "c", "usage": {"prompt_tokens": 100, "completion_tokens": 5}, "cost": 0.001}
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _view(stream: io.StringIO, clock: Clock, *, terminal: bool = False, enabled: bool = True) -> ProgressView:
    console = Console(file=stream, force_terminal=terminal, width=200)
    return ProgressView(
        10, label="eval fake per-policy", console=console, enabled=enabled, interval=5, clock=clock
    )


def test_a_log_gets_a_plain_line_every_interval_and_one_at_the_end() -> None:
    stream, clock = io.StringIO(), Clock()
    with _view(stream, clock) as view:
        assert view.plain
        clock.now += 1
        view.record(RECORD, case_finished=True)
        assert stream.getvalue() == ""  # not yet: less than 5 s since the start
        clock.now += 5
        view.record(RECORD, case_finished=True)
        view.record(RECORD, case_finished=False)
        lines = stream.getvalue().splitlines()
        assert lines == [
            "eval fake per-policy: 2/10 units (20%) | cases 2 | tokens 200+10 | $0.0020 | errors 0 | 6s, ETA 24s"
        ]
        clock.now += 4
        view.record(RECORD, case_finished=True)
        assert len(stream.getvalue().splitlines()) == 1  # 4 s since the last line
        clock.now += 1
        view.record(RECORD, case_finished=True)
        assert (
            stream.getvalue()
            .splitlines()[-1]
            .startswith("eval fake per-policy: 5/10 units (50%) | cases 4 |")
        )
    final = stream.getvalue().splitlines()
    assert len(final) == 3 and "5/10 units" in final[-1] and "\x1b" not in stream.getvalue()


def test_a_terminal_gets_the_live_bar_and_no_plain_lines() -> None:
    stream, clock = io.StringIO(), Clock()
    with _view(stream, clock, terminal=True) as view:
        assert not view.plain
        clock.now += 60
        view.record(RECORD, case_finished=True)
    assert "units (" not in stream.getvalue()


def test_quiet_prints_nothing() -> None:
    stream, clock = io.StringIO(), Clock()
    with _view(stream, clock, enabled=False) as view:
        clock.now += 60
        view.record(RECORD, case_finished=True)
    assert stream.getvalue() == ""


def test_long_durations_read_as_minutes_and_hours() -> None:
    stream, clock = io.StringIO(), Clock()
    view = _view(stream, clock)
    view.record(RECORD, case_finished=True)
    clock.now += 125
    assert view.line().endswith("| 2m05s, ETA 18m45s")
    clock.now += 7200
    assert "| 2h02m, ETA 18h18m" in view.line()
