/*  test_broker_admission: a connection over the limits (common/conns.c) is
    closed before its CURVE handshake can finish, so the client's first
    message (a HELLO, queued on its side before the connection is made)
    is kept for its next connection instead of being sent into a condemned
    one and lost. In-process: a real ROUTER with CURVE, the broker's auth
    (ZAP) and a socket monitor feeding conns, driven turn by turn as the
    broker's reactor does (broker/peers/auth.h, auth_set_before_answer).

    - a peer address holds its one allowed unidentified connection, younger
      than a second: a client's connection from it is the newcomer closed;
    - its ZAP request is read before its ACCEPTED event was (the reactor
      was busy): the before-answer hook reads the monitor, conns closes the
      newcomer, and only then the handshake is answered: the client never
      sees its handshake succeed on that connection;
    - a second later (the idle one may be pushed out) the client's
      reconnection is let in and its first message arrives, once.

    (Before auth_set_before_answer the broker answered ZAP first and read
    its monitor after: the client could finish its handshake and send its
    HELLO on a connection closed a moment later; it then waited for an
    answer until its timeout, tests/python/test_hardening.py.) */
#include "admission.h"
#include "auth.h"
#include "conns.h"
#include "keys.h"
#include "squall.h"
#include "zap.h"
#include <sys/stat.h>
#include <unistd.h>

//  The time conns is told (ms): chosen by the test, not the clock's.
static int64_t s_now;
static void *s_monitor;
static conns_t *s_conns;
static int s_hook_calls;

//  Reads every monitor event waiting into conns, as bx_drain_monitor does.
static void
s_drain (void)
{
    conns_drain (s_conns, s_monitor, SIZE_MAX, s_now, NULL, NULL);
}

static void
s_before_answer (void *arg)
{
    (void) arg;
    s_hook_calls++;
    s_drain ();
}

