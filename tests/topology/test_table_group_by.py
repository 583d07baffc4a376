"""KTable.group_by selectors that give no usable pair (Kafka's KTableRepartitionMap)."""

from topology import StreamsBuilder, TopologyTestDriver


def _run(selector, rows):
    b = StreamsBuilder()
    b.table("in").group_by(selector).count().to_stream().to("out")
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        t = d.create_input_topic("in")
        for row in rows:
            t.pipe_input(*row)
        out = [(r.key, r.value) for r in d.create_output_topic("out").read_records_to_list()]
        return out, d.metrics()


def test_none_key_of_the_new_pair_is_skipped_and_counted_once() -> None:
    # k1: "x" -> group x; then "drop" -> no group: x is decremented, the new pair dropped;
    # then "y": the old pair (None key) was never added, so nothing is subtracted or counted
    out, m = _run(lambda k, v: (None if v == "drop" else v, k),
                  [("k1", "x", 0), ("k1", "drop", 1), ("k1", "y", 2)])
    assert out == [("x", 1), ("x", 0), ("y", 1)]
    assert m["dropped-records-total{reason=null-key}"] == 1
    assert m["dropped-records-total"] == 1


def test_none_instead_of_a_pair_is_skipped_like_a_none_key() -> None:
    out, m = _run(lambda k, v: None if v == "drop" else (v, k),
                  [("k1", "drop", 0), ("k1", "x", 1)])
    assert out == [("x", 1)]
    assert m["dropped-records-total{reason=null-key}"] == 1


def test_none_value_of_the_new_pair_is_skipped_and_counted() -> None:
    out, m = _run(lambda k, v: (v, None if v == "nv" else k),
                  [("k1", "x", 0), ("k1", "nv", 1), ("k1", "x", 2)])
    assert out == [("x", 1), ("x", 0), ("x", 1)]
    assert m["dropped-records-total{reason=null-value}"] == 1
    assert m["dropped-records-total"] == 1


def test_selector_sees_the_new_value_before_the_old_one() -> None:
    seen = []

    def selector(k, v):
        seen.append(v)
        return v, k

    _run(selector, [("k1", "a", 0), ("k1", "b", 1)])
    assert seen == ["a", "b", "a"]


def test_a_table_group_by_runs_durable_and_restarts(tmp_path) -> None:
    """The repartition topic's records (old and new value pairs) go through a state_dir."""
    from topology import StreamsBuilder, TopologyTestDriver

    def build():
        b = StreamsBuilder()
        b.table("t").group_by(lambda k, v: (v, k)).count().to_stream().to("out")
        return b.build()

    with TopologyTestDriver(build(), state_dir=tmp_path) as driver:
        table = driver.create_input_topic("t")
        table.pipe_input("a", "x", 1)
        table.pipe_input("b", "x", 2)
        table.pipe_input("a", "y", 3)
        first = driver.create_output_topic("out").read_key_values_to_list()
    with TopologyTestDriver(build(), state_dir=tmp_path) as driver:
        driver.create_input_topic("t").pipe_input("b", "y", 4)
        second = driver.create_output_topic("out").read_key_values_to_list()
    assert first == [("x", 1), ("x", 2), ("x", 1), ("y", 1)]
    assert second == [("x", 0), ("y", 2)]
