"""Paper reproductions (``fabriclab reproduce``), one module per paper or figure set."""


def map_runs(fn, args: list, workers: int) -> list:
    """``[fn(a) for a in args]``, on ``workers`` processes when more than one
    (results in the order of ``args``)."""
    if workers <= 1:
        return [fn(a) for a in args]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as ex:
        return list(ex.map(fn, args))