int
main (void)
{
    char dir [] = "/tmp/squall-admission-XXXXXX";
    CHECK (mkdtemp (dir), "mkdtemp");
    char authorized [600], path [700], broker_pub [700], err [600];
    snprintf (authorized, sizeof authorized, "%s/authorized", dir);
    CHECK (mkdir (authorized, 0700) == 0, "mkdir");
    CHECK (sq_keygen ("broker", dir, "broker", NULL, err, sizeof err) == 0, "%s", err);
    CHECK (sq_keygen ("alice", dir, "client", NULL, err, sizeof err) == 0, "%s", err);
    snprintf (path, sizeof path, "%s/alice.pub", dir);
    char ring_pub [700];
    snprintf (ring_pub, sizeof ring_pub, "%s/alice.pub", authorized);
    CHECK (link (path, ring_pub) == 0, "link");
    snprintf (path, sizeof path, "%s/broker.key", dir);
    snprintf (broker_pub, sizeof broker_pub, "%s/broker.pub", dir);

    void *ctx = zmq_ctx_new ();
    auth_t *auth = auth_new (ctx, path, authorized);
    CHECK (auth, "auth_new");
    auth_set_before_answer (auth, s_before_answer, NULL);
    conns_limits_t limits = { 100, 100, 1, 10000 };
    s_conns = conns_new (&limits, "test");
    CHECK (s_conns, "conns_new");

    void *router = zmq_socket (ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt (router, ZMQ_LINGER, &zero, sizeof zero);
    CHECK (sq_curve_server (router, auth_cert (auth)->secret_key, "squall") == 0, "curve");
    CHECK (zmq_socket_monitor (router, "inproc://admission-monitor",
                               ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) == 0, "monitor");
    s_monitor = zmq_socket (ctx, ZMQ_PAIR);
    CHECK (zmq_connect (s_monitor, "inproc://admission-monitor") == 0, "monitor");
    char endpoint [100];
    struct sockaddr_in addr;
    adm_bind (router, endpoint, sizeof endpoint, &addr);

    //  A stranger's idle connection takes the address's one place, at 0 ms.
    int idle = socket (AF_INET, SOCK_STREAM, 0);
    CHECK (connect (idle, (struct sockaddr *) &addr, sizeof addr) == 0, "connect");
    while (conns_open (s_conns) < 1) {
        CHECK (adm_readable (s_monitor), "the idle connection's ACCEPTED");
        s_drain ();
    }

    //  The client, its HELLO queued before its connection exists.
    snprintf (path, sizeof path, "%s/alice.key", dir);
    uint8_t public_key [32], secret_key [32], server_key [32];
    CHECK (sq_cert_load_pair (path, broker_pub, "key", "broker key", public_key, secret_key,
                              server_key, err, sizeof err) == 0, "%s", err);
    void *dealer = zmq_socket (ctx, ZMQ_DEALER);
    zmq_setsockopt (dealer, ZMQ_LINGER, &zero, sizeof zero);
    CHECK (sq_curve_client (dealer, public_key, secret_key, server_key) == 0, "curve client");
    void *client_monitor = adm_client_monitor (ctx, dealer, "admission-client");
    CHECK (zmq_connect (dealer, endpoint) == 0, "connect");
    CHECK (zmq_send (dealer, "HELLO", 5, ZMQ_DONTWAIT) == 5, "send");

    //  The reactor was busy: the handshake asks ZAP before the connection's
    //  ACCEPTED was read. Answering reads the monitor first: conns closes
    //  the newcomer (the idle one is 0 ms old), then the answer goes. The
    //  reactor reads its monitor again only later (here: once the client
    //  saw its connection end), as it did before the hook, when this
    //  handshake succeeded and the HELLO went into the condemned
    //  connection.
    CHECK (adm_readable (auth_socket (auth)), "the client's ZAP request");
    CHECK (conns_closed (s_conns) == 0, "nothing closed yet");
    auth_handle (auth);
    uint16_t first = adm_client_event (client_monitor);
    CHECK (first == ZMQ_EVENT_DISCONNECTED, "the client's first connection ends before its "
           "handshake succeeds (event 0x%x; hook calls %d)", first, s_hook_calls);
    s_drain ();
    CHECK (s_hook_calls == 1, "the hook ran once (%d calls)", s_hook_calls);
    CHECK (conns_closed (s_conns) == 1, "the newcomer was closed");

    //  A second later the idle one may be pushed out: the reconnection is
    //  let in and its handshake answered; the HELLO comes on it.
    s_now = 2000;
    int64_t deadline = adm_clock_ms () + ADM_WAIT_MS;
    bool succeeded = false;
    zmq_msg_t frame;
    zmq_msg_init (&frame);
    char got [16] = "";
    while (!got [0] && adm_clock_ms () < deadline) {
        zmq_pollitem_t items [] = {
            { router, 0, ZMQ_POLLIN, 0 },
            { s_monitor, 0, ZMQ_POLLIN, 0 },
            { auth_socket (auth), 0, ZMQ_POLLIN, 0 },
            { client_monitor, 0, ZMQ_POLLIN, 0 }
        };
        zmq_poll (items, 4, 100);
        auth_handle (auth);
        s_drain ();
        if (items [3].revents & ZMQ_POLLIN) {
            uint16_t event = adm_client_event (client_monitor);
            if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
                succeeded = true;
        }
        while (zmq_msg_recv (&frame, router, ZMQ_DONTWAIT) >= 0) {
            if (!zmq_msg_more (&frame) && zmq_msg_size (&frame) < sizeof got)
                memcpy (got, zmq_msg_data (&frame), zmq_msg_size (&frame));
        }
    }
    zmq_msg_close (&frame);
    CHECK (strcmp (got, "HELLO") == 0, "the client's HELLO arrived on its next connection");
    CHECK (conns_closed (s_conns) == 2, "the idle one was pushed out for it");
    //  The success event may trail the message a little.
    while (!succeeded) {
        uint16_t event = adm_client_event (client_monitor);
        CHECK (event, "the client's handshake succeeded");
        succeeded = event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
    }

    close (idle);
    zmq_close (client_monitor);
    zmq_close (dealer);
    zmq_close (s_monitor);
    zmq_close (router);
    conns_destroy (&s_conns);
    auth_destroy (&auth);
    zmq_ctx_term (ctx);
    char command [700];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    if (system (command)) {
    }
    printf ("test_broker_admission: OK\n");
    return 0;
}
