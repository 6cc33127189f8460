/*  journal: the broker's append-only log of what it cannot rebuild from its
    peers (--journal FILE; what is in it: persist.h, the format: record.h).

    Writing: records are packed into a buffer in memory during a reactor
    turn and written to the file (the kernel's page cache) with one write
    at the end of the turn, and before any reply leaves for a client, so a
    request the broker has acknowledged is in the file before the client
    hears of it: a broker that is killed loses nothing it acknowledged. A
    syncer thread makes the file durable with fdatasync every --journal-sync
    ms; the reactor never waits for the disk (the bounded buffer flushed
    between turns, and the syncer: why both, docs/architecture.md). A
    machine that loses power may lose the last --journal-sync ms.

    Compaction: when the file has grown past a bound and several times the
    live state (journal_compaction_due), the broker packs a snapshot of its
    live state (persist.c) and hands it over; the syncer writes it to a new
    file beside the journal and syncs it, while the reactor goes on
    appending to the old one and keeps a copy of what it appends; then the
    reactor appends that copy to the new file and renames it over the old.
    A crash at any point leaves one complete journal.

    Reading: journal_open replays every record in order; a torn or corrupt
    tail is cut off with a warning (the file is truncated at the last good
    record); a file that is not a squall journal is refused.

    Ownership: the broker owns the journal; snapshots handed to
    journal_compact are the journal's from then on. */
#ifndef SQ_JOURNAL_H
#define SQ_JOURNAL_H

#include "record.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _journal_t journal_t;

//  Called for every valid record at open, in order.
typedef void (journal_replay_fn) (void *arg, const sq_rec_t *record);

//  Opens (or creates) the journal. An existing one is replayed, its epoch
//  taken from it plus one (an EPOCH record says so); a new one gets a new
//  random cluster id and epoch 1. compact_min: no compaction below this
//  file size. NULL with a message on failure.
journal_t *journal_open (const char *path, int sync_ms, uint64_t compact_min,
                         journal_replay_fn *replay, void *arg, char *err, size_t err_size);
//  Writes what is buffered, waits for the syncer's last fdatasync, closes.
void journal_destroy (journal_t **self_p);

const char *journal_cluster (journal_t *self);
uint64_t journal_epoch (journal_t *self);
//  True if the file held records of an earlier run.
bool journal_restarted (journal_t *self);
//  Records: journal_begin, pack one body with journal_packer, journal_end.
msgpack_packer *journal_packer (journal_t *self);
size_t journal_begin (journal_t *self);
void journal_end (journal_t *self, size_t offset);
//  True when records wait to be written.
bool journal_pending (journal_t *self);
//  Writes what is buffered to the file. 0, or -1 (kept for the next try,
//  an error logged) when the file cannot be written.
int journal_flush (journal_t *self);
//  Compaction: whether one is worth it now (the file is past compact_min
//  and S_GROWTH times the last snapshot, the measure of the live state),
//  and starting one.
bool journal_compaction_due (journal_t *self);
void journal_compact (journal_t *self, msgpack_sbuffer *snapshot);
//  Once per turn: finishes a compaction whose snapshot is on disk.
void journal_tick (journal_t *self);

//  Figures for INFO and /metrics.
typedef struct {
    uint64_t bytes;             //  file size
    uint64_t records;           //  written since start
    uint64_t compactions;
    uint64_t syncs;
    uint64_t errors;            //  failed writes or syncs
} journal_stats_t;
void journal_stats (journal_t *self, journal_stats_t *stats);

#endif
