/*  compute: the compute thread's loop and the dispatch of its messages
    (compute.h). The loop polls the inproc pipe, the children, the streams
    and the Python executors; the task queue and resources are in
    compute_tasks.c, the UPDATE batch and LOAD in compute_batch.c, the
    state they share in compute_internal.h.

    Over 800 lines: one handler per message the compute thread receives
    (the broker's orders, the peers' copies, the executors' answers), each
    short, all sharing the loop's state. */
#include "compute.h"
#include "compute_tasks.h"
#include "compute_batch.h"

//  --------------------------------------------------------------------------
//  Objects

static void
s_send_object (compute_t *self, uint64_t key, uint32_t version, const char *endpoint)
{
    //  Chunked, credit-controlled and zero-copy: see transfer.h.
    if (transfer_send (self->transfer, key, version, endpoint))
        sq_warn ("cannot start the copy of %" PRIx64 " to %s", key, endpoint);
}

//  transfer_fn: a copy arrived (located) or could not be had (lost), or
//  an upload is complete (the broker waits for that to count it).
static void
s_copy_done (void *arg, uint64_t key, uint64_t size, transfer_outcome_t outcome,
             uint64_t duration_us)
{
    compute_t *self = (compute_t *) arg;
    if (outcome == TRANSFER_LOST)
        sq_pack_lost (&self->events.pk, key);
    else {
        compute_object_stored (self, key);
        if (outcome == TRANSFER_LOCATED && duration_us)
            sq_pack_located_in (&self->events.pk, key, size, duration_us);
        else
        if (outcome == TRANSFER_LOCATED)
            sq_pack_located (&self->events.pk, key, size);
        else
        if (outcome == TRANSFER_LOCATED_LOCAL)
            sq_pack_located_local (&self->events.pk, key, size);
        else
        if (outcome == TRANSFER_UPLOADED_LOCAL)
            sq_pack_uploaded_local (&self->events.pk, key, size);
        else
            sq_pack_uploaded (&self->events.pk, key, size);
    }
    compute_event_added (self);
}

//  transfer_hand_fn, transfer_take_fn: copies on this host go through the
//  stream directory's socket.
static int
s_hand_segment (void *arg, const char *endpoint, size_t len, int fd, uint8_t *token)
{
    return stream_hand_segment ((stream_t *) arg, endpoint, len, fd, token);
}

static int
s_take_segment (void *arg, const uint8_t *token)
{
    return stream_take_segment ((stream_t *) arg, token);
}

//  An object just entered the store: wake its waiters, run its orders.
void
compute_object_stored (compute_t *self, uint64_t key)
{
    compute_list_t *list = (compute_list_t *) sq_idmap_remove (self->waiters, key);
    for (size_t i = 0; list && i < list->n; i++) {
        task_t *task = (task_t *) list->items [i];
        if (!task->stopped && --task->missing == 0)
            compute_ready_push (self, task);
        compute_unpin (task);
    }
    if (list) {
        free (list->items);
        free (list);
    }
    list = (compute_list_t *) sq_idmap_remove (self->orders, key);
    for (size_t i = 0; list && i < list->n; i++) {
        compute_order_t *order = (compute_order_t *) list->items [i];
        s_send_object (self, key, order->version, order->endpoint);
        compute_order_free (order);
        self->n_orders--;
    }
    if (list) {
        free (list->items);
        free (list);
    }
}

static void
s_drop_orders (compute_t *self, uint64_t key)
{
    compute_list_t *list = (compute_list_t *) sq_idmap_remove (self->orders, key);
    for (size_t i = 0; list && i < list->n; i++) {
        compute_order_free ((compute_order_t *) list->items [i]);
        self->n_orders--;
    }
    if (list) {
        free (list->items);
        free (list);
    }
}

//  --------------------------------------------------------------------------
//  Messages from the broker, peers and clients

