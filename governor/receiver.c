/*  receiver: the network side of a governor.

    Every socket of the governor lives on the receive thread and so in this
    file: the control DEALER and its handshake, detached
    mode and reattach, the data PULL, the serve ROUTER with its capability
    checks, and the PUSH sockets to peers. ZeroMQ sockets are not
    thread-safe, so splitting them across files would only spread one
    thread's state: over 800 lines for that reason. Who may connect to the
    data and serve sockets (their ZAP handler and connection accounting) is
    gate.c's, on this thread too. */
#include "receiver.h"
#include "task.h"
#include "wire.h"
#include "zap.h"
#include "capability.h"
#include "gate.h"
#include "log.h"
#include <czmq.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>


#define S_NET_HWM 100000
#define S_READ_BURST 256
#define S_MAX_PEERS 4096
#define S_HELLO_REQ 1
#define S_REATTACH_BACKOFF_MAX_MS 2000
#define S_HANDSHAKE_MS 5000
//  Descriptors kept from connections: the store's files, executors' pipes,
//  PUSH sockets to other governors.
#define S_FD_RESERVE 512
struct _receiver_t {
    void *ctx;
    const gov_config_t *config;
    int signal_fd;
    void *ctrl, *data, *serve;
    gate_t *gate;                   //  who may connect to data and serve
    zhashx_t *peers;                //  peer address (governor.h) -> PUSH socket
    void *compute, *balance;        //  pipes, during run and stop
    char data_endpoint [256];
    char serve_endpoint [256];
    int heartbeat_ms;
    uint64_t last_recv_ns;          //  from the broker
    uint64_t last_send_ns;          //  to the broker
    sq_msg_t msg;
    sq_msg_t stalled;               //  waiting for room in compute's pipe
    char stalled_route [48];
    size_t stalled_route_len;
    int exit_code;                  //  -1 while running
    bool broker_said_bye;
    int done;                       //  GOV_DONE received (during stop)
    //  What the broker told us in its welcome.
    uint32_t governor_id;
    uint64_t inline_max;
    uint64_t incarnation;           //  ours, the same through reattaches
    char cluster [SQ_CLUSTER_ID_LEN + 1];   //  "" until welcomed
    uint8_t secret [SQ_SECRET_LEN]; //  checks capabilities
    int64_t clock_offset_ms;        //  broker's wall clock minus ours
    //  A lost broker, waited for within --broker-grace (everything kept).
    bool detached;
    uint64_t detached_ns;
    //  A first SIGTERM: DRAIN was sent, LEAVE is awaited until the deadline.
    bool draining;
    uint64_t drain_deadline_ns;
    uint64_t next_hello_ns;
    int backoff_ms;
    uint64_t dropped;               //  messages for the broker while detached
};

static uint64_t
s_ms_to_ns (int ms)
{
    return (uint64_t) ms * 1000000ull;
}

//  Binds tcp://host:* and builds the endpoint others use to reach it.
static int
s_bind (receiver_t *self, void *socket, char *announce, size_t size)
{
    const char *host = self->config->listen_host;
    bool v6 = strchr (host, ':') != NULL;
    char endpoint [300];
    snprintf (endpoint, sizeof endpoint, v6? "tcp://[%s]:*": "tcp://%s:*", host);
    int one = 1;
    if (v6)
        zmq_setsockopt (socket, ZMQ_IPV6, &one, sizeof one);
    if (zmq_bind (socket, endpoint)) {
        sq_error ("cannot bind %s: %s", endpoint, zmq_strerror (errno));
        return -1;
    }
    char last [300];
    size_t last_size = sizeof last;
    zmq_getsockopt (socket, ZMQ_LAST_ENDPOINT, last, &last_size);
    const char *port = strrchr (last, ':');
    const char *adv = self->config->advertise;
    snprintf (announce, size, strchr (adv, ':')? "tcp://[%s]:%s": "tcp://%s:%s",
              adv, port? port + 1: "0");
    return 0;
}

static void *s_socket (receiver_t *self, int type);

