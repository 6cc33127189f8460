/*  watch: parked WAIT and FETCH requests. */
#include "watch.h"
#include "gov.h"
#include "grow.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MODE_FETCH 100

typedef struct _watch_t watch_t;

struct _watch_t {
    void *client;
    uint32_t req;
    uint32_t session;
    uint32_t mode;              //  sq_wait_mode_t or S_MODE_FETCH
    uint32_t n_ids;
    uint32_t *ids;              //  as the client gave them
    uint64_t *deciders;         //  per id: deciding task key, 0 = constant
    uint32_t remaining;         //  SQ_WAIT_ALL: registrations not yet done
    int64_t deadline;
    bool done;
    uint32_t refs;              //  1 while active + one per registration
    size_t active_index;
};

typedef struct {
    watch_t **items;
    uint32_t n;
    uint32_t cap;
} s_list_t;

struct _watches_t {
    graph_t *graph;
    watches_hooks_t hooks;
    sq_idmap_t *by_task;        //  task key -> s_list_t
    sq_idmap_t *by_session;     //  session id -> s_list_t (SQ_WAIT_SESSION)
    watch_t **active;
    size_t n_active;
    size_t cap_active;
};

watches_t *
watches_new (graph_t *graph, const watches_hooks_t *hooks)
{
    watches_t *self = (watches_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->graph = graph;
    self->hooks = *hooks;
    self->by_task = sq_idmap_new ();
    self->by_session = sq_idmap_new ();
    if (!self->by_task || !self->by_session)
        watches_destroy (&self);
    return self;
}

static void
s_unref (watch_t **watch_p)
{
    watch_t *watch = *watch_p;
    *watch_p = NULL;
    if (watch && --watch->refs == 0) {
        free (watch->ids);
        free (watch->deciders);
        free (watch);
    }
}

static void
s_list_destroy (s_list_t **list_p)
{
    s_list_t *list = *list_p;
    if (!list)
        return;
    for (uint32_t i = 0; i < list->n; i++)
        s_unref (&list->items [i]);
    free (list->items);
    free (list);
    *list_p = NULL;
}

static void
s_map_destroy (sq_idmap_t **map_p)
{
    if (!*map_p)
        return;
    size_t cursor = 0;
    s_list_t *list;
    while ((list = (s_list_t *) sq_idmap_next (*map_p, &cursor, NULL)))
        s_list_destroy (&list);
    sq_idmap_destroy (map_p);
}

void
watches_destroy (watches_t **self_p)
{
    watches_t *self = *self_p;
    if (!self)
        return;
    s_map_destroy (&self->by_task);
    s_map_destroy (&self->by_session);
    for (size_t i = 0; i < self->n_active; i++)
        s_unref (&self->active [i]);
    free (self->active);
    free (self);
    *self_p = NULL;
}

static int
s_register (sq_idmap_t *map, uint64_t key, watch_t *watch)
{
    s_list_t *list = (s_list_t *) sq_idmap_lookup (map, key);
    if (!list) {
        list = (s_list_t *) calloc (1, sizeof *list);
        if (!list || sq_idmap_insert (map, key, list)) {
            free (list);
            return -1;
        }
    }
    if (list->n == list->cap
    &&  sq_grow32 ((void **) &list->items, &list->cap, (size_t) list->n + 1, sizeof *list->items,
                   2, UINT32_MAX))
        return -1;
    list->items [list->n++] = watch;
    watch->refs++;
    return 0;
}

//  Ends a watch: out of the active list; registrations die lazily.
static void
s_finish (watches_t *self, watch_t *watch)
{
    if (watch->done)
        return;
    watch->done = true;
    size_t i = watch->active_index;
    self->active [i] = self->active [--self->n_active];
    self->active [i]->active_index = i;
    void *client = watch->client;
    s_unref (&watch);
    self->hooks.released (self->hooks.arg, client);
}

static void
s_reply_error (watches_t *self, watch_t *watch, int code, const char *message,
               uint32_t id, uint32_t root)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_reply_encode_error (&w, watch->req, code, message, id, root);
    self->hooks.reply (self->hooks.arg, watch->client, &w, NULL);
    sq_wbuf_release (&w);
    s_finish (self, watch);
}

