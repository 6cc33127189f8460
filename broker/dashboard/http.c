/*  http: dashboard, /metrics and JSON API over libmicrohttpd. See http.h.

    The cluster state comes from the same code that answers INFO
    (broker_pack_info): it is packed as msgpack, then rendered here as JSON
    or as Prometheus metrics, so the page, /metrics and `squall status`
    never disagree.

    Over 800 lines: every endpoint (the JSON API, /metrics, the events)
    renders the same INFO snapshot, with the msgpack readers and the JSON
    escaping they share. */
#include "http.h"
#include "json.h"
#include "broker.h"
#include "eventlog.h"
#include "log.h"
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SQUALL_HAVE_MICROHTTPD
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

//  The page, generated from broker/dashboard/index.html at build time.
extern const unsigned char squall_dashboard_html [];
extern const size_t squall_dashboard_html_size;

#define S_MAX_CONNECTIONS 64
#define S_MAX_PER_ADDRESS 32    //  one address cannot take every slot
#define S_IDLE_TIMEOUT_S 10
//  /api/log: requests waiting for a governor's LOGTAIL answer, suspended
//  (libmicrohttpd keeps their connection aside), answered or timed out.
#define S_MAX_TAILS 16
#define S_TAIL_TIMEOUT_MS 3000

typedef struct {
    struct MHD_Connection *connection;  //  NULL: a free slot
    uint32_t req;
    uint32_t governor;
    uint32_t session, task, attempt;
    int64_t deadline;
    bool answered;                      //  resumed: the handler answers `text`
    char *json;                         //  the answer, malloc'd
} s_tail_t;

struct _http_t {
    struct MHD_Daemon *daemon;
    broker_t *broker;
    eventlog_t *events;
    uint16_t port;
    int fd;
    msgpack_sbuffer sbuf;       //  the INFO map, rebuilt per request
    uint64_t requests;
    int64_t deadline;           //  ms, monotonic; -1 none
    char *token;                //  every request but /metrics must carry it, or NULL
    struct in_addr bound;       //  the address listened on (INADDR_ANY: every one)
    sq_ratelimit_t log;         //  libmicrohttpd's lines (one per refused connection)
    s_tail_t tails [S_MAX_TAILS];
    uint32_t next_tail;         //  request numbers of LOGTAILs
};

bool
http_available (void)
{
    return true;
}

//  --------------------------------------------------------------------------
//  Text building on open_memstream: the result is malloc'd, which is what
//  MHD_RESPMEM_MUST_FREE frees.

typedef struct {
    char *data;
    size_t size;
    FILE *out;
} s_text_t;

static int
s_text_open (s_text_t *t)
{
    t->data = NULL;
    t->size = 0;
    t->out = open_memstream (&t->data, &t->size);
    return t->out? 0: -1;
}

static const msgpack_object *
s_get (const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t len = strlen (key);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr [i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == len
        &&  memcmp (k->via.str.ptr, key, len) == 0)
            return &map->via.map.ptr [i].val;
    }
    return NULL;
}

static uint64_t
s_get_u64 (const msgpack_object *map, const char *key)
{
    const msgpack_object *v = s_get (map, key);
    return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER? v->via.u64: 0;
}

//  Packs `what` (0: INFO, 1: sessions) and unpacks it into `result`.
static int
s_snapshot (http_t *self, int what, msgpack_unpacked *result)
{
    msgpack_sbuffer_clear (&self->sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &self->sbuf, msgpack_sbuffer_write);
    if (what == 0)
        broker_pack_info (self->broker, &pk);
    else
        broker_pack_sessions (self->broker, &pk);
    msgpack_unpacked_init (result);
    size_t offset = 0;
    if (msgpack_unpack_next (result, self->sbuf.data, self->sbuf.size, &offset)
        != MSGPACK_UNPACK_SUCCESS) {
        msgpack_unpacked_destroy (result);
        return -1;
    }
    return 0;
}

//  --------------------------------------------------------------------------
//  Endpoints

//  Packs `what` (0: INFO, 1: sessions) and writes it as JSON, or `absent`.
static void
s_write_json (http_t *self, int what, FILE *out, const char *absent)
{
    msgpack_sbuffer_clear (&self->sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &self->sbuf, msgpack_sbuffer_write);
    if (what == 0)
        broker_pack_info (self->broker, &pk);
    else
        broker_pack_sessions (self->broker, &pk);
    char *json = NULL;
    if (sq_json_from_msgpack (self->sbuf.data, self->sbuf.size, false, &json, NULL) == 0) {
        fputs (json, out);
        free (json);
    }
    else
        fputs (absent, out);
}

