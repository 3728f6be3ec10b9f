"""One grammar: the published :data:`PLAN_TEXT_PATTERN` accepts exactly the texts
:meth:`PlanRequest.parse` accepts, over generated valid and near-valid plan texts.

The pattern is matched whole (``re.fullmatch``), as a JSON Schema validator matches ``^...$``
with ECMA-262 semantics (where ``$`` never matches before a final newline).
"""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from jigsaw.model.errors import InvalidPlanError
from jigsaw.model.plan import MAX_DEPTH_DIGITS, PLAN_TEXT_PATTERN, PlanRequest

PATTERN = re.compile(PLAN_TEXT_PATTERN)

BLANKS = st.sampled_from(["", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\u00a0"])
WORDS = st.sampled_from(
    ["none", "NONE", "None", "staircase", "StairCase", "auto", "AUTO", "non", "autos", "plan"]
)
DEPTHS = st.one_of(
    st.integers(0, 10**MAX_DEPTH_DIGITS + 1).map(str),
    st.sampled_from(["0", "00", "0" * MAX_DEPTH_DIGITS, "0" * (MAX_DEPTH_DIGITS + 1), "-0"]),
    st.sampled_from(["-1", "+1", "1_0", "x", "", "1.0", "٣"]),  # signs, underscores, non-ASCII
)


@st.composite
def plan_texts(draw: st.DrawFn) -> str:
    """A valid plan text, or one a small mistake away: a blank in the wrong place, a sign, a
    missing or doubled comma, a misspelt word, too many digits."""

    def blank() -> str:
        return draw(BLANKS)

    shape = draw(st.sampled_from(["word", "uniform", "list", "tokens"]))
    if shape == "word":
        body = draw(WORDS)
    elif shape == "uniform":
        head = draw(st.sampled_from(["uniform", "UNIFORM", "Uniform", "uniform ", "unifrom"]))
        body = f"{head}{draw(st.sampled_from([':', '', '::', ' :']))}{blank()}{draw(DEPTHS)}"
    elif shape == "list":
        items = draw(st.lists(DEPTHS, min_size=1, max_size=5))
        body = ""
        for i, item in enumerate(items):
            separator = draw(st.sampled_from([",", ",", ",", ",,", ";", ""])) if i else ""
            body += f"{blank()}{separator}{blank()}{item}" if i else item
        body += draw(st.sampled_from(["", "", ","]))
    else:  # free mixtures of the grammar's tokens
        tokens = st.sampled_from(["0", "1", "12", ",", ":", " ", "\t", "-", "uniform", "none"])
        body = "".join(draw(st.lists(tokens, max_size=8)))
    return f"{blank()}{body}{blank()}"


def parses(text: str) -> bool:
    try:
        PlanRequest.parse(text)
    except InvalidPlanError:
        return False
    return True


@settings(max_examples=2000, deadline=None)
@given(plan_texts())
@example("uniform: 2")  # parse took it and the pattern refused it (issue 28)
@example("uniform:-0")  # the pattern refused it and parse took it as 0
@example("-0,1")
@example("0,\t1")  # spaces only: the API refuses control characters
@example(" Staircase\n")
def test_the_published_pattern_accepts_exactly_what_parse_accepts(text: str) -> None:
    assert (PATTERN.fullmatch(text) is not None) == parses(text), repr(text)


def test_the_generator_reaches_both_sides() -> None:
    """A property whose texts all parse (or none do) would prove nothing."""
    assert parses("uniform: 2") and parses("0, 1 ,2") and parses("  AUTO ")
    assert not parses("uniform:-0") and not parses("-0,1") and not parses("0,,1")
    assert not parses("0,\t1") and not parses("none\n")
