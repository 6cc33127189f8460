"""Timing the benches share."""
import time


def best(fn, repeat):
    """The least wall time, in seconds, of `repeat` calls of fn()."""
    least = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        least = min(least, time.perf_counter() - t0)
    return least
