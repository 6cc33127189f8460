/*  balancer: the balance thread's LOAD reports (balancer.h). */
#include "balancer.h"
#include "route.h"
#include "task.h"
#include "wire.h"
#include "log.h"
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define S_TICK_MS 250
#define S_MAX_SILENCE_NS 2000000000ull

struct _balancer_load_t {
    pthread_mutex_t lock;
    sq_load_t load;
};

balancer_load_t *
balancer_load_new (void)
{
    balancer_load_t *self = (balancer_load_t *) calloc (1, sizeof *self);
    if (self && pthread_mutex_init (&self->lock, NULL)) {
        free (self);
        return NULL;
    }
    return self;
}

void
balancer_load_destroy (balancer_load_t **self_p)
{
    balancer_load_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

void
balancer_load_set (balancer_load_t *self, const sq_load_t *load)
{
    pthread_mutex_lock (&self->lock);
    self->load = *load;
    pthread_mutex_unlock (&self->lock);
}

void
balancer_load_get (balancer_load_t *self, sq_load_t *load)
{
    pthread_mutex_lock (&self->lock);
    *load = self->load;
    pthread_mutex_unlock (&self->lock);
}

//  LOAD's fields today are eight u64 (no padding), so memcmp happened to be
//  right; a new field must be compared here, which the assertion enforces.
_Static_assert (sizeof (sq_load_t) == 8 * sizeof (uint64_t),
                "sq_load_t changed: compare its new field in balancer_load_equal");

bool
balancer_load_equal (const sq_load_t *a, const sq_load_t *b)
{
    return a->running == b->running && a->queued == b->queued
        && a->memory == b->memory && a->spilled == b->spilled
        && a->objects == b->objects && a->tasks == b->tasks
        && a->piped == b->piped && a->shared == b->shared;
}

struct _balancer_t {
    void *pipe;
    balancer_load_t *load;
    sq_load_t current;
    sq_load_t reported;
    uint64_t reported_ns;
    uint64_t next_tick_ns;
    bool terminated;
};

balancer_t *
balancer_new (void *pipe, balancer_load_t *load)
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
    free (self);
    *self_p = NULL;
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
    balancer_load_get (self->load, &self->current);
    bool changed = !balancer_load_equal (&self->current, &self->reported);
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
        zmq_pollitem_t items [] = { { self->pipe, 0, ZMQ_POLLIN, 0 } };
        uint64_t now = task_now_ns ();
        long timeout = self->next_tick_ns > now? (long) ((self->next_tick_ns - now) / 1000000) + 1: 0;
        if (zmq_poll (items, 1, timeout) < 0 && errno == ETERM)
            break;
        if (items [0].revents & ZMQ_POLLIN)
            s_on_pipe (self);
        now = task_now_ns ();
        if (now >= self->next_tick_ns) {
            s_tick (self, now);
            self->next_tick_ns = now + S_TICK_MS * 1000000ull;
        }
    }
    return zmq_send (self->pipe, GOV_DONE, strlen (GOV_DONE), 0) < 0? -1: 0;
}
