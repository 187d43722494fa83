"""C4D's delay matrix (C4 section 3.1, figure 6) classified on hand-built
matrices: a point is one slow connection, a row its source, a column its
destination, a row and a column through one rank that rank's host."""

import numpy as np

from fabriclab.systems.c4.matrix import classify

N = 6
ALL = ~np.eye(N, dtype=bool)  # every pair talks (all-to-all)


def flags(*pairs):
    f = np.zeros((N, N), bool)
    for i, j in pairs:
        f[i, j] = True
    return f


def test_one_slow_connection_is_a_point():
    assert classify(flags((1, 4)), ALL) == [("point", (1, 4))]


def test_a_slow_source_is_a_row():
    assert classify(flags(*[(2, j) for j in range(N) if j != 2]), ALL) == [("row", 2)]


def test_a_slow_destination_is_a_column():
    assert classify(flags(*[(i, 3) for i in range(N) if i != 3]), ALL) == [("column", 3)]


def test_row_and_column_through_one_rank_is_its_host():
    f = flags(*[(0, j) for j in range(1, N)], *[(i, 0) for i in range(1, N)])
    assert classify(f, ALL) == [("host", 0)]


def test_a_partial_row_is_points():
    got = classify(flags((2, 0), (2, 1)), ALL)
    assert got == [("point", (2, 0)), ("point", (2, 1))]


def test_ring_neighbours_of_one_rank_are_its_host():
    ring = flags(*[(i, (i + 1) % N) for i in range(N)])
    assert classify(flags((1, 2), (2, 3)), ring) == [("host", 2)]
    assert classify(flags((2, 3)), ring) == [("point", (2, 3))]


def test_a_tree_leaf_is_not_mistaken_for_the_slow_host():
    # Rank 0 talks both ways with 1, 2 and 3; 1, 2 and 3 only with 0.
    star = flags(*[(0, j) for j in (1, 2, 3)], *[(j, 0) for j in (1, 2, 3)])
    assert classify(star, star) == [("host", 0)]
