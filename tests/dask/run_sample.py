"""Runs a bounded sample of Dask's own test modules with squall as the
scheduler (tests/dask/squall_dask_plugin.py: one LocalCluster, every local
compute through its client.get). Known failures are strict xfails with
their reasons (tests/dask/xfail.py). Registered in ctest as
python_dask_sample.

    PYTHONPATH=bindings/python SQUALL_BUILD_DIR=build python3 tests/dask/run_sample.py [--all] [pytest args]

--all runs every collection test module of dask.array, dask.bag and
dask.delayed instead of the sample (a one-off: tens of minutes);
--distributed the client-independent tests of dask/tests/test_distributed.py
(see DISTRIBUTED; needs distributed installed).
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


#   --distributed: the tests of dask/tests/test_distributed.py that do not
#   depend on Dask distributed's own client, scheduler or workers (those
#   given its `c` fixture, which the plugin makes the squall client, or no
#   fixture; not gen_cluster's, which start a distributed cluster). Run in
#   an environment with distributed installed (ctest's
#   python_dask_distributed_sample); the dataframe ones skip without pyarrow.
DISTRIBUTED = ["tests/test_distributed.py::" + t for t in (
    "test_can_import_client", "test_can_import_nested_things", "test_persist_nested",
    "test_futures_to_delayed_dataframe", "test_from_delayed_dataframe",
    "test_fused_blockwise_dataframe_merge", "test_dataframe_broadcast_merge",
    "test_futures_to_delayed_bag", "test_futures_to_delayed_array", "test_futures_in_graph",
    "test_scheduler_equals_client", "test_local_scheduler", "test_blockwise_array_creation",
    "test_blockwise_dataframe_io", "test_blockwise_fusion_after_compute",
    "test_blockwise_different_optimization", "test_blockwise_concatenate",
    "test_map_partitions_df_input", "test_set_index_no_recursion_error",
    "test_get_scheduler_without_distributed_raises", "test_get_scheduler_lock")]


def main(argv):
    import dask
    root = os.path.dirname(dask.__file__)
    if "--distributed" in argv:
        modules = DISTRIBUTED
    else:
        modules = ALL if "--all" in argv else SAMPLE
    argv = [a for a in argv if a not in ("--all", "--distributed")]
    paths = [os.path.join(root, m) for m in modules
             if os.path.exists(os.path.join(root, m.split("::")[0]))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [HERE, env.get("PYTHONPATH")] if p)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "squall_dask_plugin", "-W", "ignore::pytest.PytestUnknownMarkWarning",
           "-rfEX"] + paths + argv
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
