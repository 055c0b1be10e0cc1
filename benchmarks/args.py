"""Argument types shared by the benchmark commands.

Each is an argparse `type=`: a bad value ends the command with argparse's usage
line, one error line naming the option and the fix, and exit code 2, before any
run starts (a grid with `--jobs 0` would otherwise wait forever, and one with
`--budget 0` would start every run only to see each fail).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def seeds(text: str) -> list[int]:
    """Seeds as `0-9`, `0,3,5` or both (`0-4,7`): non-negative, each once, in order."""
    out: list[int] = []
    for item in text.split(","):
        lo, sep, hi = item.strip().partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a seed list; write seeds as 0-9, 0,3,5 or 0-4,7") from None
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r} is not a seed range; seeds are non-negative and a range runs low-high, as in 0-9")
        out += [s for s in range(first, last + 1) if s not in out]
    return out


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give one of at least 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small; give at least 1")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (`0.5`, `3`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give one above 0, like 3 or 0.5") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not above 0 and finite; give a number like 3 or 0.5")
    return value


def positive_ints(text: str) -> list[int]:
    """Comma-separated integers of at least 1 (`20,44`)."""
    return [positive_int(x.strip()) for x in text.split(",")]


def names(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """Comma-separated names, each one of `choices`."""

    def parse(text: str) -> list[str]:
        picked = [x.strip() for x in text.split(",")]
        unknown = [x for x in picked if x not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, unknown))}; choose from {', '.join(choices)}")
        return picked

    return parse
