"""The novel split's money tools answer arguments a float cannot hold with a tool error, not a crash: a policy asked
`compound_interest` for an enormous rate compounded often for years (OverflowError, a traceback in serve's log, the
soak of 2026-12-06)."""

import asyncio

import pytest

from sim.real.everyday_novel import compound_interest, loan_payment
from sim.real.registry import ToolError


@pytest.mark.parametrize(
    "tool, args",
    [
        (compound_interest, {"principal": 1000, "rate_percent": 1e6, "years": 100, "compounds_per_year": 365}),
        (compound_interest, {"principal": 1e308, "rate_percent": 50, "years": 10}),
        (loan_payment, {"principal": 1000, "annual_rate_percent": 5, "years": 0}),
        (loan_payment, {"principal": 1e308, "annual_rate_percent": 1e6, "years": 30}),
    ],
)
def test_out_of_range_arguments_are_a_tool_error(tool, args):
    with pytest.raises(ToolError, match="out of range"):
        asyncio.run(tool(args, None))


def test_ordinary_arguments_still_compute():
    out = asyncio.run(compound_interest({"principal": 1000, "rate_percent": 5, "years": 2}, None))
    assert out == {"amount": 1102.5, "interest": 102.5, "compounds_per_year": 1}
    pay = asyncio.run(loan_payment({"principal": 1200, "annual_rate_percent": 0, "years": 1}, None))
    assert pay == {"monthly_payment": 100.0, "total_paid": 1200.0, "total_interest": 0.0}