static void
s_api_state (http_t *self, FILE *out)
{
    fputs ("{\"info\":", out);
    s_write_json (self, 0, out, "null");
    fputs (",\"sessions\":", out);
    s_write_json (self, 1, out, "[]");
    const eventlog_stats_t *st = eventlog_stats (self->events);
    fprintf (out, ",\"stats\":{\"bytes_moved\":%llu,\"bytes_ordered\":%llu,"
             "\"scheduled\":%llu,\"latency_sum_s\":%.6f,\"events\":{",
             (unsigned long long) st->bytes_moved, (unsigned long long) st->bytes_ordered,
             (unsigned long long) st->latency_count, st->latency_sum);
    for (int t = 0; t < EV_TYPE_COUNT_; t++)
        fprintf (out, "%s\"%s\":%llu", t? ",": "", eventlog_type_name ((eventlog_type_t) t),
                 (unsigned long long) st->events [t]);
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    fprintf (out, "}},\"time\":%lld.%03ld}", (long long) ts.tv_sec, ts.tv_nsec / 1000000);
}

static void
s_api_events (http_t *self, FILE *out, uint64_t since, bool errors)
{
    static const eventlog_event_t *list [EVENTLOG_RING];
    size_t n = errors? eventlog_errors (self->events, list, EVENTLOG_ERRORS)
                     : eventlog_task_events (self->events, since, list, EVENTLOG_RING);
    uint64_t last = n? list [n - 1]->seq: since;
    fprintf (out, "{\"last\":%llu,\"%s\":[", (unsigned long long) last, errors? "errors": "events");
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc (',', out);
        eventlog_write_json (list [i], out);
    }
    fputs ("]}", out);
}

static void
s_label (FILE *out, const char *s, size_t len)
{
    fputc ('"', out);
    for (size_t i = 0; i < len; i++) {
        if (s [i] == '\\' || s [i] == '"')
            fputc ('\\', out);
        if (s [i] == '\n')
            fputs ("\\n", out);
        else
            fputc (s [i], out);
    }
    fputc ('"', out);
}

//  Any bytes as a JSON string: quotes, backslashes and control characters
//  escaped (a program's output may hold anything).
static void
s_json_bytes (FILE *out, const char *s, size_t len)
{
    fputc ('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s [i];
        if (c == '\\' || c == '"')
            fprintf (out, "\\%c", c);
        else
        if (c == '\n')
            fputs ("\\n", out);
        else
        if (c < 0x20 || c == 0x7f)
            fprintf (out, "\\u%04x", c);
        else
            fputc (c, out);
    }
    fputc ('"', out);
}

