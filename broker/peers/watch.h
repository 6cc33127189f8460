/*  watch: client requests that wait for the graph (WAIT and FETCH), the
    answer to the seed's open question about waits and fetches of
    unfinished data: they are parked here, on the tasks they depend on, and
    answered the moment those tasks reach a final state, or at their
    deadline. Nothing polls.

    Every id a client waits on is resolved at once to the task deciding it
    (an object's producer; constants are done at once), so the answer does
    not depend on whether an unkept object was freed meanwhile.

    Ownership: the registry owns the watches. Clients are opaque pointers
    owned by the broker; watches_drop_client must be called before a client
    is freed, watches_drop_session before its session is closed. */
#ifndef SQ_WATCH_H
#define SQ_WATCH_H

#include "graph.h"
#include "wire.h"

typedef struct _watches_t watches_t;

typedef struct {
    void *arg;
    //  Sends a complete reply (frame 0 in header, optional payload frame).
    void (*reply) (void *arg, void *client, sq_wbuf_t *header, zmq_msg_t *payload);
    //  A watch of this client ended (answered, expired or dropped).
    void (*released) (void *arg, void *client);
    //  Packs a FETCH reply's `where` for a client: the governor holding
    //  the object, and whatever that client needs to read it there.
    void (*where) (void *arg, void *client, object_t *object, gov_t *gov, msgpack_packer *pk);
} watches_hooks_t;

watches_t *watches_new (graph_t *graph, const watches_hooks_t *hooks);
void watches_destroy (watches_t **self_p);

//  Registers a WAIT (or answers it at once). deadline: ms on the monotonic
//  clock, < 0 for none. The hooks' released is called when it ends.
void watches_wait (watches_t *self, void *client, uint32_t req, session_t *session,
                   uint32_t mode, const uint32_t *ids, uint32_t n_ids, int64_t deadline);
void watches_fetch (watches_t *self, void *client, uint32_t req, session_t *session,
                    uint32_t id, int64_t deadline);
//  A task reached a final state.
void watches_task_done (watches_t *self, task_t *task);
//  Answers every watch whose deadline passed; returns the next deadline
//  (< 0 if none).
int64_t watches_expire (watches_t *self, int64_t now);
void watches_drop_client (watches_t *self, void *client);
//  Answers the session's pending watches with SQ_E_SESSION.
void watches_drop_session (watches_t *self, session_t *session);
size_t watches_count (watches_t *self);

#endif