//  The final state of an id as the client sees it.
static uint32_t
s_done_state (task_t *task)
{
    if (!task)
        return SQ_STATE_FINISHED;
    switch (task->state) {
        case TASK_FINISHED: return SQ_STATE_FINISHED;
        case TASK_FAILED: return SQ_STATE_FAILED;
        case TASK_CANCELLED: return SQ_STATE_CANCELLED;
        default: return SQ_STATE_PENDING;
    }
}

static void
s_pack_done (msgpack_packer *pk, uint32_t id, task_t *task)
{
    bool failure = task && task->failure;
    sq_pack_done (pk, id, s_done_state (task), failure? task->failure->root: 0,
                  failure? task->failure->message: NULL);
}

static void
s_reply_wait (watches_t *self, watch_t *watch, session_t *session)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_reply_begin (&w, watch->req);
    if (watch->mode == SQ_WAIT_SESSION) {
        sq_pack_wait_head (&w.pk, session->finished, session->failed, session->n_failures);
        for (uint32_t i = 0; i < session->n_failures; i++)
            s_pack_done (&w.pk, sq_key_id (session->failures [i]->key), session->failures [i]);
    }
    else {
        uint32_t finished = 0, failed = 0, listed = 0;
        task_t **tasks = (task_t **) calloc (watch->n_ids + 1, sizeof (task_t *));
        for (uint32_t i = 0; i < watch->n_ids; i++) {
            task_t *task = watch->deciders [i]? graph_task (self->graph, watch->deciders [i]): NULL;
            if (tasks)
                tasks [i] = task;
            uint32_t state = s_done_state (task);
            if (state == SQ_STATE_PENDING)
                continue;
            listed++;
            if (state == SQ_STATE_FINISHED)
                finished++;
            else
                failed++;
        }
        sq_pack_wait_head (&w.pk, finished, failed, listed);
        for (uint32_t i = 0; i < watch->n_ids; i++) {
            task_t *task = tasks? tasks [i]: NULL;
            if (s_done_state (task) != SQ_STATE_PENDING)
                s_pack_done (&w.pk, watch->ids [i], task);
        }
        free (tasks);
    }
    self->hooks.reply (self->hooks.arg, watch->client, &w, NULL);
    sq_wbuf_release (&w);
    s_finish (self, watch);
}

//  Answers a FETCH whose object is final (or gone).
static void
s_reply_fetch (watches_t *self, watch_t *watch)
{
    uint32_t id = watch->ids [0];
    object_t *object = graph_object (self->graph, sq_key (watch->session, id));
    if (!object) {
        s_reply_error (self, watch, SQ_E_UNKNOWN_ID, "object was released", id, 0);
        return;
    }
    if (object->state == OBJ_FAILED) {
        failure_t *f = object->failure;
        uint32_t producer = object->producer? sq_key_id (object->producer->key): 0;
        int code = f->code == SQ_E_TASK_FAILED && f->root != producer? SQ_E_UPSTREAM_FAILED: f->code;
        char message [SQ_MAX_MESSAGE / 4];
        if (code == SQ_E_UPSTREAM_FAILED)
            snprintf (message, sizeof message, "object %u: upstream task %u failed: %s",
                      id, f->root, f->message);
        else
        if (!graph_task (self->graph, sq_key (watch->session, f->root)))
            //  A constant lost or never delivered: no task failed.
            snprintf (message, sizeof message, "object %u: %s", id, f->message);
        else
            snprintf (message, sizeof message, "object %u: task %u failed: %s", id, f->root, f->message);
        s_reply_error (self, watch, code, message, id, f->root);
        return;
    }
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_reply_begin (&w, watch->req);
    if (object->data) {
        sq_pack_fetched_inline (&w.pk, object->size, object->content_type);
        zmq_msg_t payload;
        if (sq_blob_msg (object->data, &payload) == 0) {
            self->hooks.reply (self->hooks.arg, watch->client, &w, &payload);
            sq_wbuf_release (&w);
            s_finish (self, watch);
            return;
        }
        sq_wbuf_release (&w);
        s_reply_error (self, watch, SQ_E_NOMEM, "out of memory", id, 0);
        return;
    }
    location_t *where = NULL;
    for (uint32_t i = 0; i < object->n_locations && !where; i++)
        if (object_locations (object) [i].arrived)
            where = &object_locations (object) [i];
    if (!where) {
        sq_wbuf_release (&w);
        s_reply_error (self, watch, SQ_E_LOST, "no governor holds the object any more", id, 0);
        return;
    }
    sq_pack_fetched_head (&w.pk, object->size, object->content_type);
    self->hooks.where (self->hooks.arg, watch->client, object, where->gov, &w.pk);
    self->hooks.reply (self->hooks.arg, watch->client, &w, NULL);
    sq_wbuf_release (&w);
    s_finish (self, watch);
}