static void
s_metric_head (FILE *out, const char *name, const char *type, const char *help)
{
    fprintf (out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
s_metrics (http_t *self, FILE *out)
{
    msgpack_unpacked info;
    if (s_snapshot (self, 0, &info))
        return;
    const msgpack_object *root = &info.data;
    const msgpack_object *tasks = s_get (root, "tasks");
    s_metric_head (out, "squall_tasks", "gauge", "Tasks in the graph by state.");
    if (tasks && tasks->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < tasks->via.map.size; i++) {
            const msgpack_object_kv *kv = &tasks->via.map.ptr [i];
            if (kv->key.type != MSGPACK_OBJECT_STR || kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                continue;
            fputs ("squall_tasks{state=", out);
            s_label (out, kv->key.via.str.ptr, kv->key.via.str.size);
            fprintf (out, "} %llu\n", (unsigned long long) kv->val.via.u64);
        }
    const msgpack_object *govs = s_get (root, "governors");
    uint32_t n_govs = govs && govs->type == MSGPACK_OBJECT_ARRAY? govs->via.array.size: 0;
    s_metric_head (out, "squall_governors_alive", "gauge", "Governors connected to the broker.");
    fprintf (out, "squall_governors_alive %u\n", n_govs);
    static const char *per_gov [][3] = {
        { "cpus", "squall_governor_cpus", "CPU slots of the governor." },
        { "running", "squall_governor_running_tasks", "Tasks running on the governor." },
        { "queued", "squall_governor_queued_tasks", "Tasks queued on the governor." },
        { "assigned", "squall_governor_assigned_tasks", "Tasks the broker assigned to the governor." },
        { "memory", "squall_governor_memory_bytes", "Bytes of objects held by the governor." },
        { "objects", "squall_governor_objects", "Objects held by the governor." },
        { "tasks_done", "squall_governor_tasks_done_total", "Tasks the governor finished or failed." }
    };
    for (size_t m = 0; m < sizeof per_gov / sizeof per_gov [0]; m++) {
        bool counter = strstr (per_gov [m][1], "_total") != NULL;
        s_metric_head (out, per_gov [m][1], counter? "counter": "gauge", per_gov [m][2]);
        for (uint32_t g = 0; g < n_govs; g++) {
            const msgpack_object *gov = &govs->via.array.ptr [g];
            const msgpack_object *name = s_get (gov, "name");
            fprintf (out, "%s{governor=\"%llu\",name=", per_gov [m][1],
                     (unsigned long long) s_get_u64 (gov, "id"));
            if (name && name->type == MSGPACK_OBJECT_STR)
                s_label (out, name->via.str.ptr, name->via.str.size);
            else
                fputs ("\"\"", out);
            fprintf (out, "} %llu\n", (unsigned long long) s_get_u64 (gov, per_gov [m][0]));
        }
    }
    static const char *plain [][3] = {
        { "sessions", "squall_sessions", "Open sessions." },
        { "clients", "squall_clients", "Connected clients." },
        { "objects", "squall_objects", "Data objects alive in the graph." }
    };
    for (size_t m = 0; m < sizeof plain / sizeof plain [0]; m++) {
        s_metric_head (out, plain [m][1], "gauge", plain [m][2]);
        fprintf (out, "%s %llu\n", plain [m][1], (unsigned long long) s_get_u64 (root, plain [m][0]));
    }
    msgpack_unpacked_destroy (&info);

    const eventlog_stats_t *st = eventlog_stats (self->events);
    s_metric_head (out, "squall_events_total", "counter", "Broker events by type (see docs/eventlog.md).");
    for (int t = 0; t < EV_TYPE_COUNT_; t++)
        fprintf (out, "squall_events_total{event=\"%s\"} %llu\n",
                 eventlog_type_name ((eventlog_type_t) t), (unsigned long long) st->events [t]);
    s_metric_head (out, "squall_bytes_moved_total", "counter",
                   "Bytes of object copies that arrived on a governor from another.");
    fprintf (out, "squall_bytes_moved_total %llu\n", (unsigned long long) st->bytes_moved);
    s_metric_head (out, "squall_bytes_ordered_total", "counter",
                   "Bytes of object copies the broker ordered between governors.");
    fprintf (out, "squall_bytes_ordered_total %llu\n", (unsigned long long) st->bytes_ordered);
    s_metric_head (out, "squall_scheduling_latency_seconds", "histogram",
                   "Time from a task becoming ready to its assignment to a governor.");
    const double *bounds = eventlog_latency_bounds ();
    for (int i = 0; i < EVENTLOG_LATENCY_BUCKETS; i++)
        fprintf (out, "squall_scheduling_latency_seconds_bucket{le=\"%g\"} %llu\n",
                 bounds [i], (unsigned long long) st->latency_buckets [i]);
    fprintf (out, "squall_scheduling_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
             (unsigned long long) st->latency_count);
    fprintf (out, "squall_scheduling_latency_seconds_sum %.9f\n", st->latency_sum);
    fprintf (out, "squall_scheduling_latency_seconds_count %llu\n",
             (unsigned long long) st->latency_count);
}

static enum MHD_Result
s_respond (struct MHD_Connection *connection, unsigned status, const char *type,
           void *data, size_t size, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *response = MHD_create_response_from_buffer (size, data, mode);
    if (!response) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free (data);
        return MHD_NO;
    }
    MHD_add_response_header (response, "Content-Type", type);
    MHD_add_response_header (response, "Cache-Control", "no-store");
    enum MHD_Result rc = MHD_queue_response (connection, status, response);
    MHD_destroy_response (response);
    return rc;
}

//  Constant time: the token is a secret.
static bool
s_same (const char *a, const char *b)
{
    size_t n = strlen (a), m = strlen (b);
    unsigned diff = (unsigned) (n ^ m);
    for (size_t i = 0; i < m; i++)
        diff |= (unsigned) (unsigned char) a [i % (n? n: 1)] ^ (unsigned char) b [i];
    return diff == 0 && n == m;
}

//  The token, from "Authorization: Bearer TOKEN", the cookie the page got,
//  or ?token=TOKEN (how a browser first opens the page).
static bool
s_authorized (http_t *self, struct MHD_Connection *connection, bool *from_query)
{
    *from_query = false;
    const char *auth = MHD_lookup_connection_value (connection, MHD_HEADER_KIND, "Authorization");
    if (auth && strncmp (auth, "Bearer ", 7) == 0 && s_same (auth + 7, self->token))
        return true;
    const char *cookie = MHD_lookup_connection_value (connection, MHD_COOKIE_KIND, "squall_token");
    if (cookie && s_same (cookie, self->token))
        return true;
    const char *query = MHD_lookup_connection_value (connection, MHD_GET_ARGUMENT_KIND, "token");
    if (query && s_same (query, self->token))
        return *from_query = true;
    return false;
}

//  Whether `host` (the Host header, without its port) names this server
//  without a name a stranger controls: a loopback name or address, the
//  address bound, or the one this connection came to. Without a token
//  this is what stops DNS rebinding: a page from elsewhere whose name
//  now resolves to 127.0.0.1 reaches the dashboard with its own name in
//  Host.
static bool
s_host_is_local (http_t *self, struct MHD_Connection *connection, const char *host, size_t len)
{
    char name [64];
    if (len == 0 || len >= sizeof name)
        return false;
    memcpy (name, host, len);
    name [len] = 0;
    if (strcasecmp (name, "localhost") == 0 || strcmp (name, "[::1]") == 0)
        return true;
    struct in_addr addr;
    if (inet_pton (AF_INET, name, &addr) != 1)
        return false;
    if ((ntohl (addr.s_addr) >> 24) == 127)
        return true;
    if (self->bound.s_addr != htonl (INADDR_ANY))
        return addr.s_addr == self->bound.s_addr;
    //  Bound to every interface: the one this connection arrived on.
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info (connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct sockaddr_in local;
    socklen_t size = sizeof local;
    return info && getsockname (info->connect_fd, (struct sockaddr *) &local, &size) == 0
        && local.sin_family == AF_INET && local.sin_addr.s_addr == addr.s_addr;
}

//  True if the Host header is acceptable: absent (HTTP/1.0; browsers
//  always send one), or local (s_host_is_local) with an optional port.
static bool
s_host_allowed (http_t *self, struct MHD_Connection *connection)
{
    const char *host = MHD_lookup_connection_value (connection, MHD_HEADER_KIND, "Host");
    if (!host)
        return true;
    size_t len = strlen (host);
    const char *colon = strrchr (host, ':');
    //  "[::1]:8080" ends its address at ']', "[::1]" has no port.
    if (colon && !(host [0] == '[' && colon < strrchr (host, ']')))
        len = (size_t) (colon - host);
    return s_host_is_local (self, connection, host, len);
}


//  The answer of a tail request: {"session", "task", "attempt", "governor",
//  "text"} or {"error"}; malloc'd, NULL if out of memory.
static char *
s_tail_json (s_tail_t *tail, const char *error, const char *data, size_t size)
{
    s_text_t text;
    if (s_text_open (&text))
        return NULL;
    if (error) {
        fputs ("{\"error\":", text.out);
        s_json_bytes (text.out, error, strlen (error));
        fputc ('}', text.out);
    }
    else {
        fprintf (text.out, "{\"session\":%u,\"task\":%u,\"attempt\":%u,\"governor\":%u,"
                 "\"text\":", tail->session, tail->task, tail->attempt, tail->governor);
        s_json_bytes (text.out, data, size);
        fputc ('}', text.out);
    }
    if (fclose (text.out)) {
        free (text.data);
        return NULL;
    }
    return text.data;
}

//  GET /api/log?session=S&task=T[&stream=stderr]: asks the task's governor
//  and suspends the connection until its answer (http_log_tail_done) or
//  the timeout (http_run). The broker relays at most SQ_LOGTAIL_MAX bytes.
static enum MHD_Result
s_api_log (http_t *self, struct MHD_Connection *connection)
{
    const char *session = MHD_lookup_connection_value (connection, MHD_GET_ARGUMENT_KIND, "session");
    const char *task = MHD_lookup_connection_value (connection, MHD_GET_ARGUMENT_KIND, "task");
    const char *stream = MHD_lookup_connection_value (connection, MHD_GET_ARGUMENT_KIND, "stream");
    char *end1 = NULL, *end2 = NULL;
    unsigned long long sid = session? strtoull (session, &end1, 10): 0;
    unsigned long long tid = task? strtoull (task, &end2, 10): 0;
    if (!session || !task || *end1 || *end2 || !*session || !*task || sid == 0 || tid == 0
    ||  sid > UINT32_MAX || tid > UINT32_MAX
    ||  (stream && strcmp (stream, "stdout") && strcmp (stream, "stderr"))) {
        static char text [] = "{\"error\":\"give session=ID&task=ID (and stream=stdout or stderr)\"}";
        return s_respond (connection, MHD_HTTP_BAD_REQUEST, "application/json",
                          text, sizeof text - 1, MHD_RESPMEM_PERSISTENT);
    }
    s_tail_t *tail = NULL;
    for (size_t i = 0; i < S_MAX_TAILS && !tail; i++)
        if (!self->tails [i].connection)
            tail = &self->tails [i];
    if (!tail) {
        static char text [] = "{\"error\":\"too many output requests at once; try again\"}";
        return s_respond (connection, MHD_HTTP_SERVICE_UNAVAILABLE, "application/json",
                          text, sizeof text - 1, MHD_RESPMEM_PERSISTENT);
    }
    char why [200];
    uint32_t req = ++self->next_tail;
    uint32_t attempt = 0;
    if (broker_log_tail (self->broker, (uint32_t) sid, (uint32_t) tid,
                         stream && strcmp (stream, "stderr") == 0? 2: 1, req, &attempt,
                         why, sizeof why)) {
        s_tail_t info = { .session = (uint32_t) sid, .task = (uint32_t) tid };
        char *json = s_tail_json (&info, why, NULL, 0);
        if (!json)
            return MHD_NO;
        return s_respond (connection, MHD_HTTP_OK, "application/json", json, strlen (json),
                          MHD_RESPMEM_MUST_FREE);
    }
    *tail = (s_tail_t) { connection, req, 0, (uint32_t) sid, (uint32_t) tid, attempt,
                         sq_now_ms () + S_TAIL_TIMEOUT_MS, false, NULL };
    MHD_suspend_connection (connection);
    return MHD_YES;
}

//  A suspended tail request was answered (or timed out): resumed, its
//  connection's handler is called again and sends `json`.
static void
s_tail_resume (s_tail_t *tail, char *json)
{
    tail->json = json;
    tail->answered = true;
    MHD_resume_connection (tail->connection);
}

void
http_log_tail_done (http_t *self, uint32_t req, uint32_t governor, const char *data, size_t size)
{
    for (size_t i = 0; i < S_MAX_TAILS; i++) {
        s_tail_t *tail = &self->tails [i];
        if (tail->connection && !tail->answered && tail->req == req) {
            tail->governor = governor;
            s_tail_resume (tail, s_tail_json (tail, NULL, data, size));
            return;
        }
    }
}

//  A resumed tail request: its answer goes out, its slot is free again.
static enum MHD_Result
s_tail_answer (http_t *self, struct MHD_Connection *connection)
{
    for (size_t i = 0; i < S_MAX_TAILS; i++) {
        s_tail_t *tail = &self->tails [i];
        if (tail->connection == connection && tail->answered) {
            char *json = tail->json;
            *tail = (s_tail_t) { 0 };
            if (!json)
                return MHD_NO;
            return s_respond (connection, MHD_HTTP_OK, "application/json", json, strlen (json),
                              MHD_RESPMEM_MUST_FREE);
        }
    }
    return MHD_NO;
}

//  A request ended, answered or not (its client went away while it was
//  suspended): its tail slot, if any, is free again.
static void
s_completed (void *cls, struct MHD_Connection *connection, void **con_cls,
             enum MHD_RequestTerminationCode code)
{
    http_t *self = (http_t *) cls;
    (void) code;
    (void) con_cls;
    for (size_t i = 0; i < S_MAX_TAILS; i++)
        if (self->tails [i].connection == connection) {
            free (self->tails [i].json);
            self->tails [i] = (s_tail_t) { 0 };
        }
}

static enum MHD_Result
s_handler (void *cls, struct MHD_Connection *connection, const char *url,
           const char *method, const char *version, const char *upload_data,
           size_t *upload_data_size, void **con_cls)
{
    http_t *self = (http_t *) cls;
    (void) version;
    (void) upload_data;
    if (strcmp (method, "GET") != 0 && strcmp (method, "HEAD") != 0) {
        static char text [] = "only GET and HEAD\n";
        return s_respond (connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                          text, sizeof text - 1, MHD_RESPMEM_PERSISTENT);
    }
    //  A GET has no body: answer on the first call. (Requests with a body
    //  are refused above before it is read.) A tail request is called
    //  again once resumed: *con_cls marks it.
    if (*upload_data_size)
        return MHD_NO;
    if (*con_cls == (void *) self)
        return s_tail_answer (self, connection);
    self->requests++;
    if (!self->token && !s_host_allowed (self, connection)) {
        static char text [] = "this dashboard answers only requests addressed to this machine "
                              "(Host: localhost or its address)\n";
        return s_respond (connection, MHD_HTTP_MISDIRECTED_REQUEST, "text/plain",
                          text, sizeof text - 1, MHD_RESPMEM_PERSISTENT);
    }
    bool from_query = false;
    if (self->token && strcmp (url, "/metrics") != 0
    &&  !s_authorized (self, connection, &from_query)) {
        static char text [] = "this dashboard needs its token: open /?token=TOKEN "
                              "(the file given to the broker's --http-token)\n";
        return s_respond (connection, MHD_HTTP_UNAUTHORIZED, "text/plain",
                          text, sizeof text - 1, MHD_RESPMEM_PERSISTENT);
    }
    if (strcmp (url, "/") == 0 || strcmp (url, "/index.html") == 0) {
        struct MHD_Response *response = MHD_create_response_from_buffer (
            squall_dashboard_html_size, (void *) squall_dashboard_html, MHD_RESPMEM_PERSISTENT);
        if (!response)
            return MHD_NO;
        MHD_add_response_header (response, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header (response, "Cache-Control", "no-store");
        if (from_query) {
            //  The page's own requests then carry it without the query.
            char cookie [600];
            snprintf (cookie, sizeof cookie, "squall_token=%s; HttpOnly; SameSite=Strict; Path=/",
                      self->token);
            MHD_add_response_header (response, "Set-Cookie", cookie);
        }
        enum MHD_Result rc = MHD_queue_response (connection, MHD_HTTP_OK, response);
        MHD_destroy_response (response);
        return rc;
    }
    if (strcmp (url, "/api/log") == 0) {
        enum MHD_Result rc = s_api_log (self, connection);
        for (size_t i = 0; i < S_MAX_TAILS; i++)
            if (self->tails [i].connection == connection)
                *con_cls = self;        //  suspended: answered when resumed
        return rc;
    }
    s_text_t text;
    if (s_text_open (&text))
        return MHD_NO;
    const char *type = "application/json";
    unsigned status = MHD_HTTP_OK;
    if (strcmp (url, "/api/state") == 0)
        s_api_state (self, text.out);
    else
    if (strcmp (url, "/api/events") == 0) {
        const char *since = MHD_lookup_connection_value (connection, MHD_GET_ARGUMENT_KIND, "since");
        s_api_events (self, text.out, since? strtoull (since, NULL, 10): 0, false);
    }
    else
    if (strcmp (url, "/api/errors") == 0)
        s_api_events (self, text.out, 0, true);
    else
    if (strcmp (url, "/metrics") == 0) {
        type = "text/plain; version=0.0.4; charset=utf-8";
        s_metrics (self, text.out);
    }
    else {
        type = "text/plain";
        status = MHD_HTTP_NOT_FOUND;
        fputs ("not found; try /, /metrics, /api/state, /api/events, /api/errors, /api/log\n",
               text.out);
    }
    if (fclose (text.out)) {
        free (text.data);
        return MHD_NO;
    }
    return s_respond (connection, status, type, text.data, text.size, MHD_RESPMEM_MUST_FREE);
}

//  --------------------------------------------------------------------------

//  libmicrohttpd's messages, as the broker's log lines: a connection beyond
//  the limit makes one, so they are rate-limited.
static void
s_mhd_log (void *cls, const char *format, va_list args)
{
    http_t *self = (http_t *) cls;
    unsigned withheld = sq_ratelimit_withheld (&self->log, 10000);
    if (withheld)
        sq_info ("dashboard: %u more messages not logged", withheld);
    if (!sq_ratelimit_take (&self->log, 10, 10000))
        return;
    char text [300];
    vsnprintf (text, sizeof text, format, args);
    size_t len = strlen (text);
    while (len && text [len - 1] == '\n')
        text [--len] = 0;
    sq_info ("dashboard: %s", text);
}

static int
s_parse_address (const char *address, struct sockaddr_in *sin)
{
    memset (sin, 0, sizeof *sin);
    sin->sin_family = AF_INET;
    //  A port alone serves this machine only: the dashboard shows every
    //  tenant. "*:PORT" or an address serves more.
    sin->sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    const char *colon = strrchr (address, ':');
    const char *port = colon? colon + 1: address;
    if (colon) {
        char host [64];
        size_t len = (size_t) (colon - address);
        if (len == 0 || len >= sizeof host)
            return -1;
        memcpy (host, address, len);
        host [len] = 0;
        if (strcmp (host, "*") == 0)
            sin->sin_addr.s_addr = htonl (INADDR_ANY);
        else
        if (inet_pton (AF_INET, host, &sin->sin_addr) != 1)
            return -1;
    }
    char *end;
    unsigned long value = strtoul (port, &end, 10);
    if (!*port || *end || value > 65535)
        return -1;
    sin->sin_port = htons ((uint16_t) value);
    return 0;
}

//  The listening socket, made here rather than by libmicrohttpd so that a
//  busy port is an error naming it: no SO_REUSEPORT (two brokers would
//  share the port, each answering some requests), SO_REUSEADDR only so a
//  restart does not wait for the last connections' TIME_WAIT. -1 (logged).
static int
s_listen (const char *address, const struct sockaddr_in *sin)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        sq_error ("--http %s: cannot make a socket: %s", address, strerror (errno));
        return -1;
    }
    int one = 1;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind (fd, (const struct sockaddr *) sin, sizeof *sin) || listen (fd, 64)) {
        if (errno == EADDRINUSE)
            sq_error ("--http %s: port %u is in use (another program, or another squall "
                      "broker, serves it)", address, ntohs (sin->sin_port));
        else
            sq_error ("--http %s: cannot listen on port %u: %s", address,
                      ntohs (sin->sin_port), strerror (errno));
        close (fd);
        return -1;
    }
    return fd;
}

http_t *
http_new (const char *address, const char *token, bool open, broker_t *broker,
          eventlog_t *events)
{
    struct sockaddr_in sin;
    if (s_parse_address (address, &sin)) {
        sq_error ("--http %s: expected PORT or IPV4-ADDRESS:PORT", address);
        return NULL;
    }
    bool local = (ntohl (sin.sin_addr.s_addr) >> 24) == 127;
    if (!local && !open) {
        sq_error ("refusing to serve the dashboard on %s without keys: it shows every "
                  "tenant's tasks, and without keys it has no token. Give --secret-key, "
                  "--authorized-keys and --http-token (docs/security.md), serve it on "
                  "127.0.0.1, or accept it with --insecure", address);
        return NULL;
    }
    if (!local && !token)
        sq_warn ("INSECURE: the dashboard on %s needs no token: anyone who reaches it sees "
                 "every tenant's tasks", address);
    int fd = s_listen (address, &sin);
    if (fd < 0)
        return NULL;
    http_t *self = (http_t *) calloc (1, sizeof *self);
    if (!self) {
        close (fd);
        return NULL;
    }
    self->bound = sin.sin_addr;
    self->broker = broker;
    self->events = events;
    self->deadline = -1;
    if (token && !(self->token = strdup (token))) {
        close (fd);
        http_destroy (&self);
        return NULL;
    }
    msgpack_sbuffer_init (&self->sbuf);
    //  No internal thread: the reactor polls the epoll descriptor.
    self->daemon = MHD_start_daemon (MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME,
        ntohs (sin.sin_port), NULL, NULL, s_handler, self,
        MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, self,        //  first: for every message
        MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned) S_MAX_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned) S_MAX_PER_ADDRESS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) S_IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_COMPLETED, s_completed, self,
        MHD_OPTION_END);
    if (!self->daemon) {
        //  The listening socket is left open: whether libmicrohttpd closed
        //  it on this path is not said, and the broker stops anyway.
        sq_error ("cannot serve HTTP on %s", address);
        http_destroy (&self);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info (self->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    self->fd = info? info->epoll_fd: -1;
    info = MHD_get_daemon_info (self->daemon, MHD_DAEMON_INFO_BIND_PORT);
    self->port = info? info->port: ntohs (sin.sin_port);
    if (self->fd < 0) {
        sq_error ("libmicrohttpd gave no epoll descriptor");
        http_destroy (&self);
        return NULL;
    }
    return self;
}

void
http_destroy (http_t **self_p)
{
    http_t *self = *self_p;
    if (!self)
        return;
    if (self->daemon) {
        //  Suspended connections must be resumed before the daemon stops.
        for (size_t i = 0; i < S_MAX_TAILS; i++)
            if (self->tails [i].connection && !self->tails [i].answered)
                MHD_resume_connection (self->tails [i].connection);
        MHD_stop_daemon (self->daemon);
    }
    for (size_t i = 0; i < S_MAX_TAILS; i++)
        free (self->tails [i].json);
    msgpack_sbuffer_destroy (&self->sbuf);
    free (self->token);
    free (self);
    *self_p = NULL;
}

uint16_t
http_port (http_t *self)
{
    return self->port;
}

int
http_fd (http_t *self)
{
    return self->fd;
}

long
http_timeout (http_t *self)
{
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout (self->daemon, &ms) != MHD_YES)
        ms = 3600000;
    if (ms > 3600000)
        ms = 3600000;
    //  A tail request waiting for its governor times out.
    int64_t now = sq_now_ms ();
    for (size_t i = 0; i < S_MAX_TAILS; i++) {
        const s_tail_t *tail = &self->tails [i];
        if (tail->connection && tail->answered)
            ms = 0;             //  its answer is ready to go
        else
        if (tail->connection)
            ms = tail->deadline <= now? 0: (MHD_UNSIGNED_LONG_LONG) (tail->deadline - now) < ms
               ? (MHD_UNSIGNED_LONG_LONG) (tail->deadline - now): ms;
    }
    if (ms == 3600000) {
        self->deadline = -1;
        return -1;
    }
    if (ms > 3600000)
        ms = 3600000;
    self->deadline = sq_now_ms () + (int64_t) ms;
    return (long) ms;
}

