/*  persist: what the broker writes to its journal, and how it reads it back
    (issue: a broker restart loses nothing; docs/architecture.md).

    Journaled: what the broker cannot rebuild from its peers. Sessions
    (their token and owner), every accepted SUBMIT as it came (tasks,
    objects, inline constants), KEEP / UNKEEP, CANCEL, session closes, task
    finishes (output sizes and the inline bytes the broker holds) and first
    failures, the attempt counters of retried tasks, governors joining and
    leaving, and the id counters. Not journaled: where copies are (the
    governors say so when they reattach), assignments (a reattaching
    governor says what it runs), waits and fetches (clients re-send them).

    Replay (journal_open calls persist_replay for each record) rebuilds
    sessions and graphs through the same graph functions live requests use,
    with every effect on governors suppressed. persist_snapshot packs the
    live state as records for compaction: each open session as one SUBMIT
    and its finishes and failures.

    Ownership: the broker owns it; it borrows the graph and the journal. */
#ifndef SQ_PERSIST_H
#define SQ_PERSIST_H

#include "graph.h"
#include "journal.h"
#include "wire.h"

typedef struct _persist_t persist_t;

//  A governor the journal knows: it may come back and reattach.
typedef struct {
    uint32_t id;
    uint64_t incarnation;
    char *name;
    char *key;                  //  Z85, NULL without keys
    bool expected;              //  connected when the journal ended: expected back
} persist_gov_t;

persist_t *persist_new (graph_t *graph);
void persist_destroy (persist_t **self_p);
//  The journal records go to from now on (NULL: none).
void persist_attach (persist_t *self, journal_t *journal);
bool persist_on (persist_t *self);
//  Whether the journal is being replayed now.
bool persist_replaying (persist_t *self);

//  journal_replay_fn: arg is the persist_t.
void persist_replay (void *arg, const sq_rec_t *record);
//  After the last record: attempts of unfinished tasks move past any an
//  earlier life may have handed out; sessions wait for their clients.
void persist_replayed (persist_t *self, int64_t now);
uint32_t persist_next_peer (persist_t *self);

//  Records (no-ops without a journal)
void persist_session (persist_t *self, session_t *session);
void persist_submit (persist_t *self, uint32_t session, sq_msg_t *msg);
void persist_ids (persist_t *self, uint32_t type, uint32_t session, const uint32_t *ids,
                  uint32_t n);
void persist_close (persist_t *self, uint32_t session);
//  A record packed by one of record.h's packers from rec (ELEMENT, RESUBMIT).
void persist_record (persist_t *self, void (*pack) (msgpack_packer *, const sq_rec_t *),
                     const sq_rec_t *rec);
//  A task reached a final state: FINISHED, or FAILED if it failed first.
void persist_task_done (persist_t *self, task_t *task);
//  Its retry counters or memory request changed.
void persist_attempt (persist_t *self, task_t *task);
//  A governor joined (it is remembered, so that it may reattach) or left
//  for good (forgotten).
void persist_governor (persist_t *self, uint32_t id, uint64_t incarnation, const char *name,
                       const char *key);
void persist_gone (persist_t *self, uint32_t id);

//  Governors known from the journal
persist_gov_t *persist_known (persist_t *self, uint32_t id);
//  Those connected when the journal ended that have not reattached yet.
size_t persist_expected (persist_t *self);
void persist_reattached (persist_t *self, uint32_t id);
//  Gives up on every governor not back yet.
void persist_expect_none (persist_t *self);

//  The live state as a whole journal file: magic, header, counters,
//  governors (connected or expected back), sessions. The caller hands the
//  buffer to journal_compact.
msgpack_sbuffer *persist_snapshot (persist_t *self, const char *cluster, uint64_t epoch,
                                   uint32_t next_peer);

#endif
