/*  balancer: periodic LOAD reports. */
#include "balancer.h"
#include "route.h"
#include "task.h"
#include "wire.h"
#include "log.h"
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define S_TICK_MS 250
#define S_MAX_SILENCE_NS 2000000000ull

struct _balancer_t {
    void *pipe;
    void *load;
    sq_load_t current;
    sq_load_t reported;
    uint64_t reported_ns;
    uint64_t next_tick_ns;
    bool terminated;
};

balancer_t *
balancer_new (void *pipe, void *load)
{
    balancer_t *self = (balancer_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = pipe;
    self->load = load;
    return self;
}

void
balancer_destroy (balancer_t **self_p)
{
    balancer_t *self = *self_p;
    if (!self)
        return;
    zmq_close (self->pipe);
    zmq_close (self->load);
    free (self);
    *self_p = NULL;
}

static void
s_on_load (balancer_t *self)
{
    sq_load_t load;
    int size;
    while ((size = zmq_recv (self->load, &load, sizeof load, ZMQ_DONTWAIT)) >= 0)
        if (size == (int) sizeof load)
            self->current = load;
}

static void
s_on_pipe (balancer_t *self)
{
    char text [16];
    int size;
    while ((size = zmq_recv (self->pipe, text, sizeof text, ZMQ_DONTWAIT)) >= 0)
        if (size == (int) strlen (GOV_TERM) && memcmp (text, GOV_TERM, (size_t) size) == 0)
            self->terminated = true;
}

static void
s_tick (balancer_t *self, uint64_t now)
{
    bool changed = memcmp (&self->current, &self->reported, sizeof self->current) != 0;
    if (!changed && now - self->reported_ns < S_MAX_SILENCE_NS)
        return;
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_load_encode (&w, &self->current);
    const char route = GOV_ROUTE_BROKER;
    if (sq_send (self->pipe, &route, 1, &w, NULL, 0, 0))
        sq_warn ("cannot pass LOAD on: %s", zmq_strerror (errno));
    sq_wbuf_release (&w);
    self->reported = self->current;
    self->reported_ns = now;
}

int
balancer_run (balancer_t *self)
{
    self->next_tick_ns = task_now_ns ();
    while (!self->terminated) {
        zmq_pollitem_t items [] = {
            { self->pipe, 0, ZMQ_POLLIN, 0 }, { self->load, 0, ZMQ_POLLIN, 0 }
        };
        uint64_t now = task_now_ns ();
        long timeout = self->next_tick_ns > now? (long) ((self->next_tick_ns - now) / 1000000) + 1: 0;
        if (zmq_poll (items, 2, timeout) < 0 && errno == ETERM)
            break;
        if (items [0].revents & ZMQ_POLLIN)
            s_on_pipe (self);
        if (items [1].revents & ZMQ_POLLIN)
            s_on_load (self);
        now = task_now_ns ();
        if (now >= self->next_tick_ns) {
            s_tick (self, now);
            self->next_tick_ns = now + S_TICK_MS * 1000000ull;
        }
    }
    return zmq_send (self->pipe, GOV_DONE, strlen (GOV_DONE), 0) < 0? -1: 0;
}
