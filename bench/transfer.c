/*  transfer: squall's object-copy benchmark.

    usage: squall-bench-transfer ENDPOINT [objects [MiB [rounds]]]

    Needs a cluster whose governor A offers the resource "src" and governor
    B the resource "dst" (bench/transfer.sh starts one). Each round makes
    `objects` (16) objects of `MiB` (64) MiB on A, has B consume them (a
    concat of one input, which shares the bytes, so the work is the copy),
    fetches them all from B into the client, closes its session and waits
    until both governors hold nothing. Between making and copying it
    measures raw ZeroMQ PUSH/PULL bandwidth (a forked receiver process, TCP
    loopback): with 8 MiB frames,
    the figure of REFERENCE.md, and the best of 1, 4 and 8 MiB frames (small
    frames stay in the caches at both ends, which no 1 GiB of real objects
    can), a stricter bar.

    Round 1 finds governor B cold: every byte lands in pages the kernel has
    to fault in and zero. Later rounds find B warm, reusing the memory the
    previous round freed, as a governor that has been moving data does.
    Both are reported, each against raw figures of its own round (the
    machine is shared, so only figures taken seconds apart compare), warm
    as the median of rounds 2 and later. The raw receiver above drops what
    it receives, so its pages are always reused: it is warm by
    construction. Round 1 therefore also measures the raw copy a cold
    governor is doing: the same bytes from distinct memory, in 4 MiB
    frames, into a fresh receiver process that keeps them all.

    The last line is machine-readable (RESULT key=value ...), for
    bench/transfer.sh. With SQUALL_BENCH_MARKS set, phase boundaries go to
    stderr in CLOCK_MONOTONIC seconds, to slice a `perf record -k
    CLOCK_MONOTONIC -a` of the run. */
#include "squall.h"
#include <zmq.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_ROUNDS 20

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
s_mark (const char *what, int round)
{
    if (getenv ("SQUALL_BENCH_MARKS"))
        fprintf (stderr, "mark %s %d %.6f\n", what, round, s_now ());
}

static int
s_fail (sq_client_t *client, const char *what)
{
    fprintf (stderr, "bench: %s: %s\n", what, sq_client_errmsg (client));
    return -1;
}

//  Raw ZeroMQ: `total` bytes in frames of `frame` bytes from a PUSH here to
//  a PULL in a child process. From `src` (`total` distinct bytes, as
//  objects are) or, if NULL, one buffer of `frame` bytes sent again and
//  again. The receiver drops each frame (its memory is reused: warm) or,
//  with `keep`, keeps them all in fresh memory as a governor keeps a copy
//  (cold: the kernel faults in every page). GiB/s, or 0 on failure.
static double
s_raw_zmq (size_t total, size_t frame, const char *src, bool keep)
{
    void *ctx = zmq_ctx_new ();
    void *push = zmq_socket (ctx, ZMQ_PUSH);
    if (zmq_bind (push, "tcp://127.0.0.1:*"))
        return 0;
    char endpoint [256];
    size_t size = sizeof endpoint;
    zmq_getsockopt (push, ZMQ_LAST_ENDPOINT, endpoint, &size);
    size_t n = total / frame;
    pid_t pid = fork ();
    if (pid == 0) {
        void *cctx = zmq_ctx_new ();
        void *pull = zmq_socket (cctx, ZMQ_PULL);
        zmq_connect (pull, endpoint);
        zmq_msg_t *kept = keep? (zmq_msg_t *) calloc (n + 1, sizeof *kept): NULL;
        zmq_msg_t msg;
        for (size_t i = 0; i < n + 1; i++) {
            zmq_msg_t *into = kept? &kept [i]: &msg;
            zmq_msg_init (into);
            zmq_msg_recv (into, pull, 0);
            if (!kept)
                zmq_msg_close (into);
        }
        zmq_close (pull);
        _exit (0);                      //  the kept frames go with the process
    }
    char *buffer = NULL;
    if (!src) {
        buffer = (char *) malloc (frame);
        memset (buffer, 7, frame);
    }
    //  One small message first so that the connection is up before timing.
    zmq_send (push, "", 0, 0);
    usleep (100000);
    double start = s_now ();
    for (size_t i = 0; i < n; i++) {
        zmq_msg_t msg;
        //  Zero-copy from the buffer, as squall sends from its store.
        zmq_msg_init_data (&msg, src? (char *) src + i * frame: buffer, frame, NULL, NULL);
        zmq_msg_send (&msg, push, 0);
    }
    int status;
    waitpid (pid, &status, 0);
    double took = s_now () - start;
    zmq_close (push);
    zmq_ctx_term (ctx);
    free (buffer);
    return (double) (n * frame) / took / (1u << 30);
}

