"""Dask tests that fail with squall as the scheduler and pass with Dask's
own, each with why it cannot or should not be fixed. Keys are node ids
from the dask package directory. All come from one fact: squall runs tasks
in other processes (executors), so graph values and results cross a
process boundary by pickling, and side effects happen there."""

_COPY = ("results are copies made by pickling, not the client's own objects: "
         "the test checks identity (`is`)")
_EQ = ("results are copies: the test compares with == values whose equality is "
       "identity (%s), which copies cannot satisfy")

XFAIL = {
    "dask/tests/test_distributed.py::test_futures_in_graph":
        "computes with scheduler=\"dask.distributed\", which names Dask distributed's "
        "default client (squall's client is a scheduler given as scheduler=client or "
        "client.get); the persisted futures in a later graph are tested by "
        "tests/python/test_dask_client.py",
    "dask/tests/test_distributed.py::test_scheduler_equals_client":
        "x.compute(scheduler=client) works; then calls client.run_on_scheduler with "
        "a Dask scheduler's task story, which squall's broker does not have",
    "dask/tests/test_delayed.py::test_traverse_false": _COPY,
    "dask/tests/test_delayed.py::test_callable_obj": _COPY,
    "dask/bag/tests/test_bag.py::test_bag_with_single_callable": _EQ % "a lambda",
    "dask/bag/tests/test_bag.py::test_repartition_partition_size_complex_dtypes":
        _EQ % "list == list of numpy arrays: equal only through the identity "
        "shortcut, element-wise == of arrays has no truth value",
    "dask/bag/tests/test_bag.py::test_to_delayed_optimize_graph":
        "counts calls of a function monkeypatched in the client process; the tasks "
        "run in executors, which have the original (side effects happen there)",
    "dask/bag/tests/test_bag.py::test_reductions_are_lazy":
        "the graph holds a live generator (and checks laziness through client-side "
        "state): a generator cannot be pickled to reach an executor",
    "dask/array/tests/test_ufunc.py::test_frompyfunc":
        "np.frompyfunc makes a ufunc that cannot be pickled (by reference or value), "
        "so the graph cannot leave the client process",
}

#   Outside the sample (run_sample.py --all), the same causes:
_STORE = ("da.store into arrays of the client's memory: the tasks write into the "
          "executors' copies of the target, the client's array stays empty")
_COUNT = ("observes objects of the client process from the tasks (a store target's "
          "concurrent uses, a lock held by the test, a call counter): the tasks run on "
          "copies in executors")
for _name in ("test_store_delayed_target", "test_store", "test_store_regions",
              "test_store_compute_false"):
    XFAIL["dask/array/tests/test_array_core.py::" + _name] = _STORE
for _name in ("test_store_locks_failure_lock_released", "test_store_locks_one_lock_two_stores",
              "test_store_locks_dont_assume_threadsafe", "test_store_locks_no_lock",
              "test_store_locks_count_calls[False]", "test_store_locks_count_calls[True]",
              "test_from_array_with_lock[True]", "test_from_array_with_lock[False]",
              "test_from_array_getitem[True-True]", "test_from_array_getitem[False-True]",
              "test_store_sources_unoptimized_nocompute"):
    XFAIL["dask/array/tests/test_array_core.py::" + _name] = _COUNT
XFAIL["dask/array/tests/test_array_core.py::test_memmap"] = (
    "stores into an np.memmap: a memmap pickles as a plain in-memory array, so the "
    "executors' writes never reach the file")
