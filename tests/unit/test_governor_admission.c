/*  test_governor_admission: on a governor's data and serve sockets, a
    connection over the limits (common/conns.c) is closed before its CURVE
    handshake can finish, so the peer's first message (queued on its side
    before the connection is made) is kept for its next connection instead
    of being sent into a condemned one and lost.

    In-process, the governor's own gate (governor/gate.c: the receive
    thread's ZAP handler, key lists and connection accounting) with a real
    PULL (domain "data") and ROUTER ("serve"), both CURVE servers watched
    by the gate, driven turn by turn as receiver_run's loop drives it (what
    is not covered: that loop's order of calls). For each socket:

    - a peer address holds its one allowed unidentified connection, younger
      than a second: a governor's (data) or client's (serve) connection
      from it is the newcomer closed;
    - its ZAP request is read before its ACCEPTED event was (the receive
      thread was busy): gate_handle reads that socket's monitor first,
      conns closes the newcomer, and only then the handshake is answered:
      the peer never sees its handshake succeed on that connection;
    - a second later (the idle one may be pushed out) the peer's
      reconnection is let in and its first message arrives, once (before
      the message the peer sent after it).

    (Before gate_handle read the monitor, the governor answered ZAP first
    and read its monitors later in its loop: the peer could finish its
    handshake and send on a connection closed a moment later.) */
#include "admission.h"
#include "gate.h"
#include "zap.h"
#include <unistd.h>

typedef struct {
    uint8_t public_key [32];
    uint8_t secret_key [32];
} s_pair_t;

static s_pair_t
s_pair (void)
{
    char public_z85 [41], secret_z85 [41];
    s_pair_t pair;
    CHECK (zmq_curve_keypair (public_z85, secret_z85) == 0, "CURVE keys");
    zmq_z85_decode (pair.public_key, public_z85);
    zmq_z85_decode (pair.secret_key, secret_z85);
    return pair;
}

