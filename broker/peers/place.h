/*  place: objects moved by hand (docs/protocol.md, PLACE and DELETE).

    PLACE copies a finished object to the governors a client names and/or
    to as many as it asks for (replicate), optionally dropping every other
    copy once those are there (move), or with nothing asked only says where
    the object is (who has it). The copies are ordered at once, as the
    scheduler's own are (SEND); the reply waits until they have arrived, so
    that a client that replicates before a broadcast join knows the copies
    are there. Parked requests are bounded (PLACE_MAX, and each counts as
    one of its client's outstanding requests) and answered with an error
    when a copy cannot be had (its governor left, the object failed or was
    deleted, the session closed) or at their timeout.

    DELETE frees objects at once, whoever keeps them (graph_object_delete):
    the tasks that still need them fail, naming the object.

    Ownership: the parked requests are the broker's (broker_t.places);
    everything else is the graph's. One thread: the broker's. */
#ifndef SQ_PLACE_H
#define SQ_PLACE_H

#include "broker_internal.h"

#define PLACE_MAX 1024          //  PLACE requests waiting for their copies

//  PLACE from a client, on one of its sessions.
void place_request (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session);
//  DELETE from a client: every id is checked before anything changes.
void place_delete (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session);
//  A copy of `object` arrived somewhere, or one was lost: parked requests
//  on it may be done.
void place_object_changed (broker_t *self, object_t *object);
//  Timeouts, governors gone, sessions closed. Returns when it wants to run
//  next (-1: nothing parked).
int64_t place_tick (broker_t *self, int64_t now);
//  Frees what is parked (broker stopping).
void place_destroy_all (broker_t *self);

#endif
