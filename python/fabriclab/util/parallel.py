"""Independent work on several processes (the reproductions' seeded runs)."""


def map_runs(fn, args: list, workers: int) -> list:
    """``[fn(a) for a in args]``, on ``workers`` processes when more than one
    (results in the order of ``args``)."""
    if workers <= 1:
        return [fn(a) for a in args]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as ex:
        return list(ex.map(fn, args))