static watch_t *
s_watch_new (watches_t *self, void *client, uint32_t req, uint32_t session,
             uint32_t mode, uint32_t n_ids, int64_t deadline)
{
    watch_t *watch = (watch_t *) calloc (1, sizeof *watch);
    if (!watch)
        return NULL;
    watch->ids = (uint32_t *) calloc (n_ids + 1, sizeof (uint32_t));
    watch->deciders = (uint64_t *) calloc (n_ids + 1, sizeof (uint64_t));
    if (self->n_active == self->cap_active)
        sq_grow ((void **) &self->active, &self->cap_active, self->n_active + 1,
                 sizeof *self->active, 64, SIZE_MAX);
    if (!watch->ids || !watch->deciders || self->n_active == self->cap_active) {
        free (watch->ids);
        free (watch->deciders);
        free (watch);
        return NULL;
    }
    watch->client = client;
    watch->req = req;
    watch->session = session;
    watch->mode = mode;
    watch->n_ids = n_ids;
    watch->deadline = deadline;
    watch->refs = 1;
    watch->active_index = self->n_active;
    self->active [self->n_active++] = watch;
    return watch;
}

static void
s_reply_nomem (watches_t *self, void *client, uint32_t req)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_reply_encode_error (&w, req, SQ_E_NOMEM, "out of memory", 0, 0);
    self->hooks.reply (self->hooks.arg, client, &w, NULL);
    sq_wbuf_release (&w);
    self->hooks.released (self->hooks.arg, client);
}

void
watches_wait (watches_t *self, void *client, uint32_t req, session_t *session,
              uint32_t mode, const uint32_t *ids, uint32_t n_ids, int64_t deadline)
{
    watch_t *watch = s_watch_new (self, client, req, session->id, mode, n_ids, deadline);
    if (!watch) {
        s_reply_nomem (self, client, req);
        return;
    }
    if (mode == SQ_WAIT_SESSION) {
        if (session->unfinished == 0)
            s_reply_wait (self, watch, session);
        else
        if (s_register (self->by_session, session->id, watch))
            s_reply_error (self, watch, SQ_E_NOMEM, "out of memory", 0, 0);
        return;
    }
    if (n_ids == 0) {
        s_reply_error (self, watch, SQ_E_INVALID, "wait needs at least one id", 0, 0);
        return;
    }
    uint32_t pending = 0;
    for (uint32_t i = 0; i < n_ids; i++) {
        uint64_t key = sq_key (session->id, ids [i]);
        watch->ids [i] = ids [i];
        task_t *task = graph_task (self->graph, key);
        if (!task) {
            object_t *object = graph_object (self->graph, key);
            if (!object) {
                char message [160];
                snprintf (message, sizeof message,
                          "id %u is not a task or object of session %u "
                          "(or an object already released because nobody kept it)",
                          ids [i], session->id);
                s_reply_error (self, watch, SQ_E_UNKNOWN_ID, message, ids [i], 0);
                return;
            }
            task = object->producer;
        }
        watch->deciders [i] = task? task->key: 0;
        if (s_done_state (task) == SQ_STATE_PENDING)
            pending++;
    }
    if (pending == 0 || (mode == SQ_WAIT_SOME && pending < n_ids)) {
        s_reply_wait (self, watch, session);
        return;
    }
    for (uint32_t i = 0; i < n_ids; i++) {
        task_t *task = watch->deciders [i]? graph_task (self->graph, watch->deciders [i]): NULL;
        if (s_done_state (task) != SQ_STATE_PENDING)
            continue;
        if (s_register (self->by_task, task->key, watch)) {
            s_reply_error (self, watch, SQ_E_NOMEM, "out of memory", 0, 0);
            return;
        }
        task->watched = true;
        watch->remaining++;
    }
}

