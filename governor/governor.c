/*  governor: start-up and shut-down of the three threads. */
#include "governor.h"
#include "route.h"
#include "receiver.h"
#include "compute.h"
#include "balancer.h"
#include "stream.h"
#include "log.h"
#include <errno.h>
#include <pthread.h>
#include <zmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _governor_t {
    const gov_config_t *config;
    void *ctx;
    unsigned pipes;             //  made so far: inproc names must not repeat,
                                //  a closed socket's name is freed late
};

governor_t *
governor_new (const gov_config_t *config)
{
    governor_t *self = (governor_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->config = config;
    self->ctx = zmq_ctx_new ();
    if (!self->ctx) {
        free (self);
        return NULL;
    }
    return self;
}

void
governor_destroy (governor_t **self_p)
{
    governor_t *self = *self_p;
    if (!self)
        return;
    zmq_ctx_term (self->ctx);
    free (self);
    *self_p = NULL;
}

//  A connected pair of PAIR sockets; the ends go to different threads.
static int
s_pipe (governor_t *self, const char *what, void **here, void **there)
{
    char endpoint [64];
    snprintf (endpoint, sizeof endpoint, "inproc://squall-%s-%p-%u", what, (void *) self,
              self->pipes++);
    *here = zmq_socket (self->ctx, ZMQ_PAIR);
    *there = zmq_socket (self->ctx, ZMQ_PAIR);
    int hwm = GOV_PIPE_HWM, linger = 0;
    for (int i = 0; i < 2; i++) {
        void *socket = i? *there: *here;
        if (!socket)
            continue;
        zmq_setsockopt (socket, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt (socket, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt (socket, ZMQ_LINGER, &linger, sizeof linger);
    }
    if (!*here || !*there || zmq_bind (*here, endpoint) || zmq_connect (*there, endpoint)) {
        sq_error ("cannot make inproc pipe %s: %s", what, zmq_strerror (errno));
        if (*here)
            zmq_close (*here);
        if (*there)
            zmq_close (*there);
        *here = *there = NULL;
        return -1;
    }
    return 0;
}

static void *
s_compute_main (void *args_)
{
    compute_args_t *args = (compute_args_t *) args_;
    compute_t *compute = compute_new (args);
    if (compute) {
        compute_run (compute);
        compute_destroy (&compute);
    }
    else {
        sq_error ("cannot start the compute thread (out of memory, or as said above)");
        zmq_send (args->pipe, GOV_DONE, strlen (GOV_DONE), 0);
        zmq_close (args->pipe);
    }
    return NULL;
}

typedef struct {
    void *pipe;
    balancer_load_t *load;
} s_balance_args_t;

static void *
s_balance_main (void *args_)
{
    s_balance_args_t *args = (s_balance_args_t *) args_;
    balancer_t *balancer = balancer_new (args->pipe, args->load);
    if (balancer) {
        balancer_run (balancer);
        balancer_destroy (&balancer);
    }
    else {
        sq_error ("cannot start the balance thread: out of memory");
        zmq_send (args->pipe, GOV_DONE, strlen (GOV_DONE), 0);
        zmq_close (args->pipe);
    }
    return NULL;
}

//  One incarnation: the compute and balance threads live as long as the
//  broker knows us. Returns receiver_run's code.
static int
s_incarnation (governor_t *self, receiver_t *receiver, const stream_dir_t *stream_dir,
               uint32_t governor_id, uint64_t inline_max)
{
    void *compute_here, *compute_there, *balance_here, *balance_there;
    balancer_load_t *load = balancer_load_new ();
    if (!load)
        return 1;
    if (s_pipe (self, "compute", &compute_here, &compute_there)
    ||  s_pipe (self, "balance", &balance_here, &balance_there)) {
        balancer_load_destroy (&load);
        return 1;
    }
    compute_args_t compute_args = {
        .pipe = compute_there, .load = load, .governor_id = governor_id,
        .cpus = self->config->cpus, .inline_max = inline_max, .workdir = self->config->workdir,
        .task_uid_first = self->config->task_uid_first,
        .broker_key = self->config->has_keys? self->config->broker_key: NULL,
        .task_uid_count = self->config->task_uid_count,
        .memory_limit = self->config->store_limit,
        .log_limit = self->config->log_limit,
        .box_memory = self->config->box_memory, .data_endpoint = receiver_data_endpoint (receiver),
        .n_resources = self->config->n_resources, .resources = self->config->resources,
        .gpus = self->config->gpus, .stream_dir = stream_dir
    };
    s_balance_args_t balance_args = { .pipe = balance_there, .load = load };
    pthread_t compute_thread, balance_thread;
    if (pthread_create (&compute_thread, NULL, s_compute_main, &compute_args)) {
        sq_error ("cannot start the compute thread");
        exit (1);
    }
    if (pthread_create (&balance_thread, NULL, s_balance_main, &balance_args)) {
        sq_error ("cannot start the balance thread");
        exit (1);
    }
    int code = receiver_run (receiver, compute_here, balance_here);
    receiver_stop (receiver);
    pthread_join (compute_thread, NULL);
    pthread_join (balance_thread, NULL);
    zmq_close (compute_here);
    zmq_close (balance_here);
    balancer_load_destroy (&load);
    return code;
}

//  Waits ms, or until a signal arrives (returns true then).
static bool
s_backoff (int signal_fd, int ms)
{
    zmq_pollitem_t item = { NULL, signal_fd, ZMQ_POLLIN, 0 };
    return zmq_poll (&item, 1, ms) > 0;
}

int
governor_run (governor_t *self, int signal_fd)
{
    receiver_t *receiver = receiver_new (self->ctx, self->config, signal_fd);
    if (!receiver)
        return 1;
    //  Our socket is there before the broker can name us as a reader.
    stream_dir_t *stream_dir = NULL;
    if (self->config->stream_dir && *self->config->stream_dir
    &&  !(stream_dir = stream_dir_new (self->config->stream_dir,
                                       receiver_data_endpoint (receiver),
                                       receiver_serve_endpoint (receiver)))) {
        receiver_destroy (&receiver);
        return 1;
    }
    int code, backoff_ms = 250;
    bool welcomed = false;
    while (1) {
        uint32_t governor_id = 0;
        uint64_t inline_max = SQ_DEFAULT_INLINE_MAX;
        if (welcomed)
            receiver_welcome (receiver, &governor_id, &inline_max);
        code = welcomed? 0: receiver_hello (receiver, &governor_id, &inline_max);
        welcomed = false;
        if (code < 0) {
            code = 0;               //  a signal while waiting
            break;
        }
        if (code == 3 && self->config->reconnect) {
            //  No broker there (yet, or again): try again, backing off.
            sq_info ("broker %s not answering; next try in %d ms", self->config->broker, backoff_ms);
            if (s_backoff (signal_fd, backoff_ms) || receiver_reconnect (receiver)) {
                code = 0;
                break;
            }
            backoff_ms = backoff_ms * 2 > 10000? 10000: backoff_ms * 2;
            continue;
        }
        if (code != 0)
            break;
        backoff_ms = 250;
        printf ("READY %u %s\n", governor_id, self->config->name);
        fflush (stdout);
        sq_info ("accepted as governor %u (heartbeat %d ms, inline max %lu)", governor_id,
                 receiver_heartbeat_ms (receiver), (unsigned long) inline_max);
        code = s_incarnation (self, receiver, stream_dir, governor_id, inline_max);
        if (code == GOV_AFRESH) {
            welcomed = true;    //  the next incarnation starts with that welcome
            continue;
        }
        if (code != GOV_RECONNECT)
            break;
        //  Everything this incarnation held went with its compute thread.
        if (receiver_reconnect (receiver)) {
            code = 1;
            break;
        }
    }
    if (code != 3)
        receiver_bye (receiver);
    receiver_destroy (&receiver);
    stream_dir_destroy (&stream_dir);
    return code;
}
