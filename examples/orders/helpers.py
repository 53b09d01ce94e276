"""Currency conversion for ``job.py``: runs on the driver and, inside a UDF, on the executors."""

from __future__ import annotations

RATES_DATE = "2026-11-20"
#: Euros per unit of each currency.
EUR_PER_UNIT = {"EUR": 1.0, "USD": 0.86, "GBP": 1.14, "CHF": 1.07}


def to_eur(amount: str | None, currency: str | None) -> float | None:
    """``amount`` (as the CSV has it) in euros; None for a missing amount or unknown currency."""
    if amount is None or currency is None:
        return None
    rate = EUR_PER_UNIT.get(currency.strip().upper())
    return None if rate is None else round(float(amount) * rate, 2)
