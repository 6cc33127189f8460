/*  uploads: constants a client uploaded straight to a governor (PUT), from
    the first of the two messages that speak of one to the second.

    The client's SUBMIT names the governor and the size (a claim), the
    governor reports UPLOADED when the bytes are complete (a confirmation);
    they travel different connections, so either may come first. The
    broker counts an upload as a copy only once both have come with the
    same governor and size: a claim alone may be a lying client, or a
    governor that restarted in between, and would leave its consumers
    waiting for ever; a confirmation alone is an upload whose SUBMIT was
    refused or never sent, and would stay on its governor. Each waits for
    the other at most `timeout_ms`; then the broker fails what depends on
    the claim, or drops the unclaimed bytes (uploads_expired).

    Deadlines are the arrival time plus one timeout, so arrival order is
    deadline order: a FIFO, no heap. At most UPLOADS_MAX wait at once.

    Ownership: the broker owns the table; it knows governors by id only and
    nothing of the graph. */
#ifndef SQ_UPLOADS_H
#define SQ_UPLOADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UPLOADS_MAX 100000

typedef struct _uploads_t uploads_t;

typedef enum {
    UPLOADS_WAITING,            //  kept until the other half, or its deadline
    UPLOADS_MATCHED,            //  the other half was there: same governor and size
    UPLOADS_MISMATCH,           //  the other half was there with another size
    UPLOADS_FULL,               //  no room: UPLOADS_MAX wait already
    UPLOADS_UNAWAITED           //  a confirmation for a claimed object nothing waits for
} uploads_result_t;

uploads_t *uploads_new (int64_t timeout_ms);
void uploads_destroy (uploads_t **self_p);
//  A SUBMIT claims an upload of `size` bytes on governor `gov`. A waiting
//  confirmation from another governor is replaced: *drop_gov receives that
//  governor (its bytes are nobody's), else 0. *other_size: the size a
//  mismatching confirmation said.
uploads_result_t uploads_claim (uploads_t *self, uint64_t key, uint32_t gov, uint64_t size,
                                int64_t now, uint32_t *drop_gov, uint64_t *other_size);
//  Governor `gov` confirms an upload of `size` bytes. claimed: whether the
//  graph has the object (its SUBMIT came). A confirmation nobody awaits
//  waits for its SUBMIT if the object is unknown, else is UPLOADS_UNAWAITED
//  (late, after its claim expired, or repeated). Returns UPLOADS_WAITING
//  also when a claim awaits it from another governor (*drop_gov = gov: its
//  bytes are nobody's). *other_size: the size a mismatching claim said.
uploads_result_t uploads_confirm (uploads_t *self, uint64_t key, uint32_t gov, uint64_t size,
                                  bool claimed, int64_t now, uint32_t *drop_gov,
                                  uint64_t *other_size);
//  The governor a claim of key awaits a confirmation from, 0 if none.
uint32_t uploads_awaited (uploads_t *self, uint64_t key);
//  Forgets whatever waits for key (its session closed, or it was dropped).
void uploads_forget (uploads_t *self, uint64_t key);
//  Pops the oldest entry past its deadline: 1 with its key, governor and
//  kind (claim: a SUBMIT never confirmed; else an upload never claimed),
//  0 when none is due.
int uploads_expired (uploads_t *self, int64_t now, uint64_t *key, uint32_t *gov, bool *claim);
//  ms (monotonic) of the next deadline, -1 if nothing waits.
int64_t uploads_next_deadline (uploads_t *self);
size_t uploads_count (uploads_t *self);

#endif
