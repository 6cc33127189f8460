/*  governor/balancer.c alone: the balance thread, with the receive thread
    replaced by an inproc pair read here and the compute thread by this
    test setting the load cell.

    LOAD is made in this one place: what the cell holds reaches the pipe as
    LOAD (route GOV_ROUTE_BROKER); of values set in a burst the last one
    always comes (a cell keeps the latest: none is dropped, as notes on a
    full queue were); an unchanged load is said again (the broker's
    keepalive); GOV_TERM ends the thread with GOV_DONE. Waits are for a
    message with a generous deadline, never a timing to meet. */
#include "balancer.h"
#include "route.h"
#include "wire.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    exit (1); } } while (0)

#define S_DEADLINE_MS 30000

static void *
s_run (void *arg)
{
    balancer_run ((balancer_t *) arg);
    return NULL;
}

//  The next LOAD on the pipe (0), or -1 if none comes in time.
static int
s_next_load (void *in, sq_load_t *load)
{
    zmq_pollitem_t item = { in, 0, ZMQ_POLLIN, 0 };
    if (zmq_poll (&item, 1, S_DEADLINE_MS) != 1)
        return -1;
    sq_msg_t msg;
    sq_msg_init (&msg);
    CHECK (sq_msg_recv (&msg, in, 0, 8) == 0);
    CHECK (msg.n == 2 && sq_msg_size (&msg, 0) == 1
           && *(char *) sq_msg_data (&msg, 0) == GOV_ROUTE_BROKER);
    sq_errbuf_t err;
    CHECK (sq_load_decode (load, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
    sq_msg_release (&msg);
    return 0;
}

static sq_load_t
s_load (uint64_t n)
{
    return (sq_load_t) { .running = n, .queued = n + 1, .piped = n / 2, .memory = n << 20,
                         .spilled = n, .objects = n * 3, .tasks = n * 7, .shared = n * 5 };
}

//  Equality is by field: the same fields over different bytes between
//  them are equal; any one field changed alone is not.
static void
s_check_equal (void)
{
    sq_load_t a, b;
    memset (&a, 0x55, sizeof a);
    memset (&b, 0xAA, sizeof b);
    a = s_load (9);
    b = s_load (9);
    CHECK (balancer_load_equal (&a, &b));
    for (int field = 0; field < 8; field++) {
        b = s_load (9);
        uint64_t *f [] = { &b.running, &b.queued, &b.memory, &b.spilled, &b.objects,
                           &b.tasks, &b.piped, &b.shared };
        *f [field] += 1;
        CHECK (!balancer_load_equal (&a, &b));
        CHECK (!balancer_load_equal (&b, &a));
    }
}

int
main (void)
{
    s_check_equal ();
    void *ctx = zmq_ctx_new ();
    void *in = zmq_socket (ctx, ZMQ_PAIR);
    void *out = zmq_socket (ctx, ZMQ_PAIR);
    CHECK (zmq_bind (in, "inproc://balancer-test") == 0);
    CHECK (zmq_connect (out, "inproc://balancer-test") == 0);
    balancer_load_t *cell = balancer_load_new ();
    CHECK (cell);
    balancer_t *balancer = balancer_new (out, cell);
    CHECK (balancer);
    pthread_t thread;
    CHECK (pthread_create (&thread, NULL, s_run, balancer) == 0);

    //  The first report: the cell before anything was set (all zeros).
    sq_load_t got, want = { 0 };
    CHECK (s_next_load (in, &got) == 0);
    CHECK (memcmp (&got, &want, sizeof got) == 0);

    //  A value set reaches the broker.
    want = s_load (5);
    balancer_load_set (cell, &want);
    do
        CHECK (s_next_load (in, &got) == 0);
    while (got.running != 5);
    CHECK (memcmp (&got, &want, sizeof got) == 0);

    //  A burst: whatever is sampled between, the last value comes, and
    //  nothing after it but itself.
    for (uint64_t n = 100; n <= 10000; n++) {
        sq_load_t load = s_load (n);
        balancer_load_set (cell, &load);
    }
    want = s_load (10000);
    do
        CHECK (s_next_load (in, &got) == 0);
    while (got.running != 10000);
    CHECK (memcmp (&got, &want, sizeof got) == 0);

    //  Unchanged: said again all the same (the keepalive), the same value.
    CHECK (s_next_load (in, &got) == 0);
    CHECK (memcmp (&got, &want, sizeof got) == 0);

    //  GOV_TERM: the thread says GOV_DONE and ends.
    CHECK (zmq_send (in, GOV_TERM, strlen (GOV_TERM), 0) == (int) strlen (GOV_TERM));
    char word [16];
    int size;
    zmq_pollitem_t item = { in, 0, ZMQ_POLLIN, 0 };
    do {
        CHECK (zmq_poll (&item, 1, S_DEADLINE_MS) == 1);
        size = zmq_recv (in, word, sizeof word, 0);
        CHECK (size >= 0);
        if (size != (int) strlen (GOV_DONE)) {
            //  A LOAD sent before the word was read: its rest.
            int more = 0;
            size_t more_size = sizeof more;
            zmq_getsockopt (in, ZMQ_RCVMORE, &more, &more_size);
            if (more)
                CHECK (zmq_recv (in, word, sizeof word, 0) >= 0);
        }
    } while (size != (int) strlen (GOV_DONE) || memcmp (word, GOV_DONE, (size_t) size));
    CHECK (pthread_join (thread, NULL) == 0);
    balancer_destroy (&balancer);
    CHECK (!balancer);
    balancer_load_destroy (&cell);
    CHECK (!cell);
    zmq_close (in);
    zmq_ctx_term (ctx);
    printf ("test_governor_balancer: OK\n");
    return 0;
}
