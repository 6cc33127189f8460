/*  transfer: squall's object-copy benchmark.

    usage: squall-bench-transfer ENDPOINT [objects [MiB]]

    Needs a cluster whose governor A offers the resource "src" and governor
    B the resource "dst" (bench/transfer.sh starts one). Makes `objects`
    (16) objects of `MiB` (64) MiB on A, then has B consume them (a concat
    of one input, which shares the bytes, so the work is the copy), then
    fetches them all from B into the client. Also measures raw ZeroMQ
    PUSH/PULL bandwidth (8 MiB frames, a forked receiver process, TCP
    loopback) in the same run, and prints both and their ratio. */
#include "squall.h"
#include <zmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

//  Raw ZeroMQ: `total` bytes in 8 MiB frames from a PUSH here to a PULL in
//  a child process. GiB/s, or 0 on failure.
static double
s_raw_zmq (size_t total)
{
    const size_t frame = 8u << 20;
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
        zmq_msg_t msg;
        zmq_msg_init (&msg);
        for (size_t i = 0; i < n + 1; i++)
            zmq_msg_recv (&msg, pull, 0);
        zmq_msg_close (&msg);
        zmq_close (pull);
        zmq_ctx_term (cctx);
        _exit (0);
    }
    char *buffer = (char *) malloc (frame);
    memset (buffer, 7, frame);
    //  One small message first so that the connection is up before timing.
    zmq_send (push, "", 0, 0);
    usleep (100000);
    double start = s_now ();
    for (size_t i = 0; i < n; i++) {
        zmq_msg_t msg;
        //  Zero-copy from the buffer, as squall sends from its store.
        zmq_msg_init_data (&msg, buffer, frame, NULL, NULL);
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

int
main (int argc, char *argv [])
{
    if (argc < 2) {
        fprintf (stderr, "usage: %s ENDPOINT [objects [MiB]]\n", argv [0]);
        return 2;
    }
    int objects = argc > 2? atoi (argv [2]): 16;
    int mib = argc > 3? atoi (argv [3]): 64;
    if (objects < 1 || objects > 1024 || mib < 1 || mib > 4096) {
        fprintf (stderr, "bench: 1..1024 objects of 1..4096 MiB\n");
        return 2;
    }
    double total_gib = (double) objects * mib / 1024;
    sq_client_t *client = sq_client_new ();
    if (sq_client_connect (client, argv [1], 10000))
        return s_fail (client, "connect");
    sq_session_t *session = sq_session_new (client);
    if (!session)
        return s_fail (client, "session");

    //  Objects made on A: a concat of `mib` times a 1 MiB constant.
    size_t unit_size = 1u << 20;
    char *unit = (char *) malloc (unit_size);
    for (size_t i = 0; i < unit_size; i++)
        unit [i] = (char) (i * 131 + 7);
    uint32_t c = sq_blob (session, unit, unit_size, NULL);
    uint32_t *inputs = (uint32_t *) malloc ((size_t) mib * sizeof *inputs);
    for (int i = 0; i < mib; i++)
        inputs [i] = c;
    uint32_t *made = (uint32_t *) malloc ((size_t) objects * sizeof *made);
    uint32_t *copied = (uint32_t *) malloc ((size_t) objects * sizeof *copied);
    for (int i = 0; i < objects; i++) {
        uint32_t task = sq_task (session, "concat", inputs, (size_t) mib, 1, NULL, 0);
        sq_task_set_resource (session, task, "src", 1);
        made [i] = sq_output (task, 0);
        sq_keep (session, made [i]);
    }
    if (sq_submit (session) || sq_wait (session, made, (size_t) objects, 600000))
        return s_fail (client, "making the objects on A");

    //  The copies A -> B.
    for (int i = 0; i < objects; i++) {
        uint32_t task = sq_task (session, "concat", &made [i], 1, 1, NULL, 0);
        sq_task_set_resource (session, task, "dst", 1);
        copied [i] = sq_output (task, 0);
        sq_keep (session, copied [i]);
    }
    double start = s_now ();
    if (sq_submit (session) || sq_wait (session, copied, (size_t) objects, 600000))
        return s_fail (client, "copying to B");
    double copy_s = s_now () - start;

    //  The client fetches them from B.
    start = s_now ();
    for (int i = 0; i < objects; i++) {
        void *data;
        size_t size;
        if (sq_fetch (session, copied [i], 600000, &data, &size, NULL))
            return s_fail (client, "fetch");
        if (size != (size_t) mib << 20 || memcmp (data, unit, unit_size))
            return s_fail (client, "fetched bytes differ");
        sq_free (data);
    }
    double fetch_s = s_now () - start;
    sq_session_destroy (&session);
    sq_client_destroy (&client);

    double raw = s_raw_zmq ((size_t) 2 << 30);
    double copy = total_gib / copy_s, fetch = total_gib / fetch_s;
    printf ("objects: %d x %d MiB\n", objects, mib);
    printf ("squall governor->governor copy: %.2f GiB/s (%.2f s)\n", copy, copy_s);
    printf ("squall client fetch from governor: %.2f GiB/s (%.2f s)\n", fetch, fetch_s);
    printf ("raw ZeroMQ PUSH/PULL 8 MiB frames: %.2f GiB/s\n", raw);
    printf ("ratio copy/raw: %.0f %%, fetch/raw: %.0f %%\n", 100 * copy / raw, 100 * fetch / raw);
    printf ("vs Dask's 0.35 GiB/s (REFERENCE.md): copy %.1fx\n", copy / 0.35);
    free (unit);
    free (inputs);
    free (made);
    free (copied);
    return 0;
}
