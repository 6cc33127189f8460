#!/usr/bin/env python3
"""Dask collections computed by squall (needs `pip install "dask[array,bag]"`).

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 examples/dask_array.py
"""
import dask
import dask.array as da
import dask.bag as db

import squall


def main() -> None:
    with squall.LocalCluster(governors=2, cpus=1) as cluster:
        client = cluster.client()
        x = da.random.RandomState(0).normal(size=(2000, 2000), chunks=(500, 500))
        y = (x + x.T).std()
        print("std:", dask.compute(y, scheduler=client.get)[0])
        with dask.config.set(scheduler=client.get):
            words = db.from_sequence(["a b", "b c", "c a b"], npartitions=2)
            print(sorted(words.map(str.split).flatten().frequencies().compute()))


if __name__ == "__main__":
    main()