void
http_run (http_t *self, bool readable)
{
    //  Without input, only a due deadline needs libmicrohttpd: this keeps
    //  an idle dashboard from costing a system call per reactor turn.
    int64_t now = sq_now_ms ();
    for (size_t i = 0; i < S_MAX_TAILS; i++) {
        s_tail_t *tail = &self->tails [i];
        if (tail->connection && !tail->answered && tail->deadline <= now) {
            char why [120];
            snprintf (why, sizeof why, "the governor did not answer within %d ms",
                      S_TAIL_TIMEOUT_MS);
            s_tail_resume (tail, s_tail_json (tail, why, NULL, 0));
            readable = true;
        }
        if (tail->connection && tail->answered)
            readable = true;    //  its answer goes out in this run
    }
    if (readable || (self->deadline >= 0 && now >= self->deadline)) {
        MHD_run (self->daemon);
        //  At its connection limit libmicrohttpd takes the listening socket
        //  out of its epoll set, and puts it back only at the start of a
        //  run after connections closed. If the run that closed them was
        //  the last with input, nothing would wake the reactor for it ever
        //  again and the dashboard would stay deaf: the second run puts it
        //  back (and accepts what waits).
        MHD_run (self->daemon);
    }
}

#else   //  built without libmicrohttpd

bool http_available (void) { return false; }

http_t *
http_new (const char *address, const char *token, bool open, broker_t *broker,
          eventlog_t *events)
{
    (void) token;
    (void) open;
    (void) broker;
    (void) events;
    sq_error ("--http %s: this broker was built without libmicrohttpd", address);
    return NULL;
}

void http_destroy (http_t **self_p) { *self_p = NULL; }
uint16_t http_port (http_t *self) { (void) self; return 0; }
int http_fd (http_t *self) { (void) self; return -1; }
long http_timeout (http_t *self) { (void) self; return -1; }
void http_run (http_t *self, bool readable) { (void) self; (void) readable; }
void
http_log_tail_done (http_t *self, uint32_t req, uint32_t governor, const char *data, size_t size)
{
    (void) self; (void) req; (void) governor; (void) data; (void) size;
}

#endif