//  One ASSIGN entry; msg frame 1 is the ASSIGN header, so payload index f
//  is frame 1 + f.
static void
s_accept (compute_t *self, const sq_assign_t *assign, sq_msg_t *msg)
{
    if (self->n_queued >= S_MAX_QUEUED) {
        compute_failed (self, assign->key, assign->attempt,
                  "governor queue is full (1000000 tasks queued)", 0);
        return;
    }
    for (uint32_t i = 0; i < assign->n_inputs; i++) {
        int32_t f = assign->inputs [i].frame;
        if (f >= 0 && (f < 1 || (size_t) f + 1 >= msg->n)) {
            snprintf (self->err, sizeof self->err,
                      "input %u refers to payload frame %d, which the ASSIGN lacks", i, f);
            compute_failed (self, assign->key, assign->attempt, self->err, 0);
            return;
        }
    }
    sq_errbuf_t err;
    task_t *task = task_new (assign, &err);
    if (!task) {
        compute_failed (self, assign->key, assign->attempt, err.text, 0);
        return;
    }
    task_t *old = (task_t *) sq_idmap_lookup (self->tasks, task->key);
    if (old && old->attempt == task->attempt) {
        sq_warn ("task %" PRIx64 "/%u assigned twice; ignoring the copy", task->key, task->attempt);
        task_destroy (&task);
        return;
    }
    if (old)
        compute_task_drop (self, old);
    //  Inline inputs share the received frame's buffer (zmq_msg_copy).
    for (uint32_t i = 0; i < assign->n_inputs; i++) {
        const sq_input_ref_t *in = &assign->inputs [i];
        if (in->frame < 0 || store_has (self->store, in->key))
            continue;
        zmq_msg_t copy;
        zmq_msg_init (&copy);
        zmq_msg_copy (&copy, &msg->frames [1 + in->frame]);
        sq_blob_t *blob = sq_blob_from_msg (&copy);
        if (!blob || store_put (self->store, in->key, blob, in->content_type.ptr,
                                in->content_type.len))
            sq_error ("out of memory storing input %" PRIx64, in->key);
        else
            compute_object_stored (self, in->key);
    }
    if (sq_idmap_insert (self->tasks, task->key, task)) {
        compute_failed (self, task->key, task->attempt, "out of memory on the governor", 0);
        task_destroy (&task);
        return;
    }
    self->n_queued++;
    compute_wait_inputs (self, task);
}

static void
s_on_assign (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    sq_assign_t assign;
    int rc = sq_assign_begin (&it, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_assign_next (&it, &assign)) == 1) {
        s_accept (self, &assign, msg);
        rc = 0;
    }
    if (rc < 0)
        sq_warn ("bad ASSIGN (tasks before the error were taken): %s", err.text);
    sq_iter_release (&it);
}

static void
s_on_send (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    sq_send_t order;
    int rc = sq_batch_begin (&it, SQ_MSG_SEND, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_batch_next (&it, SQ_MSG_SEND, &order)) == 1) {
        rc = 0;
        char address [SQ_MAX_NAME + 48];
        if (gov_peer_address (address, sizeof address, order.to_key.len? (const uint8_t *) order.to_key.ptr: NULL,
                              order.endpoint.ptr, order.endpoint.len) < 0)
            continue;
        char *endpoint = strdup (address);
        if (!endpoint)
            continue;
        if (store_has (self->store, order.key)) {
            s_send_object (self, order.key, order.version, endpoint);
            free (endpoint);
            continue;
        }
        compute_order_t *pending = (compute_order_t *) calloc (1, sizeof *pending);
        compute_list_t *list = self->n_orders < S_MAX_PENDING_SENDS? compute_list_of (self->orders, order.key): NULL;
        if (!pending || !list || compute_list_push (list, pending)) {
            sq_warn ("dropping SEND of %" PRIx64 " to %s: too many pending", order.key, endpoint);
            free (pending);
            free (endpoint);
            continue;
        }
        pending->version = order.version;
        pending->to = order.to;
        pending->endpoint = endpoint;
        self->n_orders++;
    }
    if (rc < 0)
        sq_warn ("bad SEND: %s", err.text);
    sq_iter_release (&it);
}

