#!/usr/bin/env python3
"""A Rain-style graph: constants, a program, Python tasks and built-in tasks.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 examples/graph.py
"""
import squall
from squall import tasks

TEXT = b"the quick brown fox jumps over the lazy dog\n" * 1000


@squall.remote
def word_count(data: bytes) -> dict:
    counts: dict = {}
    for word in data.split():
        counts[word.decode()] = counts.get(word.decode(), 0) + 1
    return counts


@squall.remote
def merge(*parts: dict) -> dict:
    total: dict = {}
    for part in parts:
        for word, n in part.items():
            total[word] = total.get(word, 0) + n
    return total


def main() -> None:
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        with client.session() as session:
            text = squall.blob(TEXT, "text/plain")
            quarter = len(TEXT) // 4
            parts = [tasks.Slice(text, i * quarter, (i + 1) * quarter if i < 3 else None)
                     for i in range(4)]
            upper = squall.Program("tr a-z A-Z", stdin=True, stdout=True)
            shouted = tasks.Concat([upper(p) for p in parts])
            counts = merge(*[word_count(p) for p in parts])
            shouted.output.keep()
            counts.output.keep()
            session.submit()
            print(shouted.output.fetch()[:44].decode(), end="")
            print(sorted(counts.output.fetch().items()))


if __name__ == "__main__":
    main()
