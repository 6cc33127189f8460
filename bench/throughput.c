/*  throughput: squall's task-rate benchmark over built-in noop tasks.

    usage: squall-bench-throughput ENDPOINT independent|chain|tree|memtree N

    independent: N noop tasks with no inputs; chain: N noops each taking the
    previous one's output; tree: a binary reduction (concat) over N leaves;
    memtree: a reduction over N leaves of 8 MiB each (memory ordering).
    Prints one line: shape, tasks, seconds, tasks per second. Keys come
    from $SQUALL_SECRET_KEY / $SQUALL_BROKER_KEY (libsquall); with
    $SQUALL_BENCH_HOLD set it keeps its session open until stdin closes. */
#include "squall.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
s_fail (sq_client_t *client, const char *what)
{
    fprintf (stderr, "bench: %s: %s\n", what, sq_client_errmsg (client));
    return 1;
}

//  A pairwise reduction of `level` (n object ids) by tasks of `kind` with
//  two inputs; returns the number of tasks added.
static long
s_reduce (sq_session_t *session, const char *kind, uint32_t *level, long n)
{
    long tasks = 0, width = n;
    while (width > 1) {
        long next = 0;
        for (long i = 0; i + 1 < width; i += 2, tasks++) {
            uint32_t pair [2] = { level [i], level [i + 1] };
            level [next++] = sq_output (sq_task (session, kind, pair, 2, 1, NULL, 0), 0);
        }
        if (width % 2)
            level [next++] = level [width - 1];
        width = next;
    }
    return tasks;
}

int
main (int argc, char *argv [])
{
    if (argc != 4) {
        fprintf (stderr, "usage: %s ENDPOINT independent|chain|tree|memtree N\n", argv [0]);
        return 2;
    }
    const char *shape = argv [2];
    long n = atol (argv [3]);
    sq_client_t *client = sq_client_new ();
    if (sq_client_connect (client, argv [1], 10000))
        return s_fail (client, "connect");
    sq_session_t *session = sq_session_new (client);
    if (!session)
        return s_fail (client, "session");
    double start = s_now ();
    long tasks = 0;
    if (strcmp (shape, "independent") == 0) {
        //  Large graphs go in submits of 100 000 tasks, as a client
        //  streaming work would send them: the broker then never holds a
        //  whole million-task message besides the graph.
        for (long i = 0; i < n; i++, tasks++) {
            sq_task (session, "noop", NULL, 0, 1, NULL, 0);
            if ((i + 1) % 100000 == 0 && i + 1 < n && sq_submit (session))
                return s_fail (client, "submit");
        }
    }
    else
    if (strcmp (shape, "chain") == 0) {
        uint32_t prev = sq_blob (session, "x", 1, NULL);
        for (long i = 0; i < n; i++, tasks++) {
            prev = sq_output (sq_task (session, "noop", &prev, 1, 1, NULL, 0), 0);
        }
    }
    else
    if (strcmp (shape, "tree") == 0) {
        uint32_t *level = (uint32_t *) malloc (n * sizeof (uint32_t));
        for (long i = 0; i < n; i++, tasks++)
            level [i] = sq_output (sq_task (session, "noop", NULL, 0, 1, NULL, 0), 0);
        tasks += s_reduce (session, "concat", level, n);
        free (level);
    }
    else
    if (strcmp (shape, "memtree") == 0) {
        //  The memory-ordering case: N leaves each producing an 8 MiB
        //  object, reduced pairwise by tasks that keep their first input
        //  (noop passes it through without a copy). A good order keeps
        //  about log2(N) leaves alive; a breadth-first one keeps N.
        const char *args [] = { "sh", "-c", "head -c 8388608 /dev/zero" };
        const char *out_paths [] = { "" };
        size_t size;
        void *config = sq_config_execute (args, 3, NULL, 0, -1, out_paths, 1, 0, NULL, &size);
        uint32_t *level = (uint32_t *) malloc (n * sizeof (uint32_t));
        for (long i = 0; i < n; i++, tasks++)
            level [i] = sq_output (sq_task (session, "execute", NULL, 0, 1, config, size), 0);
        sq_free (config);
        tasks += s_reduce (session, "noop", level, n);
        free (level);
    }
    else {
        fprintf (stderr, "bench: unknown shape %s\n", shape);
        return 2;
    }
    if (sq_submit (session))
        return s_fail (client, "submit");
    double submitted = s_now ();
    if (sq_wait_all (session, -1))
        return s_fail (client, "wait");
    double elapsed = s_now () - start;
    printf ("%s tasks=%ld seconds=%.3f submit_seconds=%.3f tasks_per_second=%.0f\n",
            shape, tasks, elapsed, submitted - start, tasks / elapsed);
    fflush (stdout);
    //  SQUALL_BENCH_HOLD: the session stays open (in the broker, and in its
    //  journal) until stdin closes, for bench/keys_journal.py's restart.
    if (getenv ("SQUALL_BENCH_HOLD"))
        while (getchar () != EOF)
            ;
    sq_session_destroy (&session);
    sq_client_destroy (&client);
    return 0;
}