static void
s_on_drop (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    uint64_t key;
    int rc = sq_batch_begin (&it, SQ_MSG_DROP, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_drop_next (&it, &key)) == 1) {
        rc = 0;
        store_remove (self->store, key);
        transfer_forget (self->transfer, key);
        s_drop_orders (self, key);
    }
    if (rc < 0)
        sq_warn ("bad DROP: %s", err.text);
    sq_iter_release (&it);
}

static void
s_on_stop (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    uint64_t key;
    uint32_t attempt;
    int rc = sq_batch_begin (&it, SQ_MSG_STOP, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_stop_next (&it, &key, &attempt)) == 1) {
        rc = 0;
        task_t *task = (task_t *) sq_idmap_lookup (self->tasks, key);
        if (task && task->attempt == attempt)
            compute_task_drop (self, task);
    }
    if (rc < 0)
        sq_warn ("bad STOP: %s", err.text);
    sq_iter_release (&it);
}

//  Work stealing: the broker asks for tasks back; only those not started
//  are given (RETRACTED), so none runs twice and none is lost.
//  LOGTAIL: the last bytes of a task's output, for the dashboard; answered
//  in the next UPDATE (empty when no such log is kept here).
static void
s_on_logtail (compute_t *self, sq_msg_t *msg)
{
    sq_logtail_t q;
    sq_errbuf_t err;
    if (sq_logtail_decode (&q, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("bad LOGTAIL: %s", err.text);
        return;
    }
    char tail [SQ_LOGTAIL_MAX + 1];
    tail [0] = 0;
    if (self->tasklog)
        tasklog_tail (self->tasklog, q.key, q.attempt, q.stream, tail, sizeof tail);
    sq_pack_logtail_event (&self->events.pk, q.key, q.attempt, q.req, tail, strlen (tail));
    compute_event_added (self);
}

static void
s_on_retract (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    uint64_t key;
    uint32_t attempt;
    int rc = sq_batch_begin (&it, SQ_MSG_RETRACT, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_stop_next (&it, &key, &attempt)) == 1) {
        rc = 0;
        task_t *task = (task_t *) sq_idmap_lookup (self->tasks, key);
        if (!task || task->attempt != attempt || task->state == TASK_RUNNING)
            continue;
        compute_task_drop (self, task);
        sq_pack_retracted (&self->events.pk, key, attempt);
        compute_event_added (self);
    }
    if (rc < 0)
        sq_warn ("bad RETRACT: %s", err.text);
    sq_iter_release (&it);
}

//  REFRESHED: the REFRESHes whose retired executors have all stopped,
//  in order (the broker counts them), said once for the last of them.
static void
s_refreshed (compute_t *self)
{
    uint64_t done = 0;
    size_t n = 0;
    while (n < self->n_refreshing
    &&  (!self->refreshing [n].valid
         || pyexec_retired (self->pyexec, self->refreshing [n].tenant) == 0))
        done = self->refreshing [n++].seq;
    if (n == 0)
        return;
    memmove (self->refreshing, self->refreshing + n, (self->n_refreshing - n) * sizeof self->refreshing [0]);
    self->n_refreshing -= n;
    sq_pack_refreshed (&self->events.pk, done);
    compute_event_added (self);
}

//  RAN: the runs all of whose executors answered (their answers stay in
//  pyexec for RUNREAD).
static void
s_ran_one (void *arg, uint64_t run, uint32_t n, uint64_t size)
{
    compute_t *self = (compute_t *) arg;
    sq_pack_ran (&self->events.pk, run, n, size);
    compute_event_added (self);
}

