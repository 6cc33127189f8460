/*  test_broker_journal: the broker's journal, in-process (broker/persist/journal.c,
    broker/persist/persist.c, common/record.c).

    A journal written through the broker's own record functions (sessions,
    SUBMITs with constants, keeps, finishes with inline bytes, failures,
    retries, governors, a closed session) replays into a fresh graph with
    the same state. Then, as after a crash or a bad disk:
    - truncated at every byte offset of its last records, it loads, the
      torn tail cut off (the file is shortened to the last whole record)
      and the records before it replayed;
    - with any one byte flipped, it loads what precedes the damage or is
      refused with a message, never crashes (under ASan: never reads out
      of bounds or leaks);
    - a file that is not a journal is refused and left untouched.
    Compaction writes a snapshot of the live state and the records that
    came meanwhile; the compacted journal replays to the same state, and
    is smaller when sessions were closed.
*/
#include "graph.h"
#include "persist.h"
#include "journal.h"
#include "capability.h"
#include "log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

static char s_dir [256];
static persist_t *s_persist;    //  the one the graph hooks write through

static bool s_yes (void *arg, mpr_str_t name, uint64_t amount) { (void) arg; (void) name; (void) amount; return true; }

static void s_ready (void *arg, task_t *task) { (void) arg; (void) task; }
static void s_stop (void *arg, task_t *task) { (void) arg; (void) task; }
static void s_done (void *arg, task_t *task) { (void) arg; if (s_persist) persist_task_done (s_persist, task); }
static void s_drop (void *arg, object_t *object) { (void) arg; (void) object; }
static void s_copy (void *arg, object_t *o, gov_t *a, gov_t *b) { (void) arg; (void) o; (void) a; (void) b; }

static graph_t *
s_graph (void)
{
    graph_hooks_t hooks = { NULL, s_ready, s_stop, s_done, s_drop, s_copy, NULL };
    graph_t *graph = graph_new (&hooks);
    CHECK (graph, "graph");
    return graph;
}

//  A SUBMIT as a client sends it: constant 1 (inline bytes), tasks 2, 4,
//  6 (concat of 1; concat of 3; noop of 5), outputs 3, 5, 7 kept.
static void
s_submit (graph_t *graph, persist_t *persist, session_t *session)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_pack_submit_begin (&w.pk, 1, session->id);
    msgpack_pack_array (&w.pk, 4);
    sq_pack_object_spec (&w.pk, 1, 0, "text/plain", 1, "");
    for (uint32_t id = 3; id <= 7; id += 2)
        sq_pack_object_spec (&w.pk, id, SQ_OBJ_KEEP, "", -1, "");
    msgpack_pack_array (&w.pk, 3);
    for (uint32_t t = 2; t <= 6; t += 2) {
        uint32_t in [1] = { t - 1 }, out [1] = { t + 1 }, govs [2] = { 9, 11 };
        sq_task_spec_t spec = { .id = t, .kind = { t == 6? "noop": "concat", t == 6? 4: 6 },
                                .n_inputs = 1, .inputs = in, .n_outputs = 1, .outputs = out,
                                .max_retries = 2,
                                //  task 4 names its governors (SUBMIT's options)
                                .n_governors = t == 4? 2: 0, .governors = govs,
                                .loose = t == 4 };
        sq_pack_task_spec (&w.pk, &spec);
    }
    //  As it would come off the ROUTER: identity, header, payload.
    sq_msg_t msg;
    sq_msg_init (&msg);
    msg.frames = (zmq_msg_t *) calloc (3, sizeof (zmq_msg_t));
    msg.cap = msg.n = 3;
    zmq_msg_init_size (&msg.frames [0], 5);
    memcpy (zmq_msg_data (&msg.frames [0]), "peer1", 5);
    zmq_msg_init_size (&msg.frames [1], w.buf.size);
    memcpy (zmq_msg_data (&msg.frames [1]), w.buf.data, w.buf.size);
    zmq_msg_init_size (&msg.frames [2], 14);
    memcpy (zmq_msg_data (&msg.frames [2]), "hello, squall\n", 14);
    sq_submit_t submit;
    sq_errbuf_t err;
    CHECK (sq_submit_decode (&submit, w.buf.data, w.buf.size, &err) == 0, "%s", err.text);
    char message [300];
    uint32_t bad;
    CHECK (graph_submit (graph, session, &submit, msg.frames + 2, 1, s_yes, NULL, message,
                         sizeof message, &bad) == 0, "submit: %s", message);
    persist_submit (persist, session->id, &msg);
    sq_submit_release (&submit);
    sq_msg_release (&msg);
    sq_wbuf_release (&w);
}

