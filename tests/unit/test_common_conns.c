/*  Unit test of common/conns: real loopback connections, monitor events
    fed by hand with chosen times. The per-address limit pushes out the
    least recently active unidentified connection, or the newcomer when all
    are younger than a second; identified ones are never pushed out; idle
    unidentified ones are closed; a descriptor reused by another connection
    is never shut down. */
#include "conns.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        if (++s_failures > 20) exit (1); \
    } \
} while (0)

static int s_listener;
static struct sockaddr_in s_addr;

typedef struct {
    int client, server;
} s_pair_t;

//  A connection from `from` (a 127.x address) on `client` (-1: a new
//  socket): both ends.
static s_pair_t
s_connect (const char *from, int client)
{
    s_pair_t pair = { client >= 0? client: socket (AF_INET, SOCK_STREAM, 0), -1 };
    struct sockaddr_in src = { .sin_family = AF_INET };
    inet_pton (AF_INET, from, &src.sin_addr);
    if (pair.client < 0 || bind (pair.client, (struct sockaddr *) &src, sizeof src)
    ||  connect (pair.client, (struct sockaddr *) &s_addr, sizeof s_addr)) {
        perror ("connect");
        exit (1);
    }
    pair.server = accept (s_listener, NULL, NULL);
    if (pair.server < 0) {
        perror ("accept");
        exit (1);
    }
    return pair;
}

static void
s_event (conns_t *conns, uint16_t type, int fd, int64_t now)
{
    uint8_t frame [6];
    uint32_t value = (uint32_t) fd;
    memcpy (frame, &type, 2);
    memcpy (frame + 2, &value, 4);
    conns_event (conns, frame, sizeof frame, now);
}

//  Whether the server shut the connection down: the client reads its end.
//  (A shutdown is sent at once; the wait only bounds a broken kernel.)
static int
s_closed (s_pair_t *pair)
{
    struct pollfd p = { pair->client, POLLIN, 0 };
    if (poll (&p, 1, 0) <= 0)
        return 0;
    char byte;
    return recv (pair->client, &byte, 1, MSG_DONTWAIT) == 0;
}

static s_pair_t
s_accepted (conns_t *conns, const char *from, int64_t now)
{
    s_pair_t pair = s_connect (from, -1);
    s_event (conns, ZMQ_EVENT_ACCEPTED, pair.server, now);
    return pair;
}

static void
s_close_pair (s_pair_t *pair)
{
    close (pair->client);
    close (pair->server);
}

