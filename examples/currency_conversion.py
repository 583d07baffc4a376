"""Currency conversion: payments joined to exchange rates as of each payment's time.

A stream of payments (account, amount in some currency) is joined to a table of exchange
rates (currency -> rate to EUR). Rates change over time and some payments arrive late.
With a plain table a late payment is converted at whatever rate is current when it arrives;
with a versioned table (``Materialized.versioned``) it is converted at the rate that was
valid when it was made. The script prints both, side by side.

Run: ``python examples/currency_conversion.py``.
"""

from __future__ import annotations

from topology import Consumed, Materialized, Serdes, StreamsBuilder, TopologyTestDriver

HOUR = 3_600_000

EVENTS = [  # in arrival order: ("rate", currency, rate to EUR, valid from ms)
    ("rate", "USD", 0.90, 0),  #           or ("payment", id, (currency, amount), made at ms)
    ("rate", "GBP", 1.15, 0),
    ("payment", "p1", ("USD", 100.0), 1 * HOUR),
    ("payment", "p2", ("GBP", 50.0), 1 * HOUR + 60_000),
    ("rate", "USD", 0.95, 2 * HOUR),
    ("payment", "p3", ("USD", 100.0), 2 * HOUR + 60_000),
    ("rate", "GBP", 1.20, 3 * HOUR),
    ("payment", "p4", ("GBP", 50.0), 3 * HOUR + 60_000),
    ("payment", "p5", ("USD", 100.0), 1 * HOUR + 30 * 60_000),  # late: made before 0.95
    ("payment", "p6", ("GBP", 50.0), 2 * HOUR + 30 * 60_000),  # late: made before 1.20
]


def conversion_topology(versioned: bool) -> object:
    """Payments re-keyed by currency, joined to the rates table, converted to EUR."""
    b = StreamsBuilder()
    materialized = (Materialized.versioned("rates", history_retention=24 * HOUR)
                    if versioned else Materialized(name="rates"))
    rates = b.table("rates", Consumed(Serdes.string(), Serdes.double()), materialized)
    (b.stream("payments")
     .map(lambda payment_id, payment: (payment[0], (payment_id, payment[1])))
     .join(rates, lambda payment, rate: (payment[0], round(payment[1] * rate, 2)))
     .map(lambda currency, converted: (converted[0], converted[1]))
     .to("payments-eur"))
    return b.build()


def convert(versioned: bool) -> dict[str, float]:
    """Run every rate and payment through the driver; the EUR amount of each payment."""
    with TopologyTestDriver(conversion_topology(versioned)) as driver:
        rates = driver.create_input_topic("rates", Serdes.string(), Serdes.double())
        payments = driver.create_input_topic("payments")
        out = driver.create_output_topic("payments-eur")
        for kind, key, value, timestamp in EVENTS:
            topic = rates if kind == "rate" else payments
            topic.pipe_input(key, value, timestamp=timestamp)
        return dict(out.read_key_values_to_list())


def main() -> None:
    """Print each payment converted at the latest rate and at the rate of its time."""
    latest, as_of = convert(versioned=False), convert(versioned=True)
    print(f"{'payment':<8} {'made at':>8} {'amount':>12} {'latest rate':>12} {'as of':>9}")
    for kind, payment_id, payment, made_at in EVENTS:
        if kind != "payment":
            continue
        currency, amount = payment
        mark = "  <- late: the rate had changed" if latest[payment_id] != as_of[payment_id] \
            else ""
        print(f"{payment_id:<8} {made_at / HOUR:>7.2f}h {amount:>8.2f} {currency} "
              f"{latest[payment_id]:>12.2f} {as_of[payment_id]:>9.2f}{mark}")


if __name__ == "__main__":
    main()
