/*  admission: what the admission tests (test_broker_admission,
    test_governor_admission) share to drive a CURVE server socket, its
    monitor and a client's turn by turn: every wait is on a real event,
    with a deadline. Static functions: each test is one executable. */
#ifndef SQ_TEST_ADMISSION_H
#define SQ_TEST_ADMISSION_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <zmq.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

#define ADM_WAIT_MS 10000

static inline int64_t
adm_clock_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  Waits (ADM_WAIT_MS at most) for socket to be readable.
static inline bool
adm_readable (void *socket)
{
    zmq_pollitem_t item = { socket, 0, ZMQ_POLLIN, 0 };
    return zmq_poll (&item, 1, ADM_WAIT_MS) == 1;
}

//  The next event of a client's monitor (ADM_WAIT_MS at most), 0 if none.
static inline uint16_t
adm_client_event (void *monitor)
{
    if (!adm_readable (monitor))
        return 0;
    zmq_msg_t frame;
    zmq_msg_init (&frame);
    uint16_t event = 0;
    if (zmq_msg_recv (&frame, monitor, 0) >= 6)
        memcpy (&event, zmq_msg_data (&frame), 2);
    while (zmq_msg_more (&frame))
        zmq_msg_recv (&frame, monitor, 0);
    zmq_msg_close (&frame);
    return event;
}

//  Binds socket on a free loopback port: its endpoint, and its address for
//  plain TCP connections.
static inline void
adm_bind (void *socket, char *endpoint, size_t size, struct sockaddr_in *addr)
{
    CHECK (zmq_bind (socket, "tcp://127.0.0.1:*") == 0, "bind: %s", zmq_strerror (zmq_errno ()));
    zmq_getsockopt (socket, ZMQ_LAST_ENDPOINT, endpoint, &size);
    memset (addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons ((uint16_t) atoi (strrchr (endpoint, ':') + 1));
    addr->sin_addr.s_addr = htonl (INADDR_LOOPBACK);
}

//  A monitor of a client socket's handshakes and disconnections, named
//  `name` (inproc).
static inline void *
adm_client_monitor (void *ctx, void *client, const char *name)
{
    char endpoint [100];
    snprintf (endpoint, sizeof endpoint, "inproc://%s", name);
    CHECK (zmq_socket_monitor (client, endpoint,
                               ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) == 0,
           "client monitor");
    void *monitor = zmq_socket (ctx, ZMQ_PAIR);
    CHECK (monitor && zmq_connect (monitor, endpoint) == 0, "client monitor");
    return monitor;
}

#endif
