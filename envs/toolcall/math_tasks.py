"""ReTool-style math problems, generated offline: the same list on every machine and every run.

The reference trains on DAPO's math set, which must be downloaded; this project
never downloads at run time, so problems are generated instead, of kinds where
running code is the natural way to be exact (big arithmetic, modular powers,
counting, primes, digit sums, series, gcd/lcm, bases, linear systems, exact
probabilities). One `random.Random(seed)` draws every problem in a fixed order of
kinds, so `generate(n)` is a prefix of `generate(n + k)`, and Python's Mersenne
Twister with an integer seed gives the same draws on every platform and version.
Each answer is computed here exactly and stored in `math_answer.normalize` form.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from fractions import Fraction
from functools import cache, lru_cache
from itertools import product

from pydantic import BaseModel

from envs.toolcall.math_answer import normalize

SEED = 20240607
"""Changing it changes every problem: task ids would then name other problems than before."""
BOXED = "Put your final answer in \\boxed{}."
FRACTION = "Give it as a reduced fraction a/b and put it in \\boxed{}."


class MathProblem(BaseModel):
    index: int
    kind: str
    question: str
    answer: str
    """The exact answer in normal form (`n` or `p/q`)."""

    @property
    def task_id(self) -> str:
        return f"math/{self.index}"


# ---- the kinds: each draws its numbers from `rng` and returns (question, exact answer) --------------------------


def _product(rng: random.Random) -> tuple[str, object]:
    a, b = rng.randrange(10**11, 10**14), rng.randrange(10**9, 10**12)
    return f"Compute {a} × {b} exactly. {BOXED}", a * b


def _power(rng: random.Random) -> tuple[str, object]:
    base, exp = rng.randrange(3, 20), rng.randrange(25, 61)
    return f"Compute {base}^{exp} exactly (all digits). {BOXED}", base**exp


def _modpow(rng: random.Random) -> tuple[str, object]:
    a, e, m = rng.randrange(2, 10**6), rng.randrange(10**8, 10**12), rng.randrange(10**5, 10**9)
    return f"What is the remainder when {a}^{e} is divided by {m}? {BOXED}", pow(a, e, m)


def _inclusion_exclusion(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(10**5, 10**7)
    a, b = rng.sample(range(3, 31), 2)
    c = rng.randrange(7, 51)

    def f(*ds: int) -> int:
        return n // math.lcm(*ds)

    count = f(a) + f(b) - f(a, b) - (f(a, c) + f(b, c) - f(a, b, c))
    question = f"How many integers from 1 to {n} (inclusive) are divisible by {a} or by {b}, but not by {c}? {BOXED}"
    return question, count


def _binomial(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(30, 121)
    k = rng.randrange(5, n - 4)
    return f"In how many ways can a committee of {k} people be chosen from {n} people? {BOXED}", math.comb(n, k)


def _subset_sums(rng: random.Random) -> tuple[str, object]:
    n, m = rng.randrange(12, 23), rng.randrange(3, 14)
    ways = [1] + [0] * (m - 1)  # ways[r]: subsets so far whose sum is r mod m
    for x in range(1, n + 1):
        ways = [ways[r] + ways[(r - x) % m] for r in range(m)]
    question = (
        f"How many subsets of {{1, 2, ..., {n}}} (the empty set included) have a sum of elements divisible by {m}?"
    )
    return f"{question} {BOXED}", ways[0]


def _nth_prime(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(300, 3001)
    return f"What is the {_ordinal(n)} prime number (2 is the 1st)? {BOXED}", _primes()[n - 1]


def _prime_sum(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(1000, 50001)
    return f"What is the sum of all prime numbers less than {n}? {BOXED}", sum(p for p in _primes() if p < n)


def _prime_count(rng: random.Random) -> tuple[str, object]:
    lo = rng.randrange(10**4, 10**5)
    hi = lo + rng.randrange(1000, 20001)
    question = f"How many prime numbers p satisfy {lo} ≤ p ≤ {hi}? {BOXED}"
    return question, sum(1 for p in _primes() if lo <= p <= hi)


def _digit_sum_factorial(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(40, 401)
    return f"What is the sum of the decimal digits of {n}! ({n} factorial)? {BOXED}", _digit_sum(math.factorial(n))


def _digit_sum_power(rng: random.Random) -> tuple[str, object]:
    k = rng.randrange(100, 2001)
    return f"What is the sum of the decimal digits of 2^{k}? {BOXED}", _digit_sum(2**k)


def _power_sum(rng: random.Random) -> tuple[str, object]:
    n, p = rng.randrange(50, 2001), rng.randrange(2, 6)
    return f"Compute 1^{p} + 2^{p} + 3^{p} + ... + {n}^{p}. {BOXED}", sum(k**p for k in range(1, n + 1))


def _telescoping(rng: random.Random) -> tuple[str, object]:
    a, n = rng.randrange(1, 5), rng.randrange(10, 201)
    total = sum(Fraction(1, k * (k + a)) for k in range(1, n + 1))
    return f"Compute the sum of 1/(k(k+{a})) for k = 1, 2, ..., {n}. {FRACTION}", total


def _weighted_geometric(rng: random.Random) -> tuple[str, object]:
    r, n = rng.randrange(2, 6), rng.randrange(10, 41)
    total = sum(k * r**k for k in range(1, n + 1))
    return f"Compute the sum of k·{r}^k for k = 1, 2, ..., {n}. {BOXED}", total


def _gcd(rng: random.Random) -> tuple[str, object]:
    g = rng.randrange(10**3, 10**6)
    a, b = g * rng.randrange(10**6, 10**9), g * rng.randrange(10**6, 10**9)
    return f"What is the greatest common divisor of {a} and {b}? {BOXED}", math.gcd(a, b)


def _lcm(rng: random.Random) -> tuple[str, object]:
    numbers = sorted(rng.sample(range(10, 201), rng.randrange(5, 9)))
    listed = ", ".join(map(str, numbers))
    return f"What is the least common multiple of {listed}? {BOXED}", math.lcm(*numbers)


def _to_base(rng: random.Random) -> tuple[str, object]:
    n, base = rng.randrange(10**4, 10**8), rng.randrange(2, 10)
    digits, rest = "", n
    while rest:
        digits, rest = str(rest % base) + digits, rest // base
    question = f"Write the decimal number {n} in base {base}. Give only the base-{base} digits, in \\boxed{{}}."
    return question, digits


def _from_base(rng: random.Random) -> tuple[str, object]:
    base = rng.randrange(2, 10)
    digits = str(rng.randrange(1, base)) + "".join(str(rng.randrange(base)) for _ in range(rng.randrange(7, 14)))
    return f"The number {digits} is written in base {base}. What is it in base 10? {BOXED}", int(digits, base)


def _linear_system(rng: random.Random) -> tuple[str, object]:
    x = [rng.randrange(-20, 21) for _ in range(3)]
    while True:
        rows = [[rng.randrange(-9, 10) for _ in range(3)] for _ in range(3)]
        if _det3(rows) != 0:
            break
    equations = "; ".join(f"{_linear(row)} = {sum(c * v for c, v in zip(row, x))}" for row in rows)
    question = f"The integers x, y, z satisfy {equations}. What is x + 2y + 3z? {BOXED}"
    return question, x[0] + 2 * x[1] + 3 * x[2]


def _dice(rng: random.Random) -> tuple[str, object]:
    k = rng.randrange(2, 6)
    s = rng.randrange(k + 1, 6 * k)
    ways = sum(1 for roll in product(range(1, 7), repeat=k) if sum(roll) == s)
    question = f"{k} fair six-sided dice are rolled. What is the probability that the sum of the faces is {s}?"
    return f"{question} {FRACTION}", Fraction(ways, 6**k)


def _hypergeometric(rng: random.Random) -> tuple[str, object]:
    red, blue = rng.randrange(4, 16), rng.randrange(4, 16)
    draw = rng.randrange(3, 8)
    j = rng.randrange(1, min(draw, red) + 1)
    p = Fraction(math.comb(red, j) * math.comb(blue, draw - j), math.comb(red + blue, draw))
    question = (
        f"An urn holds {red} red and {blue} blue balls. {draw} balls are drawn at random without replacement."
        f" What is the probability that exactly {j} of them are red?"
    )
    return f"{question} {FRACTION}", p


def _fibonacci_mod(rng: random.Random) -> tuple[str, object]:
    n, m = rng.randrange(10**4, 10**6), rng.randrange(10**3, 10**9)
    question = f"Let F(1) = F(2) = 1 and F(n) = F(n-1) + F(n-2). What is F({n}) mod {m}? {BOXED}"
    return question, _fib_mod(n, m)


def _totient(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(10**5, 10**9)
    result = n
    for p in _prime_factors(n):
        result -= result // p
    return f"What is Euler's totient φ({n}), the count of 1 ≤ k ≤ {n} coprime to {n}? {BOXED}", result


def _divisor_sum(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(10**5, 10**8)
    total = 1
    for p, e in _prime_factors(n).items():
        total *= (p ** (e + 1) - 1) // (p - 1)
    return f"What is the sum of all positive divisors of {n} ({n} itself included)? {BOXED}", total


def _collatz(rng: random.Random) -> tuple[str, object]:
    n, steps = rng.randrange(10**3, 10**6), 0
    start = n
    while n != 1:
        n, steps = (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1
    question = f"Starting from {start}, repeatedly replace n by n/2 if n is even and by 3n+1 if n is odd."
    return f"{question} How many steps does it take to reach 1? {BOXED}", steps


def _derangements(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(8, 21)
    d = [1, 0]
    for i in range(2, n + 1):
        d.append((i - 1) * (d[-1] + d[-2]))
    question = f"In how many ways can {n} letters be put into their {n} addressed envelopes with no letter correct?"
    return f"{question} {BOXED}", d[n]


def _partitions(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(30, 121)
    ways = [1] + [0] * n
    for part in range(1, n + 1):
        for total in range(part, n + 1):
            ways[total] += ways[total - part]
    question = f"In how many ways can {n} be written as a sum of positive integers, ignoring the order of the terms?"
    return f"{question} {BOXED}", ways[n]


def _trailing_zeros(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(10**4, 10**9)
    zeros, power = 0, 5
    while power <= n:
        zeros, power = zeros + n // power, power * 5
    return f"How many zeros does {n}! end with (in base 10)? {BOXED}", zeros


def _digit_count(rng: random.Random) -> tuple[str, object]:
    a, b = rng.randrange(2, 100), rng.randrange(100, 1001)
    return f"How many decimal digits does {a}^{b} have? {BOXED}", len(str(a**b))


def _catalan(rng: random.Random) -> tuple[str, object]:
    n = rng.randrange(10, 41)
    question = f"How many sequences of {n} opening and {n} closing parentheses are balanced?"
    return f"{question} {BOXED}", math.comb(2 * n, n) // (n + 1)


KINDS: dict[str, Callable[[random.Random], tuple[str, object]]] = {
    "product": _product,
    "power": _power,
    "modpow": _modpow,
    "inclusion_exclusion": _inclusion_exclusion,
    "binomial": _binomial,
    "subset_sums": _subset_sums,
    "nth_prime": _nth_prime,
    "prime_sum": _prime_sum,
    "prime_count": _prime_count,
    "digit_sum_factorial": _digit_sum_factorial,
    "digit_sum_power": _digit_sum_power,
    "power_sum": _power_sum,
    "telescoping": _telescoping,
    "weighted_geometric": _weighted_geometric,
    "gcd": _gcd,
    "lcm": _lcm,
    "to_base": _to_base,
    "from_base": _from_base,
    "linear_system": _linear_system,
    "dice": _dice,
    "hypergeometric": _hypergeometric,
    "fibonacci_mod": _fibonacci_mod,
    "totient": _totient,
    "divisor_sum": _divisor_sum,
    "collatz": _collatz,
    "derangements": _derangements,
    "partitions": _partitions,
    "trailing_zeros": _trailing_zeros,
    "digit_count": _digit_count,
    "catalan": _catalan,
}
"""Drawn in this order, round and round: reordering or inserting a kind changes the problems after it."""


@lru_cache(maxsize=4)
def generate(count: int = 200, seed: int = SEED) -> tuple[MathProblem, ...]:
    """The first `count` problems of the seed's sequence (a repeated question is drawn again, never kept twice)."""
    rng = random.Random(seed)
    problems: list[MathProblem] = []
    seen: set[str] = set()
    kinds = list(KINDS.items())
    turn = 0
    while len(problems) < count:
        kind, draw = kinds[turn % len(kinds)]
        turn += 1
        question, answer = draw(rng)
        if question in seen:
            continue
        seen.add(question)
        problems.append(MathProblem(index=len(problems), kind=kind, question=question, answer=answer_text(answer)))
    return tuple(problems)