//  A client's run (GRUN): the tenant's live executors run its function;
//  RAN says how many answered (at once when there is none).
static void
s_on_grun (compute_t *self, sq_msg_t *msg)
{
    sq_grun_t q;
    sq_errbuf_t err;
    char tenant [SQ_MAX_NAME + 1];
    if (sq_grun_decode (&q, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("bad GRUN: %s", err.text);
        return;
    }
    memcpy (tenant, q.tenant.ptr, q.tenant.len);
    tenant [q.tenant.len] = 0;
    if (pyexec_run (self->pyexec, q.run, tenant, q.fn.ptr, q.fn.len)) {
        //  Nothing is kept for it: RAN says so (no answers).
        sq_warn ("GRUN %" PRIu64 ": 16 runs wait for this governor's executors already: "
                 "answered with none", q.run);
        s_ran_one (self, q.run, 0, 0);
    }
    pyexec_ran (self->pyexec, s_ran_one, self);
}

//  A client's restart: its tenant's Python executors get no other task;
//  REFRESHED says when they are all gone.
static void
s_on_refresh (compute_t *self, sq_msg_t *msg)
{
    sq_errbuf_t err;
    mpr_str_t tenant;
    //  Counted even if it does not decode: the broker counts what it sent.
    uint64_t seq = ++self->refreshes;
    if (self->n_refreshing == S_MAX_REFRESHING) {
        sq_warn ("more than %d restarts wait for executors to stop: the oldest is said done",
                 S_MAX_REFRESHING);
        self->refreshing [0].valid = false;
        s_refreshed (self);
    }
    size_t at = self->n_refreshing++;
    self->refreshing [at].seq = seq;
    self->refreshing [at].valid = false;
    if (sq_refresh_decode (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &tenant, &err))
        sq_warn ("bad REFRESH: %s", err.text);
    else {
        memcpy (self->refreshing [at].tenant, tenant.ptr, tenant.len);
        self->refreshing [at].tenant [tenant.len] = 0;
        self->refreshing [at].valid = true;
        pyexec_refresh (self->pyexec, self->refreshing [at].tenant);
    }
    s_refreshed (self);
}

//  The broker took us back after a loss: it learns what runs and what is
//  held here (reattach inventory, docs/protocol.md); what only waited is
//  dropped, the broker places it again (it cannot know what we queued).
//  A piped task has not started either: listed as running, the broker
//  would stop it when its input is not finished there (a chain), and its
//  reply could race that STOP and report a run the broker then repeats.
static void
s_inventory (compute_t *self)
{
    size_t n_tasks = sq_idmap_size (self->tasks), k = 0, cursor = 0;
    task_t **drop = (task_t **) malloc ((n_tasks + 1) * sizeof (task_t *));
    task_t *task;
    size_t running = 0, held = 0;
    while (drop && (task = (task_t *) sq_idmap_next (self->tasks, &cursor, NULL))) {
        if (task->state == TASK_RUNNING && !task->piped) {
            sq_pack_running (&self->events.pk, task->key, task->attempt);
            compute_event_added (self);
            running++;
        }
        else
            drop [k++] = task;
    }
    for (size_t i = 0; i < k; i++)
        compute_task_drop (self, drop [i]);
    free (drop);
    //  Tasks without outputs that finished lately: running, to the broker,
    //  until their end is reported again below, after the inventory. One it
    //  knows finished already is stopped (nothing here) and the report is
    //  ignored as stale; an attempt running here now is listed once, above.
    size_t ended = 0;
    for (size_t i = 0; i < self->n_recent; i++) {
        compute_end_t *end = &self->recent [(self->recent_at + i) % S_RECENT_ENDS];
        if (!sq_idmap_lookup (self->tasks, end->key)) {
            sq_pack_running (&self->events.pk, end->key, end->attempt);
            compute_event_added (self);
            ended++;
        }
    }
    //  Copies the old broker ordered: the new one orders what it needs.
    size_t n_keys = sq_idmap_size (self->orders);
    uint64_t *keys = (uint64_t *) malloc ((n_keys + 1) * sizeof (uint64_t));
    uint64_t key;
    cursor = k = 0;
    while (keys && k < n_keys && sq_idmap_next (self->orders, &cursor, &key))
        keys [k++] = key;
    for (size_t i = 0; keys && i < k; i++)
        s_drop_orders (self, keys [i]);
    free (keys);
    cursor = 0;
    uint32_t version;
    uint64_t size;
    while (store_next (self->store, &cursor, &key, &version, &size)) {
        sq_pack_held (&self->events.pk, key, version, size);
        compute_event_added (self);
        held++;
    }
    sq_pack_inventory_end (&self->events.pk);
    compute_event_added (self);
    for (size_t i = 0; i < self->n_recent; i++) {
        compute_end_t *end = &self->recent [(self->recent_at + i) % S_RECENT_ENDS];
        if (sq_idmap_lookup (self->tasks, end->key))
            continue;
        sq_pack_finished (&self->events.pk, end->key, end->attempt, NULL, 0, end->duration_us);
        compute_event_added (self);
    }
    self->n_recent = self->recent_at = 0;
    compute_flush (self);
    sq_info ("reattach: %zu running tasks and %zu objects listed, %zu queued tasks dropped, "
             "%zu ended tasks reported again", running, held, n_tasks - running, ended);
}

static void
s_on_message (compute_t *self, sq_msg_t *msg)
{
    char route = msg->n? *(char *) sq_msg_data (msg, 0): 0;
    uint32_t type = 0, req;
    if (msg->n == 1 && sq_msg_size (msg, 0) == strlen (GOV_TERM)
    &&  memcmp (sq_msg_data (msg, 0), GOV_TERM, strlen (GOV_TERM)) == 0)
        self->terminated = true;
    else
    if (msg->n == 1 && sq_msg_size (msg, 0) == strlen (GOV_REATTACH)
    &&  memcmp (sq_msg_data (msg, 0), GOV_REATTACH, strlen (GOV_REATTACH)) == 0)
        s_inventory (self);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 3 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_GREAD)
        serve_gread (self->store, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 3 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_LOGREAD)
        serve_logread (self->tasklog, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 3 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_RUNREAD)
        serve_runread (self->pyexec, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 4 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_PUT)
        serve_put (self->transfer, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE && msg->n == 3 && !msg->truncated
    &&  sq_proto_peek (sq_msg_data (msg, 2), sq_msg_size (msg, 2), &type, &req) == 0
    &&  type == SQ_MSG_PUTLOCAL)
        serve_putlocal (self->transfer, self->streams, self->pipe, msg);
    else
    if (route == GOV_ROUTE_SERVE)
        serve_gfetch (self->store, self->pipe, msg);
    else
    if (msg->n < 2 || msg->truncated
    ||  sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req))
        sq_warn ("unreadable message from '%c'; discarded", route);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_CHUNK)
        transfer_on_chunk (self->transfer, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_CREDIT)
        transfer_on_credit (self->transfer, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_LCOPY)
        transfer_on_lcopy (self->transfer, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_SCHUNK)
        stream_on_chunk (self->streams, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_SCREDIT)
        stream_on_credit (self->streams, msg);
    else
    if (route == GOV_ROUTE_DATA && type == SQ_MSG_SLOCAL)
        stream_on_local (self->streams, msg);
    else
    if (route == GOV_ROUTE_BROKER && (type == SQ_MSG_STREAM || type == SQ_MSG_UNSTREAM))
        stream_on_order (self->streams, type, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_ASSIGN)
        s_on_assign (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_SEND)
        s_on_send (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_DROP)
        s_on_drop (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_STOP)
        s_on_stop (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_RETRACT)
        s_on_retract (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_LOGTAIL)
        s_on_logtail (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_REFRESH)
        s_on_refresh (self, msg);
    else
    if (route == GOV_ROUTE_BROKER && type == SQ_MSG_GRUN)
        s_on_grun (self, msg);
    else
        sq_warn ("unexpected message type %u from '%c'; discarded", type, route);
}