int
main (void)
{
    s_listener = socket (AF_INET, SOCK_STREAM, 0);
    s_addr.sin_family = AF_INET;
    s_addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof s_addr;
    if (bind (s_listener, (struct sockaddr *) &s_addr, sizeof s_addr) || listen (s_listener, 64)
    ||  getsockname (s_listener, (struct sockaddr *) &s_addr, &len)) {
        perror ("listen");
        return 1;
    }
    conns_limits_t limits = { 100, 50, 3, 10000 };
    conns_t *conns = conns_new (&limits, "test");
    CHECK (conns);

    //  Per address: the fourth pushes out the least recently active.
    s_pair_t a [4];
    for (int i = 0; i < 3; i++)
        a [i] = s_accepted (conns, "127.0.0.2", 0);
    conns_active (conns, a [0].server, false, 100);    //  a [1] is now the least active
    CHECK (conns_open (conns) == 3);
    a [3] = s_accepted (conns, "127.0.0.2", 2000);
    CHECK (s_closed (&a [1]));
    CHECK (!s_closed (&a [0]) && !s_closed (&a [2]) && !s_closed (&a [3]));
    CHECK (conns_closed (conns) == 1 && conns_open (conns) == 3);
    s_event (conns, ZMQ_EVENT_DISCONNECTED, a [1].server, 2000);

    //  Another address is not affected; all younger than a second there:
    //  the newcomer goes.
    s_pair_t b [4];
    for (int i = 0; i < 3; i++)
        b [i] = s_accepted (conns, "127.0.0.3", 3000);
    b [3] = s_accepted (conns, "127.0.0.3", 3500);
    CHECK (s_closed (&b [3]));
    CHECK (!s_closed (&b [0]) && !s_closed (&b [1]) && !s_closed (&b [2]));
    CHECK (!s_closed (&a [0]) && !s_closed (&a [2]) && !s_closed (&a [3]));
    s_event (conns, ZMQ_EVENT_DISCONNECTED, b [3].server, 3500);

    //  Identified ones are never pushed out: b [0] is, b [1] goes.
    conns_active (conns, b [0].server, true, 3600);
    s_pair_t b4 = s_accepted (conns, "127.0.0.3", 5000);
    s_pair_t b5 = s_accepted (conns, "127.0.0.3", 5000);
    CHECK (!s_closed (&b [0]) && s_closed (&b [1]) && !s_closed (&b [2]) && !s_closed (&b4));
    CHECK (!s_closed (&b5));
    s_event (conns, ZMQ_EVENT_DISCONNECTED, b [1].server, 5000);

    //  Idle: unidentified connections silent for 10 s go, in order.
    int64_t next = conns_tick (conns, 5000);
    CHECK (next == 10000);                //  a [2], silent since 0
    conns_tick (conns, 10000);
    CHECK (s_closed (&a [2]) && !s_closed (&a [0]));
    conns_tick (conns, 14000);
    CHECK (s_closed (&a [0]) && s_closed (&a [3]) && s_closed (&b [2]));
    CHECK (!s_closed (&b [0]));           //  identified
    CHECK (!s_closed (&b4) && !s_closed (&b5));
    uint64_t closed = conns_closed (conns);

    //  A descriptor closed and reused by another connection before its
    //  DISCONNECTED was read: the new connection is left alone.
    int fd = b4.server;
    int client = socket (AF_INET, SOCK_STREAM, 0);
    close (b4.server);
    s_pair_t reuse = s_connect ("127.0.0.3", client);
    CHECK (reuse.server == fd);
    conns_tick (conns, 15000);           //  b4's entry is due: its descriptor is reuse's
    CHECK (!s_closed (&reuse));
    CHECK (s_closed (&b5));
    CHECK (conns_closed (conns) == closed + 1);

    //  Over the total, with nothing left to push out: the newcomer goes.
    conns_limits_t small = { 2, 50, 10, 10000 };
    conns_t *few = conns_new (&small, "test");
    s_pair_t c0 = s_accepted (few, "127.0.0.4", 0);
    s_pair_t c1 = s_accepted (few, "127.0.0.5", 0);
    conns_active (few, c0.server, true, 0);
    conns_active (few, c1.server, true, 0);
    s_pair_t c2 = s_accepted (few, "127.0.0.6", 5000);
    CHECK (s_closed (&c2) && !s_closed (&c0) && !s_closed (&c1));
    CHECK (conns_open (few) == 2);
    conns_destroy (&few);
    CHECK (few == NULL);

    s_close_pair (&c0);
    s_close_pair (&c1);
    s_close_pair (&c2);
    for (int i = 0; i < 4; i++) {
        s_close_pair (&a [i]);
        s_close_pair (&b [i]);
    }
    close (b4.client);
    s_close_pair (&b5);
    s_close_pair (&reuse);
    conns_destroy (&conns);
    close (s_listener);

    //  The limits a descriptor limit gives.
    conns_limits_t l;
    conns_limits_for (1024, 192, &l);
    CHECK (l.max_total == 832 && l.max_unidentified == 416 && l.max_per_address == 104);
    conns_limits_for (1 << 20, 192, &l);
    CHECK (l.max_unidentified == 4096 && l.max_per_address == 256);
    conns_limits_for (100, 192, &l);
    CHECK (l.max_total == 50 && l.max_per_address >= 4);
    CHECK (conns_raise_nofile () >= 64);

    if (s_failures)
        return 1;
    printf ("test_common_conns: PASS\n");
    return 0;
}