# ---- helpers ---------------------------------------------------------------------------------------------------


def answer_text(value: object) -> str:
    return normalize(str(value))  # base-b digits too: a numeral without leading zeros is its own normal form


@cache
def _primes(limit: int = 130_000) -> tuple[int, ...]:
    sieve = bytearray([1]) * (limit + 1)
    sieve[0:2] = b"\x00\x00"
    for i in range(2, math.isqrt(limit) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, limit + 1, i)))
    return tuple(i for i, is_prime in enumerate(sieve) if is_prime)


def _prime_factors(n: int) -> dict[int, int]:
    factors: dict[int, int] = {}
    d = 2
    while d * d <= n:
        while n % d == 0:
            factors[d] = factors.get(d, 0) + 1
            n //= d
        d += 1 if d == 2 else 2
    if n > 1:
        factors[n] = factors.get(n, 0) + 1
    return factors


def _ordinal(n: int) -> str:
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _digit_sum(n: int) -> int:
    return sum(map(int, str(n)))


def _fib_mod(n: int, m: int) -> int:
    """F(n) mod m by fast doubling: F(2k) = F(k)(2F(k+1) - F(k)), F(2k+1) = F(k)^2 + F(k+1)^2."""
    a, b = 0, 1  # F(0), F(1)
    for bit in bin(n)[2:]:
        c = a * ((2 * b - a) % m) % m
        d = (a * a + b * b) % m
        a, b = (d, (c + d) % m) if bit == "1" else (c, d)
    return a


def _det3(r: list[list[int]]) -> int:
    return (
        r[0][0] * (r[1][1] * r[2][2] - r[1][2] * r[2][1])
        - r[0][1] * (r[1][0] * r[2][2] - r[1][2] * r[2][0])
        + r[0][2] * (r[1][0] * r[2][1] - r[1][1] * r[2][0])
    )


def _linear(row: list[int]) -> str:
    """`3x - y + 2z` from coefficients (zero terms left out; a nonsingular system has a nonzero one per row)."""
    text = ""
    for coef, var in zip(row, "xyz"):
        if coef == 0:
            continue
        size = "" if abs(coef) == 1 else str(abs(coef))
        if not text:
            text = f"{'-' if coef < 0 else ''}{size}{var}"
        else:
            text += f" {'-' if coef < 0 else '+'} {size}{var}"
    return text
