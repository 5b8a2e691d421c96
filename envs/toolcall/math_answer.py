"""Reading a math answer: the last `\\boxed{...}` of the final message, in one normal form.

Two answers are equal when their normal forms are: any number (an integer with or
without thousands separators, a fraction, a LaTeX `\\frac`, a finite decimal) becomes
the exact rational it denotes, written `n` or `p/q` in lowest terms, so `1,234`,
`1234` and `1234.0` agree, and so do `2/4`, `\\frac{1}{2}` and `0.5`; `0.333` is not
`1/3`. Anything else is compared as text without spaces, case-folded. The check is
exact on purpose: the generated problems have exact answers, and a lenient check
(rounding, symbolic equivalence) would reward near misses.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BOXED = re.compile(r"\\boxed\s*\{")
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")
_ASSIGNMENT = re.compile(r"^[A-Za-z]\w*\s*=\s*")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_RATIO = re.compile(r"([-+]?\d+)/([-+]?\d+)")
_MAX_EXPONENT = 1000


def last_boxed(text: str) -> str | None:
    """The content of the last complete `\\boxed{...}` in `text` (braces matched), or None if there is none."""
    found = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    found = text[start:i]
                    break
    return found


def normalize(answer: str) -> str:
    """The canonical form of one answer: `n` or `p/q` (lowest terms) for a number, else the cleaned text."""
    s = answer.strip().strip("$").strip()
    for space in ("\\!", "\\,", "\\;", "\\:", "\\ ", "~"):
        s = s.replace(space, "")
    s = s.replace("\\left", "").replace("\\right", "").replace("{,}", ",").replace("\\cdot", "*")
    s = _WRAPPERS.sub(r"\1", s)
    s = _FRAC.sub(r"(\1)/(\2)", s)
    s = _ASSIGNMENT.sub("", s).rstrip(".").strip()
    value = _as_rational(s)
    if value is not None:
        return _rational_text(value)
    return re.sub(r"\s+", "", s).casefold()


def is_correct(final_message: str, truth: str) -> bool:
    """Whether the last boxed answer of `final_message` equals `truth` (itself compared in normal form)."""
    boxed = last_boxed(final_message)
    return boxed is not None and normalize(boxed) == normalize(truth)


def _as_rational(s: str) -> Fraction | None:
    compact = s.replace(" ", "").replace("(", "").replace(")", "")
    if _THOUSANDS.fullmatch(compact):
        compact = compact.replace(",", "")
    number = _NUMBER.fullmatch(compact)
    if number:
        if number.group(3) and abs(int(number.group(3)[1:])) > _MAX_EXPONENT:
            return None  # `1e999999999` would build a giant integer; no true answer looks like that
        return Fraction(compact)
    ratio = _RATIO.fullmatch(compact)
    if ratio and int(ratio.group(2)) != 0:
        return Fraction(int(ratio.group(1)), int(ratio.group(2)))
    return None


def _rational_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
