"""Partition values -> time, on Paimon's PartitionTimeExtractorTest cases, plus formatters."""

from __future__ import annotations

from datetime import datetime

import pytest

from lakecore.errors import OptionError
from lakecore.schema.partition_time import (
    PartitionTimeError,
    extract_time,
    parse_timestamp,
    validate_partition_expiration,
)


def dt(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize("text,expected", [
    ("2023-01-01 20:08:08", "2023-01-01T20:08:08"),
    ("2023-1-1 20:08:08", "2023-01-01T20:08:08"),
    ("2023-01-01", "2023-01-01T00:00:00"),
    ("2023-1-1", "2023-01-01T00:00:00"),
    ("2023-01-01 01:02:03.5", "2023-01-01T01:02:03.500000"),
])
def test_default_formatter(text, expected):
    assert extract_time([], [text], None, None) == dt(expected)


def test_pattern():
    keys = ["year", "month", "day", "hour"]
    assert extract_time(keys[:3], ["2023", "01", "01"], "$year-$month-$day 00:00:00",
                        None) == dt("2023-01-01T00:00:00")
    assert extract_time(keys, ["2023", "01", "01", "01"], "$year-$month-$day $hour:00:00",
                        None) == dt("2023-01-01T01:00:00")
    assert extract_time(["other", "dt"], ["dummy", "2023-01-01"], "$dt",
                        None) == dt("2023-01-01T00:00:00")


def test_pattern_with_prefix_variable_names():
    assert extract_time(["dt1", "dt", "dt2"], ["2023", "01", "02"], "$dt1-$dt-$dt2 00:00:00",
                        None) == dt("2023-01-02T00:00:00")
    assert extract_time(["t", "t4", "t2", "t3"], ["2023-01-01", "03", "01", "02"],
                        "$t $t2:$t3:$t4", None) == dt("2023-01-01T01:02:03")
    assert extract_time(["dt", "dt1"], ["01", "022023"], "$dt1$dt",
                        "MMyyyydd") == dt("2023-02-01T00:00:00")


@pytest.mark.parametrize("text,formatter,expected", [
    ("20230101", "yyyyMMdd", "2023-01-01T00:00:00"),
    ("2023-01-31", "yyyy-MM-dd", "2023-01-31T00:00:00"),
    ("2023010112", "yyyyMMddHH", "2023-01-01T12:00:00"),
    ("2023/01/01 23:59:58", "yyyy/MM/dd HH:mm:ss", "2023-01-01T23:59:58"),
    ("2023-01-01T05:06", "yyyy-MM-dd'T'HH:mm", "2023-01-01T05:06:00"),
    ("230102", "yyMMdd", "2023-01-02T00:00:00"),
    ("2023-2-3", "yyyy-M-d", "2023-02-03T00:00:00"),
    ("2023-02-31", "yyyy-MM-dd", "2023-02-28T00:00:00"),  # Java SMART resolving
    ("20230101 000000123", "yyyyMMdd HHmmssSSS", "2023-01-01T00:00:00.123000"),
])
def test_formatters(text, formatter, expected):
    assert parse_timestamp(text, formatter) == dt(expected)


@pytest.mark.parametrize("text,formatter", [
    ("unknown", "yyyyMMdd"), ("2023011", "yyyyMMdd"), ("20231301", "yyyyMMdd"),
    ("abc", None), ("2023/01/01", None),
])
def test_unparsable(text, formatter):
    with pytest.raises(PartitionTimeError):
        parse_timestamp(text, formatter)


def test_null_value_is_unparsable():
    with pytest.raises(PartitionTimeError, match="null"):
        extract_time(["dt"], [None], None, None)


def test_validation_against_partition_keys():
    validate_partition_expiration(["dt", "hr"], "$dt $hr:00:00", None, True)
    validate_partition_expiration(["dt"], None, "yyyyMMdd", True)
    with pytest.raises(OptionError, match="partition.timestamp-pattern"):
        validate_partition_expiration(["dt"], "$day", None, True)
    with pytest.raises(OptionError, match="partition.timestamp-formatter"):
        validate_partition_expiration(["dt"], None, "yyyy-MMM-dd", True)
    with pytest.raises(OptionError, match="partition.timestamp-formatter"):
        validate_partition_expiration(["dt"], None, "HH:mm", True)
    with pytest.raises(OptionError, match="partition.expiration-time"):
        validate_partition_expiration([], None, None, True)


def test_check_on_an_option_map():
    from lakecore.options import CoreOptions
    from lakecore.schema.partition_time import check_partition_expiration_options

    opts = CoreOptions.from_map({"partition.expiration-time": "7 d",
                                 "partition.timestamp-pattern": "$dt"})
    check_partition_expiration_options(opts, ["dt"])
    with pytest.raises(OptionError, match="not a partition key"):
        check_partition_expiration_options(opts, ["day"])