//  --------------------------------------------------------------------------
//  The loop

static void
s_read_pipe (compute_t *self)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    for (int i = 0; i < S_READ_BURST && !self->terminated; i++) {
        if (sq_msg_recv (&msg, self->pipe, ZMQ_DONTWAIT, SQ_MAX_FRAMES + 2))
            break;
        s_on_message (self, &msg);
    }
    sq_msg_close (&msg);
    free (msg.frames);
}

static long
s_min_timeout (long a, long b)
{
    return a < 0? b: b < 0? a: a < b? a: b;
}

//  Freed object memory stays in the heap for the next copies (heap.h)
//  until nothing has been freed for HEAP_RELEASE_IDLE_MS. Returns the ms
//  until then, -1 when there is nothing to give back.
static long
s_heap_release (compute_t *self)
{
    uint64_t bytes = store_memory (self->store) + transfer_incoming_bytes (self->transfer);
    uint64_t now = task_now_ns ();
    if (bytes < self->heap_bytes)
        self->release_ns = now + (uint64_t) HEAP_RELEASE_IDLE_MS * 1000000ull;
    self->heap_bytes = bytes;
    if (self->release_ns == 0)
        return -1;
    if (now < self->release_ns)
        return (long) ((self->release_ns - now) / 1000000) + 1;
    heap_release ();
    self->release_ns = 0;
    return -1;
}

