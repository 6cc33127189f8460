/*  receiver: the network side of a governor. */
#include "receiver.h"
#include "task.h"
#include "wire.h"
#include "log.h"
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define S_NET_HWM 100000
#define S_READ_BURST 256
#define S_MAX_PEERS 4096

struct _receiver_t {
    void *ctx;
    const gov_config_t *config;
    int signal_fd;
    void *ctrl, *data, *serve;
    zhashx_t *peers;                //  endpoint -> PUSH socket
    void *compute, *balance;        //  pipes, during run and stop
    char data_endpoint [256];
    char serve_endpoint [256];
    int heartbeat_ms;
    uint64_t last_recv_ns;          //  from the broker
    uint64_t last_send_ns;          //  to the broker
    sq_msg_t msg;
    sq_msg_t stalled;               //  waiting for room in compute's pipe
    char stalled_route;
    int exit_code;                  //  -1 while running
    bool broker_said_bye;
    int done;                       //  GOV_DONE received (during stop)
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
    if (zmq_connect (self->ctrl, self->config->broker)) {
        sq_error ("cannot connect to broker %s: %s", self->config->broker, zmq_strerror (errno));
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
    self->data = s_socket (self, ZMQ_PULL);
    self->serve = s_socket (self, ZMQ_ROUTER);
    if (!self->peers || !self->data || !self->serve
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
    if (self->data)
        zmq_close (self->data);
    if (self->serve)
        zmq_close (self->serve);
    sq_msg_close (&self->msg);
    sq_msg_close (&self->stalled);
    free (self->msg.frames);
    free (self->stalled.frames);
    free (self);
    *self_p = NULL;
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
    if (s_send_frames (self->ctrl, msg, from))
        sq_warn ("broker queue full: message dropped (%s)", zmq_strerror (errno));
    self->last_send_ns = task_now_ns ();
}

static void
s_to_peer (receiver_t *self, sq_msg_t *msg)
{
    size_t size = sq_msg_size (msg, 0) - 1;
    char endpoint [SQ_MAX_NAME + 1];
    if (size > SQ_MAX_NAME || size < 7)
        return;
    memcpy (endpoint, (char *) sq_msg_data (msg, 0) + 1, size);
    endpoint [size] = 0;
    void *peer = zhashx_lookup (self->peers, endpoint);
    if (!peer) {
        //  Only TCP: a broker must not make us connect to inproc or ipc.
        if (strncmp (endpoint, "tcp://", 6) || zhashx_size (self->peers) >= S_MAX_PEERS) {
            sq_warn ("refusing peer endpoint '%s'", endpoint);
            return;
        }
        peer = s_socket (self, ZMQ_PUSH);
        if (!peer || zmq_connect (peer, endpoint)) {
            sq_warn ("cannot connect to peer '%s': %s", endpoint, zmq_strerror (errno));
            if (peer)
                zmq_close (peer);
            return;
        }
        zhashx_insert (self->peers, endpoint, peer);
    }
    if (s_send_frames (peer, msg, 1))
        sq_warn ("queue to peer %s full: object dropped", endpoint);
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
s_pass (receiver_t *self, char route, sq_msg_t *msg)
{
    if (zmq_send (self->compute, &route, 1, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        sq_msg_t swap = self->stalled;
        self->stalled = *msg;
        *msg = swap;
        self->stalled_route = route;
        return -1;
    }
    s_send_frames (self->compute, msg, 0);
    sq_msg_close (msg);
    return 0;
}

//  --------------------------------------------------------------------------
//  Receiving

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
    if (type == SQ_MSG_ASSIGN || type == SQ_MSG_SEND || type == SQ_MSG_DROP || type == SQ_MSG_STOP
    ||  type == SQ_MSG_RETRACT)
        s_pass (self, GOV_ROUTE_BROKER, msg);
    else
    if (type == SQ_MSG_BYE) {
        sq_info ("broker said BYE");
        self->broker_said_bye = true;
        self->exit_code = 0;
    }
    else
    if (type == SQ_MSG_REPLY) {
        //  The broker only replies to a governor's HELLO; a reply now means
        //  it does not know this connection (it restarted, or declared us
        //  dead): start again as a new governor.
        sq_reply_t reply;
        sq_errbuf_t err;
        if (sq_reply_decode (&reply, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &err) == 0
        &&  reply.code == SQ_E_HELLO) {
            sq_warn ("the broker no longer knows this governor: reconnecting");
            self->exit_code = self->config->reconnect? GOV_RECONNECT: 3;
        }
        else
            sq_warn ("unexpected reply from the broker; ignored");
    }
    else
    if (type != SQ_MSG_HEARTBEAT)
        sq_warn ("unexpected message type %u from the broker; ignored", type);
}

static void
s_read (receiver_t *self, void *socket, char route)
{
    for (int i = 0; i < S_READ_BURST && self->stalled.n == 0 && self->exit_code < 0; i++) {
        if (sq_msg_recv (&self->msg, socket, ZMQ_DONTWAIT, SQ_MAX_FRAMES))
            break;
        if (route == GOV_ROUTE_BROKER) {
            self->last_recv_ns = task_now_ns ();
            s_on_broker (self, &self->msg);
        }
        else
        if (self->msg.n > 0 && !self->msg.truncated)
            s_pass (self, route, &self->msg);
        sq_msg_close (&self->msg);
    }
}

static void
s_on_signal (receiver_t *self)
{
    struct signalfd_siginfo info;
    if (read (self->signal_fd, &info, sizeof info) == (ssize_t) sizeof info) {
        sq_info ("signal %u: stopping", info.ssi_signo);
        self->exit_code = 0;
    }
}

//  Heartbeats when we were quiet, exit 3 when the broker was.
static long
s_keepalive (receiver_t *self)
{
    uint64_t now = task_now_ns ();
    uint64_t ivl = s_ms_to_ns (self->heartbeat_ms);
    if (self->stalled.n)
        self->last_recv_ns = now;       //  the broker may be talking; we are not listening
    if (now - self->last_recv_ns > 5 * ivl) {
        sq_error ("no message from the broker for %d ms: %s", 5 * self->heartbeat_ms,
                  self->config->reconnect? "reconnecting": "giving up");
        self->exit_code = self->config->reconnect? GOV_RECONNECT: 3;
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
    return next > now? (long) ((next - now) / 1000000) + 1: 0;
}

int
receiver_run (receiver_t *self, void *compute, void *balance)
{
    self->compute = compute;
    self->balance = balance;
    self->last_recv_ns = self->last_send_ns = task_now_ns ();
    while (self->exit_code < 0) {
        short net = self->stalled.n? 0: ZMQ_POLLIN;
        zmq_pollitem_t items [] = {
            { NULL, self->signal_fd, ZMQ_POLLIN, 0 },
            { compute, 0, ZMQ_POLLIN | (self->stalled.n? ZMQ_POLLOUT: 0), 0 },
            { balance, 0, ZMQ_POLLIN, 0 },
            { self->ctrl, 0, net, 0 },
            { self->data, 0, net, 0 },
            { self->serve, 0, net, 0 }
        };
        if (zmq_poll (items, 6, s_keepalive (self)) < 0 && errno == ETERM)
            break;
        if (items [0].revents & ZMQ_POLLIN)
            s_on_signal (self);
        if (items [1].revents & ZMQ_POLLIN)
            s_route_from (self, compute);
        if (items [2].revents & ZMQ_POLLIN)
            s_route_from (self, balance);
        if (items [1].revents & ZMQ_POLLOUT)
            s_pass (self, self->stalled_route, &self->stalled);
        if (items [3].revents & ZMQ_POLLIN)
            s_read (self, self->ctrl, GOV_ROUTE_BROKER);
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
        zmq_pollitem_t items [2];
        for (int i = 0; i < 2; i++)
            items [i] = (zmq_pollitem_t) { pipes [i], 0, ZMQ_POLLIN | (told [i]? 0: ZMQ_POLLOUT), 0 };
        if (zmq_poll (items, 2, -1) < 0 && errno == ETERM)
            break;
        for (int i = 0; i < 2; i++) {
            if (items [i].revents & ZMQ_POLLIN)
                s_route_from (self, pipes [i]);
            if (!told [i] && (items [i].revents & ZMQ_POLLOUT)
            &&  zmq_send (pipes [i], GOV_TERM, strlen (GOV_TERM), ZMQ_DONTWAIT) >= 0)
                told [i] = true;
        }
    }
}

void
receiver_bye (receiver_t *self)
{
    if (self->broker_said_bye)
        return;
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_bare_encode (&w, SQ_MSG_BYE);
    sq_send (self->ctrl, NULL, 0, &w, NULL, 0, ZMQ_DONTWAIT);
    sq_wbuf_release (&w);
}

//  --------------------------------------------------------------------------
//  Handshake

static int
s_hello_reply (receiver_t *self, sq_msg_t *msg, uint32_t *governor_id, uint64_t *inline_max)
{
    sq_reply_t reply;
    sq_errbuf_t err;
    if (msg->n < 1 || sq_reply_decode (&reply, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &err)) {
        sq_warn ("unexpected message before the HELLO reply; ignored");
        return -1;
    }
    if (reply.req != 1)
        return -1;
    if (reply.code != 0) {
        sq_error ("broker refused HELLO (error %u): %.*s", reply.code,
                  (int) reply.message.len, reply.message.ptr);
        return 1;
    }
    mpr_t r;
    uint32_t hb = 0;
    mpr_init (&r, reply.body, reply.body_size);
    mpr_array_exact (&r, 3);
    mpr_u32 (&r, governor_id);
    mpr_u32 (&r, &hb);
    mpr_uint (&r, inline_max);
    if (!mpr_ok (&r) || hb == 0 || hb > 3600000) {
        sq_error ("broker's HELLO reply is malformed");
        return 1;
    }
    self->heartbeat_ms = (int) hb;
    return 0;
}

int
receiver_hello (receiver_t *self, uint32_t *governor_id, uint64_t *inline_max)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    uint64_t incarnation = (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
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
    sq_hello_encode_governor (&w, 1, self->config->name, incarnation, self->data_endpoint,
                              self->serve_endpoint, resources, n);
    sq_send (self->ctrl, NULL, 0, &w, NULL, 0, 0);
    sq_wbuf_release (&w);
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
            int rc = s_hello_reply (self, &self->msg, governor_id, inline_max);
            sq_msg_close (&self->msg);
            if (rc >= 0)
                return rc;
        }
    }
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
