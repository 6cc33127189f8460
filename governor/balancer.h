/*  balancer: the balance thread. Today it turns the compute thread's load
    notes into LOAD messages for the broker (every 250 ms when they changed,
    at least every 2 s); work stealing will live here too, which is why it is
    a thread of its own with its own loop.

    Ownership: balancer_new takes over both inproc sockets when it succeeds;
    balancer_destroy closes them. */
#ifndef GOV_BALANCER_H
#define GOV_BALANCER_H

typedef struct _balancer_t balancer_t;

//  pipe: PAIR to the receive thread; load: PAIR from the compute thread
//  (each message a raw sq_load_t).
balancer_t *balancer_new (void *pipe, void *load);
void balancer_destroy (balancer_t **self_p);
//  Runs until GOV_TERM, then sends GOV_DONE. 0 or -1.
int balancer_run (balancer_t *self);

#endif