//  Poll set: the pipe, then one pidfd per child. Returns the item count
//  and the ms to wait at most (timers, children without pidfd).
static int
s_poll_set (compute_t *self, long *timeout)
{
    size_t need = self->n_execs + 1 + pyexec_watched (self->pyexec)
                + sq_idmap_size (self->tasks);   //  stream pipes: at most two a task
    if (self->cap_items < need) {
        size_t cap = need * 2;
        zmq_pollitem_t *items = (zmq_pollitem_t *) realloc (self->items, cap * sizeof *items);
        if (items)
            self->items = items;
        task_t **tasks = (task_t **) realloc (self->item_tasks, cap * sizeof *tasks);
        if (tasks)
            self->item_tasks = tasks;
        if (items && tasks)
            self->cap_items = cap;
    }
    self->items [0] = (zmq_pollitem_t) { self->pipe, 0, ZMQ_POLLIN, 0 };
    int n = 1;
    *timeout = -1;
    for (size_t i = 0; i < self->n_execs; i++) {
        if (self->execs [i]->exited)
            continue;           //  its stream drains (below)
        int fd = execute_fd (self->execs [i]->exec);
        if (fd >= 0 && (size_t) n < self->cap_items) {
            self->item_tasks [n] = self->execs [i];
            self->items [n++] = (zmq_pollitem_t) { NULL, fd, ZMQ_POLLIN, 0 };
        }
        else
            *timeout = S_WAITPID_MS;
    }
    self->n_exec_items = (size_t) n - 1;
    self->stream_at = (size_t) n;
    self->n_stream_items = stream_items (self->streams, self->items + n,
                                         self->cap_items > 2 * (size_t) n
                                         ? (self->cap_items - (size_t) n) / 2: 0);
    n += (int) self->n_stream_items;
    //  Busy Python executors last: s_reap_py finds them from n_items back.
    self->n_py_items = pyexec_items (self->pyexec, self->items + n, self->cap_items - (size_t) n);
    n += (int) self->n_py_items;
    task_t *first = deadlines_first (self->deadlines);
    if (first) {
        uint64_t now = task_now_ns ();
        long ms = first->deadline_ns > now? (long) ((first->deadline_ns - now + 999999) / 1000000): 0;
        *timeout = s_min_timeout (*timeout, ms);
    }
    return n;
}

static void
s_reap (compute_t *self, int n_items)
{
    //  Collect first: completing a task reshuffles the execs array.
    task_t *done_small [64];
    size_t n_done = 0;
    for (int i = 1; i < n_items && (size_t) i <= self->n_exec_items && n_done < 64; i++)
        if ((self->items [i].revents & ZMQ_POLLIN) && self->item_tasks [i]
        &&  execute_poll (self->item_tasks [i]->exec))
            done_small [n_done++] = self->item_tasks [i];
    for (size_t i = 0; i < self->n_execs && n_done < 64; i++)
        if (!self->execs [i]->exited && execute_fd (self->execs [i]->exec) < 0
        &&  execute_poll (self->execs [i]->exec))
            done_small [n_done++] = self->execs [i];
    for (size_t i = 0; i < n_done; i++)
        compute_child_exited (self, done_small [i]);
}

