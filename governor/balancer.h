/*  balancer: the balance thread, and the one place LOAD is made.

    The compute thread publishes its load (balancer_load_set, every turn of
    its loop, cheap) into a balancer_load_t: the latest value under a lock,
    not a queue, so nothing is dropped and nothing falls behind. The balance
    thread alone decides when the broker hears of it: every 250 ms when it
    changed, at least every 2 s. LOAD goes on the balance thread's own pipe
    to the receive thread, not on compute's: there it would queue behind
    compute's outbound UPDATEs and data-plane chunks (the receive thread
    drains that pipe S_READ_BURST messages a turn), and, sent by compute,
    it would leave only when the compute loop is idle.

    Ownership: balancer_new takes over the pipe when it succeeds (closed by
    balancer_destroy); the load cell is the caller's, made before and
    destroyed after both threads. */
#ifndef GOV_BALANCER_H
#define GOV_BALANCER_H

#include "proto.h"
#include <stdbool.h>

typedef struct _balancer_t balancer_t;
typedef struct _balancer_load_t balancer_load_t;

balancer_load_t *balancer_load_new (void);
void balancer_load_destroy (balancer_load_t **self_p);
//  The compute thread's load now (any thread; a copy is kept).
void balancer_load_set (balancer_load_t *self, const sq_load_t *load);
//  The last load set (all zeros before the first).
void balancer_load_get (balancer_load_t *self, sq_load_t *load);
//  Whether two loads say the same, field by field: a struct's padding
//  bytes (a future field narrower than 8 bytes) never count.
bool balancer_load_equal (const sq_load_t *a, const sq_load_t *b);

//  pipe: PAIR to the receive thread; load: where compute publishes.
balancer_t *balancer_new (void *pipe, balancer_load_t *load);
void balancer_destroy (balancer_t **self_p);
//  Runs until GOV_TERM, then sends GOV_DONE. 0 or -1.
int balancer_run (balancer_t *self);

#endif