//  A fresh control connection: a new DEALER is a new identity to the
//  broker, so nothing of an earlier incarnation can be mistaken for ours.
static int
s_connect (receiver_t *self)
{
    self->ctrl = s_socket (self, ZMQ_DEALER);
    if (!self->ctrl)
        return -1;
    int ivl = 1000, timeout = 5000;
    zmq_setsockopt (self->ctrl, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt (self->ctrl, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
    //  Short: BYE and the last UPDATE matter, a dead broker must not hold us.
    int short_linger = 500;
    zmq_setsockopt (self->ctrl, ZMQ_LINGER, &short_linger, sizeof short_linger);
    const gov_config_t *config = self->config;
    if (config->has_keys
    &&  sq_curve_client (self->ctrl, config->public_key, config->secret_key, config->broker_key)) {
        sq_error ("cannot make the broker connection CURVE: %s", zmq_strerror (errno));
        return -1;
    }
    if (zmq_connect (self->ctrl, config->broker)) {
        sq_error ("cannot connect to broker %s: %s", config->broker, zmq_strerror (errno));
        return -1;
    }
    return 0;
}

static void *
s_socket (receiver_t *self, int type)
{
    void *socket = zmq_socket (self->ctx, type);
    if (!socket)
        return NULL;
    int hwm = S_NET_HWM, linger = 1000;
    zmq_setsockopt (socket, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt (socket, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt (socket, ZMQ_LINGER, &linger, sizeof linger);
    return socket;
}

receiver_t *
receiver_new (void *ctx, const gov_config_t *config, int signal_fd)
{
    receiver_t *self = (receiver_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->ctx = ctx;
    self->config = config;
    self->signal_fd = signal_fd;
    self->heartbeat_ms = config->heartbeat_ms;
    self->exit_code = -1;
    sq_msg_init (&self->msg);
    sq_msg_init (&self->stalled);
    self->peers = zhashx_new ();
    //  The ZAP handler first: no handshake may come before it is there.
    self->gate = gate_new (ctx, config->has_keys);
    if (!self->gate) {
        receiver_destroy (&self);
        return NULL;
    }
    self->data = s_socket (self, ZMQ_PULL);
    self->serve = s_socket (self, ZMQ_ROUTER);
    //  Anyone who reaches these ports can connect: no frame larger than the
    //  protocol allows there (a chunk, a PUT range or a GREAD request: 64
    //  MiB at most, and what CURVE adds to a frame) is read, and a
    //  connection still without a handshake after a few seconds is closed.
    int64_t max_frame = (int64_t) SQ_CHUNK_MAX + 65536;
    int handshake_ms = S_HANDSHAKE_MS;
    for (int i = 0; i < 2; i++) {
        void *socket = i? self->serve: self->data;
        if (socket) {
            zmq_setsockopt (socket, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
            zmq_setsockopt (socket, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof handshake_ms);
        }
    }
    if (self->data && self->serve && config->has_keys
    &&  (sq_curve_server (self->data, config->secret_key, "data")
    ||   sq_curve_server (self->serve, config->secret_key, "serve"))) {
        sq_error ("cannot make the data and serve sockets CURVE servers");
        receiver_destroy (&self);
        return NULL;
    }
    conns_limits_t limits;
    conns_limits_for (conns_raise_nofile (), S_FD_RESERVE, &limits);
    if (!self->peers || !self->data || !self->serve
    ||  gate_watch (self->gate, GATE_DATA, self->data, &limits, "data socket")
    ||  gate_watch (self->gate, GATE_SERVE, self->serve, &limits, "serve socket")
    ||  s_bind (self, self->data, self->data_endpoint, sizeof self->data_endpoint)
    ||  s_bind (self, self->serve, self->serve_endpoint, sizeof self->serve_endpoint)
    ||  s_connect (self)) {
        receiver_destroy (&self);
        return NULL;
    }
    return self;
}

int
receiver_reconnect (receiver_t *self)
{
    int zero = 0;
    zmq_setsockopt (self->ctrl, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close (self->ctrl);
    self->ctrl = NULL;
    sq_msg_close (&self->stalled);
    self->exit_code = -1;
    self->broker_said_bye = false;
    self->done = 0;
    self->detached = false;
    return s_connect (self);
}

void
receiver_destroy (receiver_t **self_p)
{
    receiver_t *self = *self_p;
    if (!self)
        return;
    if (self->peers) {
        for (void *peer = zhashx_first (self->peers); peer; peer = zhashx_next (self->peers))
            zmq_close (peer);
        zhashx_destroy (&self->peers);
    }
    if (self->ctrl)
        zmq_close (self->ctrl);
    if (self->gate)
        gate_unwatch (self->gate);
    if (self->data)
        zmq_close (self->data);
    if (self->serve)
        zmq_close (self->serve);
    gate_destroy (&self->gate);
    sq_msg_close (&self->msg);
    sq_msg_close (&self->stalled);
    free (self->msg.frames);
    free (self->stalled.frames);
    memset (self->secret, 0, sizeof self->secret);
    free (self);
    *self_p = NULL;
}

//  --------------------------------------------------------------------------
//  Keys (KEYS from the broker)

//  The key a message came with (its User-Id, Z85), decoded; false if none.
static bool
s_user_key (zmq_msg_t *frame, uint8_t *key)
{
    const char *user = sq_msg_user (frame);
    return user && sq_key_from_z85 (user, strlen (user), key) == 0;
}

static void
s_on_keys (receiver_t *self, sq_msg_t *msg)
{
    sq_keyset_t keys;
    sq_errbuf_t err;
    if (sq_keyset_decode (&keys, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &err)) {
        sq_warn ("bad KEYS from the broker: %s", err.text);
        return;
    }
    gate_keys (self->gate, &keys);
    sq_keyset_release (&keys);
}

//  --------------------------------------------------------------------------
//  Sending

static int
s_send_frames (void *socket, sq_msg_t *msg, size_t from)
{
    for (size_t i = from; i < msg->n; i++) {
        int flags = (i + 1 < msg->n? ZMQ_SNDMORE: 0) | (i == from? ZMQ_DONTWAIT: 0);
        if (zmq_msg_send (&msg->frames [i], socket, flags) < 0)
            return -1;          //  only the first can fail (whole messages)
    }
    return 0;
}

static void
s_to_broker (receiver_t *self, sq_msg_t *msg, size_t from)
{
    if (self->detached) {
        //  Nobody to tell; what matters is listed again at the reattach.
        self->dropped++;
        return;
    }
    if (s_send_frames (self->ctrl, msg, from))
        sq_warn ("broker queue full: message dropped (%s)", zmq_strerror (errno));
    self->last_send_ns = task_now_ns ();
}

static void
s_to_peer (receiver_t *self, sq_msg_t *msg)
{
    size_t size = sq_msg_size (msg, 0) - 1;
    char address [SQ_MAX_NAME + 48];
    if (size >= sizeof address || size < 7)
        return;
    memcpy (address, (char *) sq_msg_data (msg, 0) + 1, size);
    address [size] = 0;
    void *peer = zhashx_lookup (self->peers, address);
    if (!peer) {
        const char *endpoint = address;
        uint8_t key [32];
        bool keyed = address [0] == GOV_PEER_KEYED;
        if (keyed) {
            if (size < 41 || sq_key_from_z85 (address + 1, 40, key)) {
                sq_warn ("refusing a malformed peer address");
                return;
            }
            endpoint = address + 41;
        }
        //  Only TCP: a broker must not make us connect to inproc or ipc.
        if (strncmp (endpoint, "tcp://", 6) || zhashx_size (self->peers) >= S_MAX_PEERS) {
            sq_warn ("refusing peer endpoint '%s'", endpoint);
            return;
        }
        if (self->config->has_keys && !keyed) {
            sq_warn ("no key for peer '%s': nothing sent", endpoint);
            return;
        }
        peer = s_socket (self, ZMQ_PUSH);
        if (!peer
        ||  (keyed && self->config->has_keys
             && sq_curve_client (peer, self->config->public_key, self->config->secret_key, key))
        ||  zmq_connect (peer, endpoint)) {
            sq_warn ("cannot connect to peer '%s': %s", endpoint, zmq_strerror (errno));
            if (peer)
                zmq_close (peer);
            return;
        }
        zhashx_insert (self->peers, address, peer);
    }
    if (s_send_frames (peer, msg, 1))
        sq_warn ("queue to peer %s full: object dropped", address);
}

//  Routes one message from compute or balance by its first frame.
static void
s_route (receiver_t *self, sq_msg_t *msg)
{
    size_t size = sq_msg_size (msg, 0);
    const char *route = (const char *) sq_msg_data (msg, 0);
    if (size == strlen (GOV_DONE) && memcmp (route, GOV_DONE, size) == 0) {
        self->done++;
        if (self->exit_code < 0) {
            sq_error ("a governor thread stopped unexpectedly");
            self->exit_code = 1;
        }
    }
    else
    if (size == 1 && route [0] == GOV_ROUTE_BROKER && msg->n > 1)
        s_to_broker (self, msg, 1);
    else
    if (size == 1 && route [0] == GOV_ROUTE_SERVE && msg->n > 2)
        s_send_frames (self->serve, msg, 1);
    else
    if (size > 1 && route [0] == GOV_ROUTE_PEER && msg->n > 1)
        s_to_peer (self, msg);
}

static void
s_route_from (receiver_t *self, void *pipe)
{
    for (int i = 0; i < S_READ_BURST; i++) {
        if (sq_msg_recv (&self->msg, pipe, ZMQ_DONTWAIT, SQ_MAX_FRAMES + 2))
            break;
        if (self->msg.n > 0)
            s_route (self, &self->msg);
    }
    sq_msg_close (&self->msg);
}

//  Passes a message to compute behind a route frame; on a full pipe keeps
//  it as the stalled message. 0 passed, -1 stalled.
static int
s_pass (receiver_t *self, const char *route, size_t route_len, sq_msg_t *msg)
{
    if (zmq_send (self->compute, route, route_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        sq_msg_t swap = self->stalled;
        self->stalled = *msg;
        *msg = swap;
        if (route != self->stalled_route)
            memcpy (self->stalled_route, route, route_len);
        self->stalled_route_len = route_len;
        return -1;
    }
    s_send_frames (self->compute, msg, 0);
    sq_msg_close (msg);
    return 0;
}

static void
s_pass_byte (receiver_t *self, char route, sq_msg_t *msg)
{
    s_pass (self, &route, 1, msg);
}

//  --------------------------------------------------------------------------
//  The serve socket: with keys, a client reads or writes an object only
//  with the broker's capability for its own key (capability.h). Checked
//  here, before compute sees the request.

static void
s_serve_refuse (receiver_t *self, sq_msg_t *msg, uint32_t req, int code, const char *why)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_reply_encode_error (&w, req, code, why, 0, 0);
    sq_send (self->serve, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &w, NULL, 0, ZMQ_DONTWAIT);
    sq_wbuf_release (&w);
}

//  The serve socket's requests: where each carries the object (or run) it
//  names and its capability, and the right that capability must give.
typedef struct {
    uint32_t type;
    size_t key_at, capability_at;
    uint8_t right;
} s_serve_right_t;

#define S_SERVE_RIGHT(TYPE, type_t, key, right) \
    { TYPE, offsetof (type_t, key), offsetof (type_t, capability), right }
static const s_serve_right_t s_serve_rights [] = {
    S_SERVE_RIGHT (SQ_MSG_GREAD, sq_gread_t, key, SQ_CAP_READ),
    S_SERVE_RIGHT (SQ_MSG_GFETCH, sq_gfetch_t, key, SQ_CAP_READ),
    S_SERVE_RIGHT (SQ_MSG_LOGREAD, sq_logread_t, key, SQ_CAP_LOG),
    S_SERVE_RIGHT (SQ_MSG_RUNREAD, sq_runread_t, run, SQ_CAP_RUN),
    S_SERVE_RIGHT (SQ_MSG_PUT, sq_put_t, key, SQ_CAP_WRITE),
    S_SERVE_RIGHT (SQ_MSG_PUTLOCAL, sq_putlocal_t, key, SQ_CAP_WRITE),
};

//  Any of them, decoded.
typedef union {
    sq_gread_t gread;
    sq_gfetch_t gfetch;
    sq_logread_t logread;
    sq_runread_t runread;
    sq_put_t put;
    sq_putlocal_t putlocal;
} s_serve_msg_t;

//  True when the request may go on to compute.
static bool
s_serve_allowed (receiver_t *self, sq_msg_t *msg)
{
    if (!self->config->has_keys)
        return true;
    uint8_t client [32];
    if (msg->n < 2 || !s_user_key (&msg->frames [1], client) || !gate_admits (self->gate, GATE_SERVE, client))
        return false;           //  not admitted (any more): not answered
    uint32_t type = 0, req = 0;
    const void *data = sq_msg_data (msg, 1);
    size_t size = sq_msg_size (msg, 1);
    if (sq_proto_peek (data, size, &type, &req))
        return true;            //  compute refuses it
    const s_serve_right_t *what = NULL;
    for (size_t i = 0; i < sizeof s_serve_rights / sizeof s_serve_rights [0]; i++)
        if (s_serve_rights [i].type == type)
            what = &s_serve_rights [i];
    sq_errbuf_t err;
    s_serve_msg_t decoded;
    if (!what || sq_msg_decode (type, &decoded, data, size, &err))
        return true;            //  compute refuses it
    uint64_t key;
    mpr_str_t cap;
    memcpy (&key, (const char *) &decoded + what->key_at, sizeof key);
    memcpy (&cap, (const char *) &decoded + what->capability_at, sizeof cap);
    uint8_t right = what->right;
    const char *why = NULL;
    uint64_t now = (uint64_t) ((int64_t) sq_wall_ms () + self->clock_offset_ms);
    if (sq_cap_check (self->secret, client, key, right, now, (const uint8_t *) cap.ptr,
                      cap.len, &why) == 0)
        return true;
    s_serve_refuse (self, msg, req, SQ_E_DENIED, why);
    return false;
}

//  --------------------------------------------------------------------------
//  Receiving

static void s_broker_lost (receiver_t *self, const char *why);

//  What the broker told us in its welcome, first or on reattaching.
static void
s_take_welcome (receiver_t *self, const sq_welcome_t *welcome)
{
    self->heartbeat_ms = (int) welcome->heartbeat_ms;
    self->governor_id = welcome->id;
    self->inline_max = welcome->inline_max;
    snprintf (self->cluster, sizeof self->cluster, "%.*s", (int) welcome->cluster.len,
              welcome->cluster.ptr);
    if (welcome->secret.len)
        memcpy (self->secret, welcome->secret.ptr, SQ_SECRET_LEN);
    self->clock_offset_ms = (int64_t) welcome->broker_ms - (int64_t) sq_wall_ms ();
}

//  The broker's answer to a reattaching HELLO.
static void
s_on_welcome (receiver_t *self, sq_msg_t *msg)
{
    sq_reply_t reply;
    sq_welcome_t welcome;
    sq_errbuf_t err;
    if (sq_reply_decode (&reply, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &err)
    ||  reply.req != S_HELLO_REQ)
        return;
    if (reply.code != SQ_OK) {
        sq_error ("the broker refused us (error %u): %.*s", reply.code,
                  (int) reply.message.len, reply.message.ptr);
        self->exit_code = 1;
        return;
    }
    if (sq_welcome_decode (&welcome, true, reply.body, reply.body_size, &err)) {
        sq_error ("broker's HELLO reply is malformed: %s", err.text);
        self->exit_code = 1;
        return;
    }
    self->detached = false;
    s_take_welcome (self, &welcome);
    self->last_recv_ns = self->last_send_ns = task_now_ns ();
    if (!welcome.reattached) {
        //  It does not know us (no journal, another cluster): what we
        //  kept goes, and we start again as the governor it just made.
        sq_warn ("the broker does not take us back: starting afresh as governor %u", welcome.id);
        self->exit_code = GOV_AFRESH;
        return;
    }
    sq_info ("reattached as governor %u (epoch %llu; %llu messages for the broker were "
             "dropped meanwhile)", welcome.id, (unsigned long long) welcome.epoch,
             (unsigned long long) self->dropped);
    self->dropped = 0;
    //  Compute lists what it holds and runs; blocking: it reads its pipe.
    zmq_send (self->compute, GOV_REATTACH, strlen (GOV_REATTACH), 0);
}

static void
s_on_broker (receiver_t *self, sq_msg_t *msg)
{
    uint32_t type, req;
    if (msg->n == 1 && sq_msg_size (msg, 0) == 0)
        return;                 //  the broker probing the connection
    if (msg->n == 0 || msg->truncated
    ||  sq_proto_peek (sq_msg_data (msg, 0), sq_msg_size (msg, 0), &type, &req)) {
        sq_warn ("unreadable message from the broker; ignored");
        return;
    }
    if (self->detached) {
        if (type == SQ_MSG_REPLY)
            s_on_welcome (self, msg);
        return;                 //  nothing else counts before the welcome
    }
    if (type == SQ_MSG_ASSIGN || type == SQ_MSG_SEND || type == SQ_MSG_DROP || type == SQ_MSG_STOP
    ||  type == SQ_MSG_RETRACT || type == SQ_MSG_STREAM || type == SQ_MSG_UNSTREAM
    ||  type == SQ_MSG_LOGTAIL
    ||  type == SQ_MSG_REFRESH || type == SQ_MSG_GRUN)
        s_pass_byte (self, GOV_ROUTE_BROKER, msg);
    else
    if (type == SQ_MSG_KEYS)
        s_on_keys (self, msg);
    else
    if (type == SQ_MSG_BYE) {
        sq_info ("broker said BYE");
        self->broker_said_bye = true;
        self->exit_code = 0;
    }
    else
    if (type == SQ_MSG_LEAVE) {
        sq_info ("drained: the broker lets us leave");
        self->exit_code = 0;
        alarm (SQ_STOP_GRACE_S);
    }
    else
    if (type == SQ_MSG_REPLY) {
        //  The broker only replies to a governor's HELLO; a reply now means
        //  it does not know this connection (it restarted, or declared us
        //  dead).
        sq_reply_t reply;
        sq_errbuf_t err;
        if (sq_reply_decode (&reply, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &err) == 0
        &&  reply.code == SQ_E_HELLO)
            s_broker_lost (self, "the broker no longer knows this governor");
        else
            sq_warn ("unexpected reply from the broker; ignored");
    }
    else
    if (type != SQ_MSG_HEARTBEAT)
        sq_warn ("unexpected message type %u from the broker; ignored", type);
}

//  Data socket: with keys, only governors the broker admitted; their key
//  goes along to compute (CREDITs are sent back under it).
static void
s_on_data (receiver_t *self, sq_msg_t *msg)
{
    if (msg->n == 0 || msg->truncated)
        return;
    if (!self->config->has_keys) {
        s_pass_byte (self, GOV_ROUTE_DATA, msg);
        return;
    }
    uint8_t key [32];
    if (!s_user_key (&msg->frames [0], key) || !gate_admits (self->gate, GATE_DATA, key))
        return;                 //  a key removed since it connected
    char route [42];
    route [0] = GOV_ROUTE_DATA;
    zmq_z85_encode (route + 1, key, 32);     //  40 characters and a NUL, not sent
    s_pass (self, route, 41, msg);
}

static void
s_read (receiver_t *self, void *socket, char route)
{
    for (int i = 0; i < S_READ_BURST && self->stalled.n == 0 && self->exit_code < 0; i++) {
        if (sq_msg_recv (&self->msg, socket, ZMQ_DONTWAIT, SQ_MAX_FRAMES))
            break;
        if (route != GOV_ROUTE_BROKER)
            gate_identified (self->gate, route == GOV_ROUTE_DATA? GATE_DATA: GATE_SERVE,
                             self->msg.srcfd, (int64_t) (task_now_ns () / 1000000));
        if (route == GOV_ROUTE_BROKER) {
            self->last_recv_ns = task_now_ns ();
            s_on_broker (self, &self->msg);
        }
        else
        if (route == GOV_ROUTE_DATA)
            s_on_data (self, &self->msg);
        else
        if (self->msg.n > 0 && !self->msg.truncated && s_serve_allowed (self, &self->msg))
            s_pass_byte (self, route, &self->msg);
        sq_msg_close (&self->msg);
    }
}

static void
s_on_signal (receiver_t *self)
{
    struct signalfd_siginfo info;
    if (read (self->signal_fd, &info, sizeof info) == (ssize_t) sizeof info) {
        //  A first SIGTERM drains: the broker moves this governor's work
        //  and the objects only it holds elsewhere, then says LEAVE, and
        //  nothing is recomputed (an autoscaler's or Kubernetes' stop). A
        //  second one, SIGINT, or a governor not joined, stops at once.
        if (info.ssi_signo == SIGTERM && !self->draining && !self->detached
        &&  self->governor_id && self->config->drain_timeout_ms > 0) {
            self->draining = true;
            self->drain_deadline_ns = task_now_ns () + s_ms_to_ns (self->config->drain_timeout_ms);
            sq_wbuf_t w;
            sq_wbuf_init (&w);
            sq_bare_encode (&w, SQ_MSG_DRAIN);
            sq_send (self->ctrl, NULL, 0, &w, NULL, 0, ZMQ_DONTWAIT);
            sq_wbuf_release (&w);
            sq_info ("SIGTERM: draining (at most %d ms; a second SIGTERM stops at once)",
                     self->config->drain_timeout_ms);
            return;
        }
        sq_info ("signal %u: stopping", info.ssi_signo);
        self->exit_code = 0;
        //  Stopping is bounded: tasks are killed, sockets linger at most
        //  1 s; whatever still holds us after SQ_STOP_GRACE_S, main.c's
        //  SIGALRM handler ends.
        alarm (SQ_STOP_GRACE_S);
    }
}

//  --------------------------------------------------------------------------
//  Handshake

static void
s_send_hello (receiver_t *self, bool reattach)
{
    sq_resource_t resources [SQ_MAX_RESOURCES];
    resources [0] = (sq_resource_t) { { SQ_RES_CPUS, 4 }, self->config->cpus };
    uint32_t n = 1;
    bool has_memory = false;
    for (uint32_t i = 0; i < self->config->n_resources && n < SQ_MAX_RESOURCES; i++) {
        resources [n++] = self->config->resources [i];
        has_memory |= mpr_str_eq (self->config->resources [i].name, "memory");
    }
    //  Its memory is offered too, so that tasks asking for memory go where
    //  there is enough of it (--resource memory=N overrides).
    if (!has_memory && self->config->memory && n < SQ_MAX_RESOURCES)
        resources [n++] = (sq_resource_t) { { "memory", 6 }, self->config->memory };
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_hello_encode_governor (&w, S_HELLO_REQ, self->config->name, self->incarnation,
                              self->data_endpoint, self->serve_endpoint, resources, n,
                              reattach? self->cluster: NULL, self->governor_id);
    sq_send (self->ctrl, NULL, 0, &w, NULL, 0, ZMQ_DONTWAIT);
    sq_wbuf_release (&w);
    self->last_send_ns = task_now_ns ();
}

//  A new control connection and a HELLO that asks to reattach.
static void
s_reattach_hello (receiver_t *self)
{
    int zero = 0;
    zmq_setsockopt (self->ctrl, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close (self->ctrl);
    self->ctrl = NULL;
    if (s_connect (self)) {
        self->exit_code = 1;
        return;
    }
    s_send_hello (self, true);
    uint64_t now = task_now_ns ();
    self->next_hello_ns = now + s_ms_to_ns (self->backoff_ms);
    self->backoff_ms = self->backoff_ms * 2 > S_REATTACH_BACKOFF_MAX_MS
                     ? S_REATTACH_BACKOFF_MAX_MS: self->backoff_ms * 2;
}

//  The broker is lost. Within --broker-grace everything is kept: tasks run
//  on and their outputs stay in the store, while we ask a broker (the same,
//  or one restarted on its journal) to take us back. Without it, this
//  incarnation ends.
static void
s_broker_lost (receiver_t *self, const char *why)
{
    if (self->draining) {
        //  Stopping anyway: nothing to come back for.
        sq_warn ("%s while draining: stopping", why);
        self->exit_code = 0;
        return;
    }
    if (!self->config->reconnect) {
        sq_error ("%s: giving up (--no-reconnect)", why);
        self->exit_code = 3;
        return;
    }
    if (self->config->broker_grace_ms <= 0 || !self->cluster [0]) {
        sq_warn ("%s: reconnecting as a new governor", why);
        self->exit_code = GOV_RECONNECT;
        return;
    }
    if (!self->detached) {
        sq_warn ("%s: keeping tasks and objects for up to %d ms while asking to reattach",
                 why, self->config->broker_grace_ms);
        self->detached = true;
        self->detached_ns = task_now_ns ();
        self->backoff_ms = 250;
        self->dropped = 0;
    }
    s_reattach_hello (self);
}

//  Heartbeats when we were quiet; a silent broker is lost; while detached,
//  HELLO again with back-off until the grace is over.
static long
s_keepalive (receiver_t *self)
{
    uint64_t now = task_now_ns ();
    uint64_t ivl = s_ms_to_ns (self->heartbeat_ms);
    if (self->detached) {
        if (now - self->detached_ns > s_ms_to_ns (self->config->broker_grace_ms)) {
            sq_warn ("no broker took us back within %d ms: starting afresh",
                     self->config->broker_grace_ms);
            self->exit_code = GOV_RECONNECT;
            return 0;
        }
        if (now >= self->next_hello_ns)
            s_reattach_hello (self);
        return (long) ((self->next_hello_ns - now) / 1000000) + 1;
    }
    if (self->draining && now >= self->drain_deadline_ns) {
        sq_warn ("not drained within %d ms (--drain-timeout): leaving now",
                 self->config->drain_timeout_ms);
        self->exit_code = 0;
        alarm (SQ_STOP_GRACE_S);
        return 0;
    }
    if (self->stalled.n)
        self->last_recv_ns = now;       //  the broker may be talking; we are not listening
    //  A draining governor waits less for a silent broker: it was leaving.
    int missed = self->draining? 2: 5;
    if (now - self->last_recv_ns > (uint64_t) missed * ivl) {
        char why [120];
        snprintf (why, sizeof why, "no message from the broker for %d ms", missed * self->heartbeat_ms);
        s_broker_lost (self, why);
        return 0;
    }
    if (now - self->last_send_ns >= ivl) {
        sq_wbuf_t w;
        sq_wbuf_init (&w);
        sq_bare_encode (&w, SQ_MSG_HEARTBEAT);
        sq_send (self->ctrl, NULL, 0, &w, NULL, 0, ZMQ_DONTWAIT);
        sq_wbuf_release (&w);
        self->last_send_ns = now;
    }
    uint64_t next = self->last_send_ns + ivl;
    uint64_t dead = self->last_recv_ns + 5 * ivl;
    if (dead < next)
        next = dead;
    if (self->draining && self->drain_deadline_ns < next)
        next = self->drain_deadline_ns;
    return next > now? (long) ((next - now) / 1000000) + 1: 0;
}

int
receiver_run (receiver_t *self, void *compute, void *balance)
{
    self->compute = compute;
    self->balance = balance;
    self->last_recv_ns = self->last_send_ns = task_now_ns ();
    self->exit_code = -1;
    self->done = 0;
    while (self->exit_code < 0) {
        short net = self->stalled.n? 0: ZMQ_POLLIN;
        zmq_pollitem_t items [] = {
            { NULL, self->signal_fd, ZMQ_POLLIN, 0 },
            { compute, 0, ZMQ_POLLIN | (self->stalled.n? ZMQ_POLLOUT: 0), 0 },
            { balance, 0, ZMQ_POLLIN, 0 },
            { self->ctrl, 0, net, 0 },
            { self->data, 0, net, 0 },
            { self->serve, 0, net, 0 },
            { gate_monitor (self->gate, GATE_DATA), 0, ZMQ_POLLIN, 0 },
            { gate_monitor (self->gate, GATE_SERVE), 0, ZMQ_POLLIN, 0 },
            { gate_zap (self->gate), -1, ZMQ_POLLIN, 0 }
        };
        long timeout = s_keepalive (self);
        //  Unidentified connections are closed once idle (conns.h).
        if (timeout < 0 || timeout > 1000)
            timeout = 1000;
        if (zmq_poll (items, items [8].socket? 9: 8, timeout) < 0 && errno == ETERM)
            break;
        //  Connections first: one over a limit goes before it costs more.
        int64_t now_ms = (int64_t) (task_now_ns () / 1000000);
        for (int i = 0; i < 2; i++)
            if (items [6 + i].revents & ZMQ_POLLIN)
                gate_events (self->gate, i, now_ms);
        gate_tick (self->gate, now_ms);
        if (items [0].revents & ZMQ_POLLIN)
            s_on_signal (self);
        if (items [1].revents & ZMQ_POLLIN)
            s_route_from (self, compute);
        if (items [2].revents & ZMQ_POLLIN)
            s_route_from (self, balance);
        if (items [1].revents & ZMQ_POLLOUT)
            s_pass (self, self->stalled_route, self->stalled_route_len, &self->stalled);
        //  The broker's messages before handshakes: KEYS may admit them.
        if (items [3].revents & ZMQ_POLLIN)
            s_read (self, self->ctrl, GOV_ROUTE_BROKER);
        if (items [8].revents & ZMQ_POLLIN)
            gate_handle (self->gate, (int64_t) (task_now_ns () / 1000000));
        if (items [4].revents & ZMQ_POLLIN)
            s_read (self, self->data, GOV_ROUTE_DATA);
        if (items [5].revents & ZMQ_POLLIN)
            s_read (self, self->serve, GOV_ROUTE_SERVE);
    }
    return self->exit_code < 0? 1: self->exit_code;
}

void
receiver_stop (receiver_t *self)
{
    sq_msg_close (&self->stalled);
    bool told [2] = { false, false };
    void *pipes [2] = { self->compute, self->balance };
    while (self->done < 2) {
        zmq_pollitem_t items [3];
        for (int i = 0; i < 2; i++)
            items [i] = (zmq_pollitem_t) { pipes [i], 0, ZMQ_POLLIN | (told [i]? 0: ZMQ_POLLOUT), 0 };
        items [2] = (zmq_pollitem_t) { gate_zap (self->gate), -1, ZMQ_POLLIN, 0 };
        if (zmq_poll (items, items [2].socket? 3: 2, -1) < 0 && errno == ETERM)
            break;
        for (int i = 0; i < 2; i++) {
            if (items [i].revents & ZMQ_POLLIN)
                s_route_from (self, pipes [i]);
            if (!told [i] && (items [i].revents & ZMQ_POLLOUT)
            &&  zmq_send (pipes [i], GOV_TERM, strlen (GOV_TERM), ZMQ_DONTWAIT) >= 0)
                told [i] = true;
        }
        //  Peers connecting meanwhile must not wait on us for an answer.
        if (items [2].revents & ZMQ_POLLIN)
            gate_handle (self->gate, (int64_t) (task_now_ns () / 1000000));
    }
}

//  A monitor of ctrl's connection: a PAIR socket that reads its events.
static void *
s_ctrl_monitor (receiver_t *self)
{
    char endpoint [64];
    snprintf (endpoint, sizeof endpoint, "inproc://squall-ctrl-%p", (void *) self);
    if (zmq_socket_monitor (self->ctrl, endpoint, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED
                            | ZMQ_EVENT_CONNECT_DELAYED | ZMQ_EVENT_CONNECT_RETRIED))
        return NULL;
    void *monitor = zmq_socket (self->ctx, ZMQ_PAIR);
    if (monitor && zmq_connect (monitor, endpoint)) {
        zmq_close (monitor);
        monitor = NULL;
    }
    if (!monitor)
        zmq_socket_monitor (self->ctrl, NULL, 0);
    return monitor;
}

void
receiver_bye (receiver_t *self)
{
    if (self->broker_said_bye || self->detached)
        return;
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_bare_encode (&w, SQ_MSG_BYE);
    int rc = sq_send (self->ctrl, NULL, 0, &w, NULL, 0, ZMQ_DONTWAIT);
    sq_wbuf_release (&w);
    if (rc)
        return;
    //  The broker answers BYE after all it sent before. Reading up to it
    //  means no message is half-received when ctrl closes: libzmq 4.3
    //  loses such a half (a frame and its receive buffer) at close, as an
    //  ASSIGN with inline inputs sent while we stop would be. A broker
    //  that is gone (stopping with us) ends the wait at once: the monitor
    //  sees the connection drop, or libzmq retrying it every 100 ms; one
    //  that is there but silent costs two heartbeats, never over 1 s.
    void *monitor = s_ctrl_monitor (self);
    int wait_ms = self->heartbeat_ms < 500? 2 * self->heartbeat_ms: 1000;
    uint64_t deadline = task_now_ns () + s_ms_to_ns (wait_ms);
    bool answered = false, gone = false;
    for (uint64_t now = task_now_ns (); !answered && !gone && now < deadline; now = task_now_ns ()) {
        zmq_pollitem_t items [] = { { self->ctrl, 0, ZMQ_POLLIN, 0 }, { monitor, 0, ZMQ_POLLIN, 0 } };
        if (zmq_poll (items, monitor? 2: 1, (long) ((deadline - now) / 1000000) + 1) <= 0)
            continue;
        uint32_t type = 0, req;
        for (int i = 0; i < S_READ_BURST && !answered
                        && sq_msg_recv (&self->msg, self->ctrl, ZMQ_DONTWAIT, SQ_MAX_FRAMES) == 0; i++)
            answered = self->msg.n && sq_proto_peek (sq_msg_data (&self->msg, 0),
                                                     sq_msg_size (&self->msg, 0), &type, &req) == 0
                       && type == SQ_MSG_BYE;
        sq_msg_close (&self->msg);
        gone = !answered && monitor && (items [1].revents & ZMQ_POLLIN);
    }
    if (monitor) {
        zmq_socket_monitor (self->ctrl, NULL, 0);
        zmq_close (monitor);
    }
    if (!answered)
        sq_info ("the broker did not answer BYE (%s)", gone? "its connection is gone"
                                                          : "in two heartbeats");
}

static int
s_hello_reply (receiver_t *self, sq_msg_t *msg)
{
    sq_reply_t reply;
    sq_welcome_t welcome;
    sq_errbuf_t err;
    if (msg->n < 1 || sq_reply_decode (&reply, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &err)) {
        sq_warn ("unexpected message before the HELLO reply; ignored");
        return -1;
    }
    if (reply.req != S_HELLO_REQ)
        return -1;
    if (reply.code != 0) {
        sq_error ("broker refused HELLO (error %u): %.*s", reply.code,
                  (int) reply.message.len, reply.message.ptr);
        return 1;
    }
    if (sq_welcome_decode (&welcome, true, reply.body, reply.body_size, &err)) {
        sq_error ("broker's HELLO reply is malformed: %s", err.text);
        return 1;
    }
    if (self->config->has_keys && welcome.secret.len != SQ_SECRET_LEN) {
        sq_error ("the broker gave no capability secret: is it running without keys?");
        return 1;
    }
    s_take_welcome (self, &welcome);
    return 0;
}

int
receiver_hello (receiver_t *self, uint32_t *governor_id, uint64_t *inline_max)
{
    //  A new incarnation: everything of the last one is gone.
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    self->incarnation = (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
    self->cluster [0] = 0;
    s_send_hello (self, false);
    sq_info ("HELLO sent to %s (data %s, serve %s)", self->config->broker,
             self->data_endpoint, self->serve_endpoint);

    uint64_t deadline = task_now_ns () + 5 * s_ms_to_ns (self->heartbeat_ms);
    while (1) {
        uint64_t now = task_now_ns ();
        if (now >= deadline) {
            sq_error ("no answer from broker %s to HELLO", self->config->broker);
            return 3;
        }
        zmq_pollitem_t items [] = {
            { NULL, self->signal_fd, ZMQ_POLLIN, 0 }, { self->ctrl, 0, ZMQ_POLLIN, 0 }
        };
        if (zmq_poll (items, 2, (long) ((deadline - now) / 1000000) + 1) < 0 && errno == ETERM)
            return 1;
        if (items [0].revents & ZMQ_POLLIN) {
            s_on_signal (self);
            return -1;
        }
        if ((items [1].revents & ZMQ_POLLIN)
        &&  sq_msg_recv (&self->msg, self->ctrl, ZMQ_DONTWAIT, 16) == 0) {
            int rc = s_hello_reply (self, &self->msg);
            sq_msg_close (&self->msg);
            if (rc >= 0) {
                *governor_id = self->governor_id;
                *inline_max = self->inline_max;
                return rc;
            }
        }
    }
}

void
receiver_welcome (receiver_t *self, uint32_t *governor_id, uint64_t *inline_max)
{
    *governor_id = self->governor_id;
    *inline_max = self->inline_max;
}

int
receiver_heartbeat_ms (receiver_t *self)
{
    return self->heartbeat_ms;
}

const char *
receiver_data_endpoint (receiver_t *self)
{
    return self->data_endpoint;
}

const char *
receiver_serve_endpoint (receiver_t *self)
{
    return self->serve_endpoint;
}