//  Replies of Python executors: the last n_py_items poll items.
static void
s_reap_py (compute_t *self, int n_items)
{
    for (int i = n_items - (int) self->n_py_items; i > 0 && i < n_items; i++)
        if (self->items [i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
            pyexec_read (self->pyexec, self->items [i].fd);
    compute_py_outcomes (self);
}

int
compute_run (compute_t *self)
{
    while (!self->terminated) {
        long timeout;
        int n = s_poll_set (self, &timeout);
        int rc = zmq_poll (self->items, n, 0);
        if (rc == 0) {
            //  Nothing more to read now: send what we have before waiting
            //  (unless Python tasks are about to add to it).
            long hold = compute_py_hold (self);
            if (hold < 0)
                compute_flush (self);
            timeout = s_min_timeout (timeout, hold);
            timeout = s_min_timeout (timeout, transfer_tick (self->transfer));
            timeout = s_min_timeout (timeout, stream_poll (self->streams, NULL, 0));
            timeout = s_min_timeout (timeout, compute_memcheck_due (self));
            timeout = s_min_timeout (timeout, compute_boxcheck_due (self));
            timeout = s_min_timeout (timeout, s_heap_release (self));
            //  What the timers just changed too, before waiting.
            compute_publish_load (self);
            rc = zmq_poll (self->items, n, timeout);
        }
        if (rc < 0 && errno == ETERM)
            break;
        if (rc > 0 && (self->items [0].revents & ZMQ_POLLIN))
            s_read_pipe (self);
        s_reap (self, rc > 0? n - (int) self->n_py_items: 0);
        stream_poll (self->streams, self->items + self->stream_at,
                     rc > 0? self->n_stream_items: 0);
        compute_reap_streams (self);
        s_reap_py (self, rc > 0? n: 0);
        if (self->n_refreshing)
            s_refreshed (self);
        pyexec_ran (self->pyexec, s_ran_one, self);
        compute_fire_deadlines (self);
        compute_check_memory (self);
        compute_check_box (self);
        compute_schedule (self);
        compute_publish_load (self);
    }
    compute_flush (self);
    return zmq_send (self->pipe, GOV_DONE, strlen (GOV_DONE), 0) < 0? -1: 0;
}

//  --------------------------------------------------------------------------

//  An object left the store: no executor keeps its value any more.
static void
s_forget_cached (void *arg, uint64_t key, uint64_t gen)
{
    pyexec_forget ((pyexec_t *) arg, key, gen);
}

compute_t *
compute_new (const compute_args_t *args)
{
    compute_t *self = (compute_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->governor_id = args->governor_id;
    self->cpus = args->cpus;
    self->n_res = args->n_resources;
    self->res = args->resources;
    char gpus_err [128];
    if (args->gpus && !(self->gpus = gpus_new (args->gpus, gpus_err, sizeof gpus_err))) {
        free (self);
        return NULL;
    }
    self->inline_max = args->inline_max;
    if (args->broker_key) {
        self->has_broker_key = true;
        memcpy (self->broker_key, args->broker_key, sizeof self->broker_key);
    }
    self->workdir = strdup (args->workdir);
    self->memory_limit = args->memory_limit;
    self->data_endpoint = strdup (args->data_endpoint? args->data_endpoint: "");
    self->store = store_new ();
    self->tasks = sq_idmap_new ();
    self->waiters = sq_idmap_new ();
    self->orders = sq_idmap_new ();
    self->deadlines = deadlines_new ();
    self->sandbox = sandbox_new (args->task_uid_first, args->task_uid_count);
    self->pyexec = self->sandbox? pyexec_new (self->cpus, self->workdir, self->sandbox): NULL;
    if (self->store && self->pyexec)
        store_set_forget (self->store, s_forget_cached, self->pyexec);
    if (self->workdir) {
        char log_dir [4096];
        snprintf (log_dir, sizeof log_dir, "%s/logs", self->workdir);
        self->tasklog = tasklog_new (log_dir, args->log_limit);
    }
    self->cap_items = 16;
    self->items = (zmq_pollitem_t *) calloc (self->cap_items, sizeof (zmq_pollitem_t));
    self->item_tasks = (task_t **) calloc (self->cap_items, sizeof (task_t *));
    sq_wbuf_init (&self->events);
    //  Spill files live in the workdir, which goes when the governor exits.
    char spill_dir [4096];
    snprintf (spill_dir, sizeof spill_dir, "%s", self->workdir? self->workdir: "");
    if (self->store && self->workdir
    &&  store_configure (self->store, self->memory_limit, spill_dir) == 0) {
        if (args->box_memory && (self->box = cgroup_usage_new (""))) {
            store_set_box (self->store, args->box_memory, compute_beside_store, compute_relieve_box, self);
            sq_debug ("store: spills above %d percent of the cgroup's %" PRIu64 " bytes, "
                      "whatever runs beside it", STORE_BOX_HIGH, args->box_memory);
        }
        transfer_args_t targs = {
            .pipe = args->pipe, .store = self->store, .governor_id = self->governor_id,
            .data_endpoint = self->data_endpoint, .done = s_copy_done, .arg = self
        };
        self->transfer = transfer_new (&targs);
    }
    stream_args_t sargs = {
        .pipe = args->pipe, .governor_id = self->governor_id,
        .data_endpoint = self->data_endpoint,
        .done = compute_stream_done,
        .progress = compute_stream_progress, .local = compute_stream_local,
        .dir = args->stream_dir, .arg = self
    };
    self->streams = stream_new (&sargs);
    if (self->transfer && self->streams)
        transfer_set_local (self->transfer, s_hand_segment, s_take_segment, self->streams);
    if (!self->workdir || !self->data_endpoint || !self->transfer || !self->streams || !self->store || !self->tasks || !self->waiters || !self->orders
    ||  !self->deadlines || !self->pyexec || !self->items || !self->item_tasks) {
        compute_destroy (&self);
        return NULL;
    }
    //  Taken over only on success, so that a failed start can still talk.
    self->pipe = args->pipe;
    self->load = args->load;
    return self;
}

static void
s_free_lists (sq_idmap_t *map, bool orders)
{
    size_t cursor = 0;
    compute_list_t *list;
    while ((list = (compute_list_t *) sq_idmap_next (map, &cursor, NULL))) {
        for (size_t i = 0; i < list->n; i++)
            if (orders)
                compute_order_free ((compute_order_t *) list->items [i]);
            else
                compute_unpin ((task_t *) list->items [i]);
        free (list->items);
        free (list);
    }
}

void
compute_destroy (compute_t **self_p)
{
    compute_t *self = *self_p;
    if (!self)
        return;
    gpus_destroy (&self->gpus);
    if (self->tasks) {
        size_t n = sq_idmap_size (self->tasks), cursor = 0, i = 0;
        task_t **all = (task_t **) malloc ((n + 1) * sizeof (task_t *));
        task_t *task;
        while (all && (task = (task_t *) sq_idmap_next (self->tasks, &cursor, NULL)))
            all [i++] = task;
        for (size_t j = 0; j < i; j++)
            compute_task_drop (self, all [j]);
        free (all);
    }
    if (self->waiters)
        s_free_lists (self->waiters, false);
    if (self->orders)
        s_free_lists (self->orders, true);
    for (size_t i = 0; i < self->n_payloads; i++)
        zmq_msg_close (&self->payloads [i]);
    free (self->payloads);
    sq_wbuf_release (&self->events);
    sq_idmap_destroy (&self->tasks);
    sq_idmap_destroy (&self->waiters);
    sq_idmap_destroy (&self->orders);
    deadlines_destroy (&self->deadlines);
    transfer_destroy (&self->transfer);
    stream_destroy (&self->streams);
    if (self->store)
        store_set_forget (self->store, NULL, NULL);
    store_destroy (&self->store);
    cgroup_usage_destroy (&self->box);
    free (self->data_endpoint);
    pyexec_destroy (&self->pyexec);
    tasklog_destroy (&self->tasklog);
    sandbox_destroy (&self->sandbox);
    free (self->execs);
    free (self->items);
    free (self->item_tasks);
    free (self->workdir);
    if (self->pipe)
        zmq_close (self->pipe);
    free (self);
    *self_p = NULL;
}