//  What a replayed graph looks like, to compare.
typedef struct {
    uint64_t epoch;             //  of the journal, as opened
    size_t sessions;
    uint64_t counts [TASK_STATE_COUNT_];
    uint32_t attempt4;          //  task 4's attempt (a retry was journaled)
    bool governors4;            //  task 4's governors and looseness came back
    uint64_t size3;             //  object 3's size
    bool data3;                 //  its inline bytes came back
    bool deleted1;              //  constant 1 was deleted by hand (DELETE)
} s_state_t;

static void
s_state (graph_t *graph, uint32_t session_id, s_state_t *st)
{
    memset (st, 0, sizeof *st);
    st->sessions = graph_session_count (graph);
    for (int s = 0; s < TASK_STATE_COUNT_; s++)
        st->counts [s] = graph_task_count (graph, (task_state_t) s);
    task_t *t4 = graph_task (graph, sq_key (session_id, 4));
    st->attempt4 = t4? t4->attempt: 0;
    const task_extra_t *x4 = t4? task_extra (t4): NULL;
    st->governors4 = x4 && x4->n_governors == 2 && x4->governors [0] == 9
                  && x4->governors [1] == 11 && x4->loose;
    object_t *o3 = graph_object (graph, sq_key (session_id, 3));
    st->size3 = o3? o3->size: 0;
    object_t *o1 = graph_object (graph, sq_key (session_id, 1));
    st->deleted1 = o1 && o1->state == OBJ_FAILED && o1->failure
                && o1->failure->code == SQ_E_DELETED && !o1->data;
    st->data3 = o3 && o3->data && sq_blob_size (o3->data) == 14
             && memcmp (sq_blob_data (o3->data), "hello, squall\n", 14) == 0;
}

