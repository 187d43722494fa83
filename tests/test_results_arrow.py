"""The flows, links and messages tables are built from Arrow buffers (so
that `fabriclab run` never imports pandas, issue 13): each builder must give
exactly the array pyarrow's own converter gives, nulls included."""

import numpy as np
import pyarrow as pa

from fabriclab.results import arrow_column, arrow_numbers, arrow_strings


def test_numbers_match_pyarrow_for_every_width():
    for typ, values in ((pa.uint8(), [0, 7, 255]), (pa.uint32(), [0, 2**32 - 1, 5]),
                        (pa.uint64(), [0, 2**64 - 1, 2**63]), (pa.float64(), [0.5, -1e300, float("nan")]),
                        (pa.bool_(), [True, False, True, True, False, False, True, False, True])):
        got = arrow_numbers(values, typ)
        assert got.type == typ
        assert got.to_pylist()[:2] == pa.array(values, typ).to_pylist()[:2]
        assert got.equals(pa.array(values, typ)) or typ == pa.float64()  # NaN != NaN in equals


def test_class_bytes_are_read_as_uint8():
    assert arrow_numbers(b"\x00\x03\xff", pa.uint8()).to_pylist() == [0, 3, 255]


def test_nulls_where_not_valid():
    valid = np.array([True, False, True, False, False, True, True, True, False])
    got = arrow_numbers(np.arange(9, dtype=np.uint64), pa.uint64(), valid)
    assert got.null_count == 4
    assert got.to_pylist() == [0, None, 2, None, None, 5, 6, 7, None]
    assert arrow_column([1, None, 3], pa.uint64()).to_pylist() == [1, None, 3]
    assert arrow_numbers([1, 2], pa.uint64(), np.array([True, True])).null_count == 0


def test_strings_match_pyarrow():
    values = ["h0", "", "leaf-ü", "spine12"]
    assert arrow_strings(values).equals(pa.array(values, pa.string()))
    assert arrow_strings([]).equals(pa.array([], pa.string()))
    assert arrow_column(["a", None], pa.string()).to_pylist() == ["a", None]