//  One socket's case (see above): `listener` is the gate's socket `which`,
//  bound here; the peer connects to it as a `type` socket with its keys.
static void
s_admission (void *ctx, gate_t *gate, int which, void *listener, int type, const s_pair_t *peer,
             const uint8_t *server_key)
{
    const char *name = which == GATE_DATA? "data": "serve";
    conns_t *conns = gate_conns (gate, which);
    char endpoint [100];
    struct sockaddr_in addr;
    adm_bind (listener, endpoint, sizeof endpoint, &addr);

    //  A stranger's idle connection takes the address's one place, at 0 ms.
    int idle = socket (AF_INET, SOCK_STREAM, 0);
    CHECK (connect (idle, (struct sockaddr *) &addr, sizeof addr) == 0, "connect");
    while (conns_open (conns) < 1) {
        CHECK (adm_readable (gate_monitor (gate, which)), "%s: the idle connection's ACCEPTED",
               name);
        gate_events (gate, which, 0);
    }

    //  The peer, its first message (and one after it) queued before its
    //  connection exists.
    void *client = zmq_socket (ctx, type);
    int zero = 0;
    zmq_setsockopt (client, ZMQ_LINGER, &zero, sizeof zero);
    CHECK (sq_curve_client (client, peer->public_key, peer->secret_key, server_key) == 0,
           "curve client");
    char monitor_name [64];
    snprintf (monitor_name, sizeof monitor_name, "admission-client-%s", name);
    void *client_monitor = adm_client_monitor (ctx, client, monitor_name);
    zmq_setsockopt (client_monitor, ZMQ_LINGER, &zero, sizeof zero);
    CHECK (zmq_connect (client, endpoint) == 0, "connect");
    CHECK (zmq_send (client, "FIRST", 5, ZMQ_DONTWAIT) == 5, "send");
    CHECK (zmq_send (client, "AFTER", 5, ZMQ_DONTWAIT) == 5, "send");

    //  The receive thread was busy: the handshake asks ZAP before the
    //  connection's ACCEPTED was read. Answering reads the socket's monitor
    //  first: conns closes the newcomer (the idle one is 0 ms old), then
    //  the answer goes. The loop reads its monitors again only later (here:
    //  once the peer saw its connection end), as it did before, when this
    //  handshake succeeded and the first message went into the condemned
    //  connection.
    CHECK (adm_readable (gate_zap (gate)), "%s: the peer's ZAP request", name);
    CHECK (conns_closed (conns) == 0, "%s: nothing closed yet", name);
    gate_handle (gate, 0);
    uint16_t first = adm_client_event (client_monitor);
    CHECK (first == ZMQ_EVENT_DISCONNECTED, "%s: the peer's first connection ends before its "
           "handshake succeeds (event 0x%x)", name, first);
    gate_events (gate, which, 0);
    CHECK (conns_closed (conns) == 1, "%s: the newcomer was closed", name);

    //  A second later the idle one may be pushed out: the reconnection is
    //  let in and its handshake answered; the first message comes on it,
    //  once, before the one after it.
    int64_t deadline = adm_clock_ms () + ADM_WAIT_MS;
    bool succeeded = false, after = false;
    int firsts = 0;
    zmq_msg_t frame;
    zmq_msg_init (&frame);
    while (!after && adm_clock_ms () < deadline) {
        zmq_pollitem_t items [] = {
            { listener, 0, ZMQ_POLLIN, 0 },
            { gate_monitor (gate, which), 0, ZMQ_POLLIN, 0 },
            { gate_zap (gate), 0, ZMQ_POLLIN, 0 },
            { client_monitor, 0, ZMQ_POLLIN, 0 }
        };
        zmq_poll (items, 4, 100);
        gate_events (gate, which, 2000);
        gate_handle (gate, 2000);
        if ((items [3].revents & ZMQ_POLLIN)
        &&  adm_client_event (client_monitor) == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            succeeded = true;
        while (zmq_msg_recv (&frame, listener, ZMQ_DONTWAIT) >= 0) {
            if (zmq_msg_more (&frame) || zmq_msg_size (&frame) != 5)
                continue;       //  the ROUTER's identity frame
            if (memcmp (zmq_msg_data (&frame), "FIRST", 5) == 0) {
                CHECK (!after, "%s: the first message came after the one after it", name);
                firsts++;
            }
            after |= memcmp (zmq_msg_data (&frame), "AFTER", 5) == 0;
        }
    }
    zmq_msg_close (&frame);
    CHECK (after, "%s: the peer's messages arrived on its next connection", name);
    CHECK (firsts == 1, "%s: its first message arrived once (%d times)", name, firsts);
    CHECK (conns_closed (conns) == 2, "%s: the idle one was pushed out for it", name);
    //  The success event may trail the messages a little.
    while (!succeeded) {
        uint16_t event = adm_client_event (client_monitor);
        CHECK (event, "%s: the peer's handshake succeeded", name);
        succeeded = event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
    }
    close (idle);
    zmq_close (client_monitor);
    zmq_close (client);
}

int
main (void)
{
    void *ctx = zmq_ctx_new ();
    gate_t *gate = gate_new (ctx, true);
    CHECK (gate, "gate_new");
    s_pair_t server = s_pair (), governor = s_pair (), client = s_pair ();
    //  The broker's KEYS: this governor admits one governor and one client.
    const uint8_t *governors [] = { governor.public_key };
    const uint8_t *clients [] = { client.public_key };
    sq_keyset_t keys = { { governors, 1 }, { clients, 1 } };
    gate_keys (gate, &keys);
    CHECK (gate_admits (gate, GATE_DATA, governor.public_key)
       && !gate_admits (gate, GATE_DATA, client.public_key)
       &&  gate_admits (gate, GATE_SERVE, client.public_key), "the key lists");

    void *data = zmq_socket (ctx, ZMQ_PULL);
    void *serve = zmq_socket (ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt (data, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt (serve, ZMQ_LINGER, &zero, sizeof zero);
    CHECK (sq_curve_server (data, server.secret_key, "data") == 0
        && sq_curve_server (serve, server.secret_key, "serve") == 0, "curve");
    conns_limits_t limits = { 100, 100, 1, 10000 };
    CHECK (gate_watch (gate, GATE_DATA, data, &limits, "data socket") == 0
        && gate_watch (gate, GATE_SERVE, serve, &limits, "serve socket") == 0, "gate_watch");

    s_admission (ctx, gate, GATE_DATA, data, ZMQ_PUSH, &governor, server.public_key);
    s_admission (ctx, gate, GATE_SERVE, serve, ZMQ_DEALER, &client, server.public_key);

    gate_unwatch (gate);
    zmq_close (data);
    zmq_close (serve);
    gate_destroy (&gate);
    zmq_ctx_term (ctx);
    printf ("test_governor_admission: OK\n");
    return 0;
}