//  Writes the test journal at path; returns the state it describes.
static void
s_write_journal (const char *path, s_state_t *want, uint32_t *live_session)
{
    char err [600];
    unlink (path);
    graph_t *graph = s_graph ();
    persist_t *persist = persist_new (graph);
    journal_t *journal = journal_open (path, 1000, 64u << 20, persist_replay, persist, err, sizeof err);
    CHECK (journal && !journal_restarted (journal), "new journal: %s", err);
    persist_attach (persist, journal);
    s_persist = persist;
    persist_governor (persist, 1, 111, "g1", "key-of-g1-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    persist_governor (persist, 2, 222, "g2", NULL);
    //  A session closed later (compaction forgets it) and one that stays.
    session_t *gone = graph_session_open (graph, NULL);
    sq_random (gone->token, SQ_TOKEN_LEN);
    persist_session (persist, gone);
    s_submit (graph, persist, gone);
    session_t *s = graph_session_open (graph, NULL);
    s->tenant = strdup ("alice");
    s->owner = strdup ("alice-key");
    sq_random (s->token, SQ_TOKEN_LEN);
    persist_session (persist, s);
    s_submit (graph, persist, s);
    uint32_t ids [1] = { 7 };
    graph_keep (graph, graph_object (graph, sq_key (s->id, 7)), false);
    persist_ids (persist, SQ_REC_UNKEEP, s->id, ids, 1);
    //  Task 2 finished (output 3 inline: its bytes go in the record).
    task_t *t2 = graph_task (graph, sq_key (s->id, 2));
    uint64_t size = 14;
    sq_blob_t *data [1] = { sq_blob_copy ("hello, squall\n", 14) };
    graph_task_restore_finished (graph, t2, NULL, 0, &size, data, 1);
    //  Task 4 failed once and was retried (attempt 1), then failed for good.
    task_t *t4 = graph_task (graph, sq_key (s->id, 4));
    graph_task_extra (t4)->retries = 1;
    t4->attempt = 1;
    persist_attempt (persist, t4);
    graph_task_failed (graph, t4, SQ_E_TASK_FAILED, "boom");
    //  The constant deleted by hand: it must stay deleted, not come back
    //  with the SUBMIT that declared it.
    uint32_t one [1] = { 1 };
    CHECK (graph_object_delete (graph, graph_object (graph, sq_key (s->id, 1)), "deleted") == 0,
           "delete");
    persist_ids (persist, SQ_REC_DELETE, s->id, one, 1);
    persist_gone (persist, 2);
    uint32_t gone_id = gone->id;
    graph_session_close (graph, &gone);
    persist_close (persist, gone_id);
    CHECK (journal_flush (journal) == 0, "flush");
    s_state (graph, s->id, want);
    *live_session = s->id;
    journal_destroy (&journal);
    s_persist = NULL;
    persist_destroy (&persist);
    graph_destroy (&graph);
}

//  Opens (replays) a journal file into a fresh graph. 0 with the state, or
//  -1 with the message.
static int
s_load (const char *path, uint32_t session, s_state_t *st, char *err, size_t err_size,
        size_t *expected_govs)
{
    graph_t *graph = s_graph ();
    persist_t *persist = persist_new (graph);
    journal_t *journal = journal_open (path, 1000, 64u << 20, persist_replay, persist, err, err_size);
    int rc = -1;
    if (journal) {
        persist_replayed (persist, 0);
        s_state (graph, session, st);
        st->epoch = journal_epoch (journal);
        if (expected_govs)
            *expected_govs = persist_expected (persist);
        rc = 0;
        journal_destroy (&journal);
    }
    persist_destroy (&persist);
    graph_destroy (&graph);
    return rc;
}

static void
s_copy_prefix (const char *from, const char *to, size_t bytes, long flip)
{
    int in = open (from, O_RDONLY), out = open (to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK (in >= 0 && out >= 0, "files");
    char *buf = (char *) malloc (bytes + 1);
    CHECK (read (in, buf, bytes) == (ssize_t) bytes, "read");
    if (flip >= 0)
        buf [flip] ^= 0x5a;
    CHECK (write (out, buf, bytes) == (ssize_t) bytes, "write");
    free (buf);
    close (in);
    close (out);
}

static size_t
s_file_size (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0? (size_t) st.st_size: 0;
}

int
main (void)
{
    sq_log_set_level (SQ_LOG_ERROR);    //  cut tails warn by the thousand
    snprintf (s_dir, sizeof s_dir, "%s/squall-journal-test-XXXXXX",
              access ("/dev/shm", W_OK) == 0? "/dev/shm": "/tmp");
    CHECK (mkdtemp (s_dir), "mkdtemp");
    char path [300], copy [300], err [600];
    snprintf (path, sizeof path, "%s/journal", s_dir);
    snprintf (copy, sizeof copy, "%s/copy", s_dir);

    //  Written and read back whole.
    s_state_t want, got;
    uint32_t session;
    s_write_journal (path, &want, &session);
    CHECK (want.counts [TASK_FINISHED] == 1 && want.counts [TASK_FAILED] == 2 && want.data3
           && want.attempt4 == 1 && want.sessions == 1 && want.deleted1 && want.governors4, "the written state");
    size_t govs = 0;
    CHECK (s_load (path, session, &got, err, sizeof err, &govs) == 0, "reload: %s", err);
    CHECK (got.sessions == 1 && memcmp (got.counts, want.counts, sizeof got.counts) == 0
           && got.data3 && got.size3 == 14 && got.attempt4 == 1 && govs == 1 && got.deleted1
           && got.governors4,
           "the replayed graph is the written one (sessions %zu, finished %llu, failed %llu, "
           "data %d, attempt %u, governors expected %zu)", got.sessions,
           (unsigned long long) got.counts [TASK_FINISHED],
           (unsigned long long) got.counts [TASK_FAILED], got.data3, got.attempt4, govs);
    printf ("  ok: a journal of every record type replays to the same graph\n");
    //  The reload appended an EPOCH record: take the length before it.
    s_write_journal (path, &want, &session);
    size_t full = s_file_size (path);

    //  Torn at every offset of the last records: the last ~300 bytes hold
    //  the close, a governor gone, a failure, a retry.
    size_t first = full > 400? full - 400: 9;
    for (size_t n = first; n < full; n++) {
        s_copy_prefix (path, copy, n, -1);
        CHECK (s_load (copy, session, &got, err, sizeof err, NULL) == 0,
               "a journal cut at byte %zu of %zu loads: %s", n, full, err);
        CHECK (got.sessions >= 1 && got.counts [TASK_FINISHED] <= 1, "a prefix of the state");
        //  The torn tail was cut off before the new EPOCH record went in:
        //  otherwise the next load would stop at the tear and miss it.
        s_state_t again;
        CHECK (s_load (copy, session, &again, err, sizeof err, NULL) == 0
               && again.epoch == got.epoch + 1
               && memcmp (again.counts, got.counts, sizeof got.counts) == 0,
               "cut at %zu: loaded again, the same state in the next epoch (%llu, %llu)", n,
               (unsigned long long) got.epoch, (unsigned long long) again.epoch);
    }
    printf ("  ok: cut at each of the last %zu byte offsets, the journal loads its whole records\n",
            full - first);
    //  Cut in the header: a new journal (nothing of it was whole).
    for (size_t n = 0; n < 30 && n < full; n++) {
        s_copy_prefix (path, copy, n, -1);
        int rc = s_load (copy, session, &got, err, sizeof err, NULL);
        CHECK (rc == 0 || strlen (err) > 0, "cut at %zu: loads or says why", n);
    }

    //  One byte flipped, anywhere.
    size_t loaded = 0, refused = 0;
    for (size_t at = 0; at < full; at++) {
        s_copy_prefix (path, copy, full, (long) at);
        err [0] = 0;
        if (s_load (copy, session, &got, err, sizeof err, NULL) == 0)
            loaded++;
        else {
            CHECK (strlen (err) > 10, "a refusal says why (byte %zu)", at);
            refused++;
        }
    }
    printf ("  ok: each of %zu bytes flipped: %zu journals load what precedes the damage, %zu are "
            "refused with a message, none crashes\n", full, loaded, refused);

    //  Not a journal: refused, untouched.
    FILE *f = fopen (copy, "w");
    fputs ("precious data, not a journal\n", f);
    fclose (f);
    size_t before = s_file_size (copy);
    CHECK (s_load (copy, session, &got, err, sizeof err, NULL) == -1 && strstr (err, "not a squall journal"),
           "another file is refused: %s", err);
    CHECK (s_file_size (copy) == before, "and left as it was");
    printf ("  ok: a file that is not a journal is refused and untouched: %s\n", err);

    //  Compaction: a snapshot of the live state (the closed session is not
    //  in it), and what comes meanwhile, in a file that replays the same.
    graph_t *graph = s_graph ();
    persist_t *persist = persist_new (graph);
    journal_t *journal = journal_open (path, 10, 1, persist_replay, persist, err, sizeof err);
    CHECK (journal && journal_restarted (journal), "reopen: %s", err);
    persist_replayed (persist, 0);
    persist_attach (persist, journal);
    s_persist = persist;
    CHECK (journal_compaction_due (journal), "compaction due past compact_min");
    journal_compact (journal, persist_snapshot (persist, journal_cluster (journal),
                                                journal_epoch (journal), 9));
    //  A record while the snapshot is written: it must be in the result.
    uint32_t ids [1] = { 3 };
    graph_keep (graph, graph_object (graph, sq_key (session, 3)), false);
    persist_ids (persist, SQ_REC_UNKEEP, session, ids, 1);
    journal_flush (journal);
    journal_stats_t stats;
    double deadline = (double) time (NULL) + 20;
    do {
        journal_tick (journal);
        journal_stats (journal, &stats);
        if (stats.compactions == 0)
            usleep (5000);
    } while (stats.compactions == 0 && (double) time (NULL) < deadline);
    CHECK (stats.compactions == 1, "the compaction finished");
    s_state_t live;
    s_state (graph, session, &live);
    journal_destroy (&journal);
    s_persist = NULL;
    persist_destroy (&persist);
    graph_destroy (&graph);
    size_t compacted = s_file_size (path);
    CHECK (s_load (path, session, &got, err, sizeof err, &govs) == 0, "compacted reload: %s", err);
    CHECK (got.sessions == 1 && memcmp (got.counts, live.counts, sizeof got.counts) == 0
           && got.attempt4 == 1 && govs == 1 && live.deleted1 && got.deleted1 && got.governors4,
           "the compacted journal replays to the live state (a deletion included)");
    graph = s_graph ();
    persist = persist_new (graph);
    journal = journal_open (path, 10, 64u << 20, persist_replay, persist, err, sizeof err);
    object_t *o3 = graph_object (graph, sq_key (session, 3));
    CHECK (o3 && !o3->keep && o3->released, "the UNKEEP journaled during the compaction survived it");
    journal_destroy (&journal);
    persist_destroy (&persist);
    graph_destroy (&graph);
    CHECK (compacted < full, "the closed session is gone from it (%zu bytes, was %zu)", compacted, full);
    printf ("  ok: compaction: %zu -> %zu bytes, replays to the live state, keeps what came meanwhile\n",
            full, compacted);

    char cmd [400];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    CHECK (system (cmd) == 0, "cleanup");
    printf ("test_broker_journal: OK\n");
    return 0;
}