void
watches_fetch (watches_t *self, void *client, uint32_t req, session_t *session,
               uint32_t id, int64_t deadline)
{
    watch_t *watch = s_watch_new (self, client, req, session->id, S_MODE_FETCH, 1, deadline);
    if (!watch) {
        s_reply_nomem (self, client, req);
        return;
    }
    watch->ids [0] = id;
    object_t *object = graph_object (self->graph, sq_key (session->id, id));
    char message [200];
    if (!object) {
        bool is_task = graph_task (self->graph, sq_key (session->id, id)) != NULL;
        snprintf (message, sizeof message, is_task
                  ? "id %u is a task; fetch one of its output objects"
                  : "object %u is not in session %u (never declared, or released because nobody kept it)",
                  id, session->id);
        s_reply_error (self, watch, SQ_E_UNKNOWN_ID, message, id, 0);
        return;
    }
    if (!object->keep) {
        snprintf (message, sizeof message,
                  "object %u is not kept: keep it (before submit, or with keep) to fetch it", id);
        s_reply_error (self, watch, SQ_E_NOT_KEPT, message, id, 0);
        return;
    }
    if (object->state != OBJ_UNFINISHED) {
        s_reply_fetch (self, watch);
        return;
    }
    watch->deciders [0] = object->producer->key;
    if (s_register (self->by_task, object->producer->key, watch)) {
        s_reply_error (self, watch, SQ_E_NOMEM, "out of memory", 0, 0);
        return;
    }
    object->producer->watched = true;
    watch->remaining = 1;
}

void
watches_task_done (watches_t *self, task_t *task)
{
    session_t *session = task->session;
    if (task->watched) {
        task->watched = false;
        s_list_t *list = (s_list_t *) sq_idmap_remove (self->by_task, task->key);
        for (uint32_t i = 0; list && i < list->n; i++) {
            watch_t *watch = list->items [i];
            if (watch->done)
                continue;
            watch->remaining--;
            if (watch->mode == S_MODE_FETCH)
                s_reply_fetch (self, watch);
            else
            if (watch->mode == SQ_WAIT_SOME || watch->remaining == 0)
                s_reply_wait (self, watch, session);
        }
        s_list_destroy (&list);
    }
    if (session->unfinished == 0) {
        s_list_t *list = (s_list_t *) sq_idmap_remove (self->by_session, session->id);
        for (uint32_t i = 0; list && i < list->n; i++)
            if (!list->items [i]->done)
                s_reply_wait (self, list->items [i], session);
        s_list_destroy (&list);
    }
}

int64_t
watches_expire (watches_t *self, int64_t now)
{
    int64_t next = -1;
    for (size_t i = 0; i < self->n_active; ) {
        watch_t *watch = self->active [i];
        if (watch->deadline >= 0 && watch->deadline <= now) {
            //  s_finish moves the last watch into slot i: don't advance.
            s_reply_error (self, watch, SQ_E_TIMEOUT,
                           watch->mode == S_MODE_FETCH? "fetch timed out": "wait timed out", 0, 0);
            continue;
        }
        if (watch->deadline >= 0 && (next < 0 || watch->deadline < next))
            next = watch->deadline;
        i++;
    }
    return next;
}

void
watches_drop_client (watches_t *self, void *client)
{
    for (size_t i = 0; i < self->n_active; ) {
        if (self->active [i]->client == client)
            s_finish (self, self->active [i]);
        else
            i++;
    }
}

void
watches_drop_session (watches_t *self, session_t *session)
{
    for (size_t i = 0; i < self->n_active; ) {
        watch_t *watch = self->active [i];
        if (watch->session == session->id)
            s_reply_error (self, watch, SQ_E_SESSION, "the session was closed", 0, 0);
        else
            i++;
    }
    //  Registrations of its tasks can go now: the tasks are about to.
    s_list_t *list = (s_list_t *) sq_idmap_remove (self->by_session, session->id);
    s_list_destroy (&list);
    size_t cursor = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor))) {
        if (task->watched) {
            task->watched = false;
            list = (s_list_t *) sq_idmap_remove (self->by_task, task->key);
            s_list_destroy (&list);
        }
    }
}

size_t
watches_count (watches_t *self)
{
    return self->n_active;
}