//  Objects governor `name` holds, from INFO (-1 if it cannot be read). A
//  crude scan: the JSON is squall's own.
static long long
s_objects_on (sq_client_t *client, const char *name)
{
    char *json = NULL;
    if (sq_client_info (client, &json))
        return -1;
    char pattern [64];
    snprintf (pattern, sizeof pattern, "\"name\":\"%s\"", name);
    const char *p = strstr (json, pattern);
    const char *m = p? strstr (p, "\"objects\":"): NULL;
    long long objects = m? strtoll (m + 10, NULL, 10): -1;
    sq_free (json);
    return objects;
}

//  Waits until A and B hold no object bytes (the round's session closed),
//  at most 60 s. 0 or -1.
static int
s_wait_empty (sq_client_t *client)
{
    double deadline = s_now () + 60;
    while (s_now () < deadline) {
        if (s_objects_on (client, "A") == 0 && s_objects_on (client, "B") == 0)
            return 0;
        usleep (20000);
    }
    fprintf (stderr, "bench: the governors still hold objects 60 s after their session closed\n");
    return -1;
}

typedef struct {
    double copy, fetch;                 //  GiB/s
    double raw, best;                   //  raw ZeroMQ, 8 MiB frames; the best of 1, 4, 8
    double keep;                        //  raw ZeroMQ into a fresh receiver that keeps it all
} s_round_t;

static int
s_round (sq_client_t *client, int round, int objects, int mib, const char *unit,
         size_t unit_size, const char *distinct, s_round_t *result)
{
    double total_gib = (double) objects * mib / 1024;
    sq_session_t *session = sq_session_new (client);
    if (!session)
        return s_fail (client, "session");
    //  Objects made on A: a concat of `mib` times a 1 MiB constant.
    uint32_t c = sq_blob (session, unit, unit_size, NULL);
    uint32_t *inputs = (uint32_t *) malloc ((size_t) mib * sizeof *inputs);
    uint32_t *made = (uint32_t *) malloc ((size_t) objects * sizeof *made);
    uint32_t *copied = (uint32_t *) malloc ((size_t) objects * sizeof *copied);
    int rc = -1;
    for (int i = 0; i < mib; i++)
        inputs [i] = c;
    for (int i = 0; i < objects; i++) {
        uint32_t task = sq_task (session, "concat", inputs, (size_t) mib, 1, NULL, 0);
        sq_task_set_resource (session, task, "src", 1);
        made [i] = sq_output (task, 0);
        sq_keep (session, made [i]);
    }
    if (sq_submit (session) || sq_wait (session, made, (size_t) objects, 600000)) {
        s_fail (client, "making the objects on A");
        goto done;
    }
    //  Raw ZeroMQ now, while B is idle: after the copy and the drop it would
    //  leave B idle long enough to give its freed memory back (heap.h).
    result->raw = s_raw_zmq ((size_t) 2 << 30, 8u << 20, NULL, false);
    result->best = result->raw;
    for (size_t frame = 1u << 20; frame < (8u << 20); frame *= 4) {
        double raw = s_raw_zmq ((size_t) 2 << 30, frame, NULL, false);
        if (raw > result->best)
            result->best = raw;
    }
    //  The same bytes as the copy, from distinct memory into a receiver
    //  that keeps them, in 4 MiB frames (squall's chunks); the better of
    //  two, as the first may also pay for memory the hypervisor has not
    //  backed yet (see bench/RESULTS.md).
    //  Round 1 only: later rounds compare with a warm governor.
    size_t bytes = (size_t) objects * mib << 20;
    result->keep = 0;
    for (int i = 0; i < 2 && round == 1 && distinct; i++) {
        double keep = s_raw_zmq (bytes, bytes < (4u << 20)? bytes: 4u << 20, distinct, true);
        if (keep > result->keep)
            result->keep = keep;
    }
    //  The copies A -> B.
    for (int i = 0; i < objects; i++) {
        uint32_t task = sq_task (session, "concat", &made [i], 1, 1, NULL, 0);
        sq_task_set_resource (session, task, "dst", 1);
        copied [i] = sq_output (task, 0);
        sq_keep (session, copied [i]);
    }
    s_mark ("copy", round);
    double start = s_now ();
    if (sq_submit (session) || sq_wait (session, copied, (size_t) objects, 600000)) {
        s_fail (client, "copying to B");
        goto done;
    }
    result->copy = total_gib / (s_now () - start);
    //  The client fetches them from B.
    s_mark ("fetch", round);
    start = s_now ();
    for (int i = 0; i < objects; i++) {
        void *data;
        size_t size;
        if (sq_fetch (session, copied [i], 600000, &data, &size, NULL)) {
            s_fail (client, "fetch");
            goto done;
        }
        bool same = size == (size_t) mib << 20 && memcmp (data, unit, unit_size) == 0;
        sq_free (data);
        if (!same) {
            fprintf (stderr, "bench: fetched bytes differ\n");
            goto done;
        }
    }
    result->fetch = total_gib / (s_now () - start);
    s_mark ("end", round);
    rc = 0;
done:
    free (inputs);
    free (made);
    free (copied);
    sq_session_destroy (&session);
    if (rc == 0)
        rc = s_wait_empty (client);
    return rc;
}

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y? -1: x > y;
}

