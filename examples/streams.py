#!/usr/bin/env python3
"""Streams on a local squall cluster: `generate | grep | sort | uniq -c`
across governors, each stage reading the one before while it is written,
with no file in between.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 examples/streams.py

A log of 2 million lines is made by one task and streamed to two readers at
once: one counts the errors by code (grep | sort | uniq -c), the other
counts every line (wc -l). Neither the log nor the filtered lines are ever
stored: the governors hold a few chunks of each stream at a time (a window
of 4 chunks of 1 MiB per reader), whatever its size. Only the two small
results are kept and fetched.
"""
import squall
from squall.tasks import Execute

LINES = 2_000_000
LOG = ("awk 'BEGIN { for (i = 0; i < %d; i++) "
       "printf \"%%d %%s code=%%d\\n\", i, (i %% 7 == 0) ? \"ERROR\" : \"ok\", i %% 5 }'" % LINES)


def main():
    with squall.LocalCluster(governors=3, cpus=1) as cluster, cluster.client() as client:
        with client.session() as s:
            log = Execute(LOG, stdout=True, stream=True, name="log")
            errors = Execute("grep ERROR", stdin=log.output, stdout=True, stream=True,
                             name="grep")
            by_code = Execute("awk '{ print $3 }' | sort | uniq -c", stdin=errors.output,
                              stdout=True, name="count")
            lines = Execute("wc -l", stdin=log.output, stdout=True, name="wc")
            by_code.output.keep()
            lines.output.keep()
            s.submit()
            print("lines:", int(lines.output.fetch(120)))
            for row in by_code.output.fetch(120).decode().splitlines():
                count, code = row.split()
                print("errors with %s: %d" % (code, int(count)))
            s.wait([log, errors], 120)
            print("the log and the error lines were streamed, never stored")


if __name__ == "__main__":
    main()
