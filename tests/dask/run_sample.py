"""Runs a bounded sample of Dask's own test modules with squall as the
scheduler (tests/dask/squall_dask_plugin.py: one LocalCluster, every local
compute through its client.get). Known failures are strict xfails with
their reasons (tests/dask/xfail.py). Registered in ctest as
python_dask_sample.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 tests/dask/run_sample.py [--all] [pytest args]

--all runs every collection test module of dask.array, dask.bag and
dask.delayed instead of the sample (a one-off: tens of minutes).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

#   The sample: modules that exercise the scheduler through the collections
#   (graphs of every shape: chains, reductions, shuffles, many outputs)
#   and stay well under a minute on two cores.
SAMPLE = [
    "tests/test_delayed.py",
    "bag/tests/test_bag.py",
    "array/tests/test_creation.py",
    "array/tests/test_ufunc.py",
]

#   --all: the collection modules (not the ones about Dask's own schedulers,
#   distributed, GPUs or optional dependencies).
ALL = ["tests/test_delayed.py", "bag/tests/test_bag.py", "bag/tests/test_random.py",
       "bag/tests/test_text.py"] + ["array/tests/" + m for m in (
           "test_array_core.py", "test_creation.py", "test_ufunc.py", "test_reductions.py",
           "test_routines.py", "test_slicing.py", "test_rechunk.py", "test_reshape.py",
           "test_overlap.py", "test_map_blocks.py", "test_gufunc.py", "test_linalg.py",
           "test_random.py", "test_percentiles.py", "test_fft.py", "test_atop.py",
           "test_masked.py", "test_shuffle.py", "test_wrap.py", "test_chunk.py",
           "test_optimization.py", "test_stats.py")]


def main(argv):
    import dask
    root = os.path.dirname(dask.__file__)
    modules = ALL if "--all" in argv else SAMPLE
    argv = [a for a in argv if a != "--all"]
    paths = [os.path.join(root, m) for m in modules if os.path.exists(os.path.join(root, m))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [HERE, env.get("PYTHONPATH")] if p)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "squall_dask_plugin", "-W", "ignore::pytest.PytestUnknownMarkWarning",
           "-rfEX"] + paths + argv
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