//  Median of field `offset` of rounds [from, to).
static double
s_median (const s_round_t *rounds, int from, int to, size_t offset)
{
    double values [S_MAX_ROUNDS];
    int n = 0;
    for (int i = from; i < to; i++)
        values [n++] = *(const double *) ((const char *) &rounds [i] + offset);
    if (n == 0)
        return 0;
    qsort (values, (size_t) n, sizeof (double), s_cmp);
    return n % 2? values [n / 2]: (values [n / 2 - 1] + values [n / 2]) / 2;
}

int
main (int argc, char *argv [])
{
    if (argc < 2) {
        fprintf (stderr, "usage: %s ENDPOINT [objects [MiB [rounds]]]\n", argv [0]);
        return 2;
    }
    int objects = argc > 2? atoi (argv [2]): 16;
    int mib = argc > 3? atoi (argv [3]): 64;
    int n_rounds = argc > 4? atoi (argv [4]): 6;
    if (objects < 1 || objects > 1024 || mib < 1 || mib > 4096
    ||  n_rounds < 1 || n_rounds > S_MAX_ROUNDS) {
        fprintf (stderr, "bench: 1..1024 objects of 1..4096 MiB, 1..%d rounds\n", S_MAX_ROUNDS);
        return 2;
    }
    sq_client_t *client = sq_client_new ();
    if (sq_client_connect (client, argv [1], 10000)) {
        s_fail (client, "connect");
        return 1;
    }
    size_t unit_size = 1u << 20;
    char *unit = (char *) malloc (unit_size);
    for (size_t i = 0; i < unit_size; i++)
        unit [i] = (char) (i * 131 + 7 + i / 4093);
    //  The raw copy's source: as many distinct bytes as the objects hold
    //  (none past 8 GiB: that raw figure is then left out).
    size_t bytes = (size_t) objects * mib << 20;
    char *distinct = bytes <= ((size_t) 8 << 30)? (char *) malloc (bytes): NULL;
    for (size_t at = 0; distinct && at < bytes; at += unit_size)
        memcpy (distinct + at, unit, unit_size);
    printf ("objects: %d x %d MiB, %d rounds (round 1: governor B cold; later: B warm)\n",
            objects, mib, n_rounds);
    s_round_t rounds [S_MAX_ROUNDS];
    for (int r = 0; r < n_rounds; r++) {
        if (s_round (client, r + 1, objects, mib, unit, unit_size, distinct, &rounds [r])) {
            sq_client_destroy (&client);
            free (unit);
            free (distinct);
            return 1;
        }
        s_round_t *x = &rounds [r];
        printf ("round %d: copy %.2f GiB/s, fetch %.2f GiB/s, raw ZeroMQ %.2f GiB/s (best "
                "%.2f): copy/raw %.0f %% (of best %.0f %%), fetch/raw %.0f %%\n", r + 1, x->copy,
                x->fetch, x->raw, x->best, 100 * x->copy / x->raw, 100 * x->copy / x->best,
                100 * x->fetch / x->raw);
        if (x->keep > 0)
            printf ("round %d: raw ZeroMQ into a fresh receiver that keeps the bytes %.2f "
                    "GiB/s: copy/that %.0f %%\n", r + 1, x->keep, 100 * x->copy / x->keep);
        fflush (stdout);
    }
    sq_client_destroy (&client);
    free (unit);
    free (distinct);

    //  Ratios per round first, then their medians: raw moves with the
    //  machine's load, and a round's figures were taken together.
    s_round_t ratio [S_MAX_ROUNDS];
    for (int r = 0; r < n_rounds; r++)
        ratio [r] = (s_round_t) { rounds [r].copy / rounds [r].raw,
                                  rounds [r].fetch / rounds [r].raw, 1,
                                  rounds [r].copy / rounds [r].best,
                                  rounds [r].keep > 0? rounds [r].copy / rounds [r].keep: 0 };
    int w = n_rounds > 1? 1: 0;         //  first warm round
    double copy_warm = s_median (rounds, w, n_rounds, offsetof (s_round_t, copy));
    double fetch_warm = s_median (rounds, w, n_rounds, offsetof (s_round_t, fetch));
    double raw_warm = s_median (rounds, w, n_rounds, offsetof (s_round_t, raw));
    double copy_ratio = s_median (ratio, w, n_rounds, offsetof (s_round_t, copy));
    double best_ratio = s_median (ratio, w, n_rounds, offsetof (s_round_t, best));
    double fetch_ratio = s_median (ratio, w, n_rounds, offsetof (s_round_t, fetch));
    printf ("cold (round 1): copy %.2f GiB/s (%.0f %% of raw, %.0f %% of raw into a fresh "
            "receiver), fetch %.2f GiB/s (%.0f %%), raw %.2f GiB/s, into a fresh receiver "
            "%.2f GiB/s\n", rounds [0].copy, 100 * ratio [0].copy, 100 * ratio [0].keep,
            rounds [0].fetch, 100 * ratio [0].fetch, rounds [0].raw, rounds [0].keep);
    if (n_rounds > 1)
        printf ("warm (median of rounds 2-%d): copy %.2f GiB/s (%.0f %% of raw, %.0f %% of "
                "the best raw), fetch %.2f GiB/s (%.0f %%), raw %.2f GiB/s\n", n_rounds,
                copy_warm, 100 * copy_ratio, 100 * best_ratio, fetch_warm, 100 * fetch_ratio,
                raw_warm);
    printf ("RESULT copy_cold=%.3f fetch_cold=%.3f raw_cold=%.3f keep_cold=%.3f copy_warm=%.3f "
            "fetch_warm=%.3f raw_warm=%.3f copy_ratio_cold=%.3f copy_keep_ratio_cold=%.3f "
            "copy_ratio_warm=%.3f copy_best_ratio_warm=%.3f fetch_ratio_warm=%.3f\n",
            rounds [0].copy, rounds [0].fetch, rounds [0].raw, rounds [0].keep, copy_warm,
            fetch_warm, raw_warm, ratio [0].copy, ratio [0].keep, copy_ratio, best_ratio,
            fetch_ratio);
    return 0;
}
