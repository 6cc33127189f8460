"""Every program in examples/ runs as its docstring says (the Python ones
with run_example, wherever their feature is tested; the rest here)."""
import glob
import os
import subprocess

import pytest

from conftest import TIMEOUT, run_example

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.normpath(os.path.join(HERE, "..", "..", "examples"))


def test_futures_example():
    out = run_example("futures.py")
    assert "primes below 10000: 1229" in out
    assert "failed as expected: division by zero" in out


def test_graph_example():
    out = run_example("graph.py")
    assert out.startswith("THE QUICK BROWN FOX")
    assert "('fox', 1000)" in out


def test_dask_array_example():
    pytest.importorskip("dask.array")
    out = run_example("dask_array.py")
    assert "std:" in out and "('b', 3)" in out


def test_pipeline_example(cluster):
    """The C example, against the test cluster (keys from the environment,
    as client/client.c reads them)."""
    program = os.path.join(os.environ.get("SQUALL_BUILD_DIR", ""), "examples",
                           "squall-example-pipeline")
    if not os.access(program, os.X_OK):
        pytest.skip("squall-example-pipeline is not built (SQUALL_BUILD_DIR)")
    env = dict(os.environ, SQUALL_SECRET_KEY=cluster.secret_key,
               SQUALL_BROKER_KEY=cluster.broker_key)
    out = subprocess.run([program, cluster.address], env=env, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr


def test_every_example_is_run():
    tests = ""
    for path in glob.glob(os.path.join(HERE, "test_*.py")):
        with open(path) as f:
            tests += f.read()
    missing = [name for name in sorted(os.listdir(EXAMPLES)) if name.endswith(".py")
               and 'run_example("%s")' % name not in tests]
    assert not missing, "examples no test runs: %s" % missing
    assert os.listdir(EXAMPLES) and all(
        name.endswith(".py") or name in ("pipeline.c", "CMakeLists.txt", "jobs")
        for name in os.listdir(EXAMPLES)), "an example of a new kind: run it in a test"
    #   Job files (squall submit --file): each one submitted by a test.
    jobs = os.path.join(EXAMPLES, "jobs")
    unrun = [name for name in sorted(os.listdir(jobs))
             if not name.endswith(".toml") or '"jobs", "%s"' % name not in tests]
    assert not unrun, "job files no test submits (or not .toml): %s" % unrun
