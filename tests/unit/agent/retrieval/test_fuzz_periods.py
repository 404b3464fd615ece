"""Property tests of the period parser (hypothesis): on any text it finds phrases that are really in the text, resolves
them only to periods the company has, never raises, and round-trips every period it can name; impossible periods
are told apart from possible ones."""
from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.models.corpus import Period
from agent.retrieval.periods import (
    EARLIEST_FISCAL_YEAR,
    YEARS_AHEAD,
    find_time_refs,
    impossible_periods,
    parse_quarters_option,
    resolve,
)

FAST = settings(max_examples=300, deadline=None, database=None)
LATEST_YEAR = dt.date.today().year + YEARS_AHEAD

periods = st.builds(Period, fiscal_year=st.integers(1990, 2035), fiscal_quarter=st.integers(1, 4))
available = st.lists(periods, max_size=12)
ORDINALS = ["first", "second", "third", "fourth", "fifth", "1st", "2nd", "3rd", "4th", "7th", "zeroth"]

# time phrases, well-formed or not, with numbers anywhere, inside arbitrary text
phrase = st.one_of(
    st.builds("Q{} {}".format, st.integers(-1, 12), st.integers(0, 3000)),
    st.builds("{} Q{}".format, st.integers(0, 3000), st.integers(0, 12)),
    st.builds("{}Q{:02d}".format, st.integers(0, 9), st.integers(0, 99)),
    st.builds("Q{} '{:02d}".format, st.integers(0, 9), st.integers(0, 99)),
    st.builds("FY{}".format, st.integers(0, 3000)),
    st.builds("fiscal year {}".format, st.integers(0, 3000)),
    st.builds("last {} quarters".format, st.integers(0, 99)),
    st.builds("past {} years".format, st.sampled_from(["zero", "one", "two", "twelve", "0", "7"])),
    st.builds("the {} quarter of {}".format, st.sampled_from(ORDINALS), st.integers(0, 3000)),
    st.sampled_from(["latest", "last quarter", "most recent year", "this quarter", "in 2021", "during 1850"]),
)
question = st.lists(st.one_of(phrase, st.text(max_size=30)), max_size=6).map(" ".join)


@FAST
@given(question)
def test_found_phrases_are_in_the_text_in_order(text):
    refs = find_time_refs(text)
    at = 0
    for ref in refs:
        assert ref == ref.strip() and ref
        at = text.index(ref, at)  # present, after the previous one


@FAST
@given(st.lists(st.one_of(phrase, st.text(max_size=40)), max_size=5), available)
def test_resolution_never_raises_and_never_invents_a_period(refs, avail):
    out = resolve(refs, avail, "TICK")
    assert set(out.periods) <= set(avail)
    assert out.periods == sorted(set(out.periods))
    assert all(isinstance(p, str) and p for p in out.problems)
    if not avail:
        assert out.periods == [] and out.problems
    elif not refs:
        assert out.periods == sorted(set(avail))[-1:]


@FAST
@given(available.filter(bool), st.data())
def test_every_period_round_trips(avail, data):
    p = data.draw(st.sampled_from(avail))
    assert resolve([p.label], avail, "TICK").periods == [p]
    assert resolve(find_time_refs(f"What changed in {p.label}?"), avail, "TICK").periods == [p]
    assert resolve(parse_quarters_option(f"{p.fiscal_year}_q{p.fiscal_quarter}"), avail, "TICK").periods == [p]
    year = resolve([f"FY{p.fiscal_year}"], avail, "TICK")
    assert year.periods == sorted({a for a in avail if a.fiscal_year == p.fiscal_year}) and not year.problems


@FAST
@given(st.integers(1, 4), st.integers(0, 99))
def test_two_digit_years_pivot_like_strptime(q, yy):
    year = 2000 + yy if yy < 69 else 1900 + yy
    target = Period(fiscal_year=year, fiscal_quarter=q)
    assert resolve([f"Q{q} '{yy:02d}"], [target], "TICK").periods == [target]


@FAST
@given(question)
def test_impossible_periods_never_raises(text):
    problems = impossible_periods(text)
    assert all(isinstance(p, str) and "\n" not in p for p in problems)


@FAST
@given(st.integers(1, 4), st.integers(EARLIEST_FISCAL_YEAR, LATEST_YEAR), st.sampled_from(["Q{q} {y}", "{y} Q{q}", "Q{q} of FY{y}", "FY{y}"]))
def test_possible_periods_are_never_refused(q, y, form):
    assert impossible_periods(f"What was revenue in {form.format(q=q, y=y)}?") == []


@FAST
@given(st.one_of(st.integers(0, 0), st.integers(5, 99)), st.integers(EARLIEST_FISCAL_YEAR, LATEST_YEAR))
def test_a_quarter_outside_one_to_four_is_refused(q, y):
    assert impossible_periods(f"What was revenue in Q{q} {y}?")


@FAST
@given(st.integers(1, 4), st.one_of(st.integers(1000, EARLIEST_FISCAL_YEAR - 1), st.integers(LATEST_YEAR + 1, 9999)))
def test_a_year_no_filing_can_cover_is_refused(q, y):
    assert impossible_periods(f"What was revenue in Q{q} {y}?")
    assert impossible_periods(f"What was revenue in fiscal {y}?")
