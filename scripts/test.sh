#!/usr/bin/env bash
#   test.sh: builds squall from scratch twice and runs every test in both:
#     build/       RelWithDebInfo
#     build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer
#   Exits non-zero on any build or test failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=${JOBS:-2}
#   The Python tests run in the virtual environment scripts/setup.sh made;
#   CMake's FindPython3 picks it up through VIRTUAL_ENV.
if [ -x .venv/bin/python3 ]; then
    export VIRTUAL_ENV="$PWD/.venv"
    export PATH="$VIRTUAL_ENV/bin:$PATH"
fi
results=()
status=0

run_suite () {
    local dir=$1; shift
    echo "=== $dir: configure ($*)"
    rm -rf "$dir"
    if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"; then
        results+=("$dir: configure FAILED"); status=1; return
    fi
    echo "=== $dir: build"
    if ! cmake --build "$dir" -j "$JOBS"; then
        results+=("$dir: build FAILED"); status=1; return
    fi
    echo "=== $dir: test"
    if (cd "$dir" && ctest --output-on-failure --no-tests=error -j2); then
        results+=("$dir: tests passed")
    else
        results+=("$dir: tests FAILED"); status=1
    fi
}

run_suite build
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite build-asan -DSQUALL_SANITIZE=ON

#   The libFuzzer target over every decoder in common/, for a bounded time
#   (FUZZ_SECONDS, default 60), from the corpus in tests/fuzz/corpus.
run_fuzz () {
    local dir=build-fuzz
    echo "=== $dir: fuzzing for ${FUZZ_SECONDS:-60} s"
    rm -rf "$dir"
    if CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQUALL_FUZZ=ON \
         -DSQUALL_FUZZ_SECONDS="${FUZZ_SECONDS:-60}" \
       && cmake --build "$dir" -j "$JOBS" --target fuzz_proto fuzz_replay make_corpus \
       && (cd "$dir" && ctest --output-on-failure -L fuzz); then
        results+=("$dir: fuzzing passed")
    else
        results+=("$dir: fuzzing FAILED"); status=1
    fi
}
run_fuzz

echo
for line in "${results[@]}"; do
    echo "  $line"
done
if [ "$status" -eq 0 ]; then
    echo "test.sh: SUCCESS (RelWithDebInfo and ASan+UBSan builds, all tests passed)"
else
    echo "test.sh: FAILURE"
fi
exit "$status"
