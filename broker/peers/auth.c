/*  auth: the broker's keys, keyring and ZAP handler. */
#include "auth.h"
#include "zap.h"
#include "log.h"
#include "idmap.h"
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_ZAP_BURST 64          //  handshakes answered per reactor turn
//  Refused handshakes logged: at most this many lines per window, the
//  rest counted (anyone who reaches the port can make them).
#define S_REFUSED_LINES 10
#define S_REFUSED_WINDOW_MS 10000

struct _auth_t {
    sq_cert_t cert;
    char *dir;
    sq_keyring_t *ring;
    void *zap;
    sq_msg_t msg;
    const uint8_t **governors;
    uint32_t n_governors;
    const uint8_t **clients;
    uint32_t n_clients;
    sq_ratelimit_t refused_log;
    //  Task keys by their first 8 bytes (s_task_entry_t), and who says
    //  whether their attempt still runs.
    sq_idmap_t *task_keys;
    auth_live_fn *live;
    void *live_arg;
    auth_before_fn *before;
    void *before_arg;
    uint64_t task_gen;          //  bumped when a task key goes
};

typedef struct {
    sq_keyentry_t entry;
    auth_taskref_t ref;
} s_task_entry_t;

static uint64_t
s_key_prefix (const uint8_t *key)
{
    uint64_t v;
    memcpy (&v, key, sizeof v);
    return v;
}

static int64_t
s_mono_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
s_task_live (auth_t *self, const s_task_entry_t *te)
{
    return s_mono_ms () < te->ref.expires_ms
        && (!self->live || self->live (self->live_arg, &te->ref));
}

static void
s_task_drop (auth_t *self, s_task_entry_t *te)
{
    sq_idmap_remove (self->task_keys, s_key_prefix (te->entry.key));
    memset (te, 0, sizeof *te);
    free (te);
    self->task_gen++;
}

//  The task entry of a key given as Z85 (any, live or not), or NULL.
static s_task_entry_t *
s_task_lookup (auth_t *self, const char *z85, size_t len)
{
    uint8_t key [SQ_KEY_LEN];
    if (!self->task_keys || len != SQ_Z85_LEN || !zmq_z85_decode (key, z85))
        return NULL;
    s_task_entry_t *te = (s_task_entry_t *) sq_idmap_lookup (self->task_keys, s_key_prefix (key));
    return te && memcmp (te->entry.key, key, SQ_KEY_LEN) == 0? te: NULL;
}

//  The live task entry of a key, dropping it if it died.
static const sq_keyentry_t *
s_task_find (auth_t *self, const char *z85, size_t len)
{
    s_task_entry_t *te = s_task_lookup (self, z85, len);
    if (te && !s_task_live (self, te)) {
        s_task_drop (self, te);
        te = NULL;
    }
    return te? &te->entry: NULL;
}

void
auth_set_live (auth_t *self, auth_live_fn *live, void *arg)
{
    self->live = live;
    self->live_arg = arg;
}

void
auth_set_before_answer (auth_t *self, auth_before_fn *before, void *arg)
{
    self->before = before;
    self->before_arg = arg;
}

int
auth_task_key_add (auth_t *self, const uint8_t *key, const char *tenant,
                   const auth_taskref_t *ref)
{
    if (!self->task_keys)
        return -1;
    char z85 [SQ_Z85_LEN + 1];
    if (!zmq_z85_encode (z85, key, SQ_KEY_LEN) || sq_keyring_find (self->ring, z85, SQ_Z85_LEN))
        return -1;              //  a keyring key is never a task's
    if (sq_idmap_size (self->task_keys) >= AUTH_TASK_KEYS_MAX) {
        //  Full: the dead go, all at once.
        size_t cursor = 0;
        uint64_t prefix;
        s_task_entry_t *te;
        s_task_entry_t *dead [64];
        size_t n_dead;
        do {
            n_dead = 0;
            cursor = 0;
            while (n_dead < 64
               &&  (te = (s_task_entry_t *) sq_idmap_next (self->task_keys, &cursor, &prefix)))
                if (!s_task_live (self, te))
                    dead [n_dead++] = te;
            for (size_t i = 0; i < n_dead; i++)
                s_task_drop (self, dead [i]);
        } while (n_dead == 64);
        if (sq_idmap_size (self->task_keys) >= AUTH_TASK_KEYS_MAX)
            return -1;
    }
    if (sq_idmap_lookup (self->task_keys, s_key_prefix (key)))
        return -1;
    s_task_entry_t *te = (s_task_entry_t *) calloc (1, sizeof *te);
    if (!te)
        return -1;
    memcpy (te->entry.key, key, SQ_KEY_LEN);
    memcpy (te->entry.z85, z85, sizeof te->entry.z85);
    te->entry.role = SQ_ROLE_CLIENT;
    snprintf (te->entry.tenant, sizeof te->entry.tenant, "%s", tenant);
    snprintf (te->entry.name, sizeof te->entry.name, "task-%u", (unsigned) (ref->task & 0xffffffff));
    te->ref = *ref;
    if (sq_idmap_insert (self->task_keys, s_key_prefix (key), te)) {
        free (te);
        return -1;
    }
    return 0;
}

bool
auth_is_task_key (auth_t *self, const char *z85, size_t len)
{
    return s_task_lookup (self, z85, len) != NULL;
}

size_t
auth_task_keys (auth_t *self)
{
    return self->task_keys? sq_idmap_size (self->task_keys): 0;
}

static int
s_index (auth_t *self)
{
    size_t n = sq_keyring_size (self->ring);
    const uint8_t **governors = (const uint8_t **) malloc ((n + 1) * sizeof (uint8_t *));
    const uint8_t **clients = (const uint8_t **) malloc ((n + 1) * sizeof (uint8_t *));
    if (!governors || !clients) {
        free (governors);
        free (clients);
        return -1;
    }
    uint32_t g = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        const sq_keyentry_t *entry = sq_keyring_at (self->ring, i);
        if (entry->role == SQ_ROLE_GOVERNOR)
            governors [g++] = entry->key;
        else
            clients [c++] = entry->key;
    }
    free (self->governors);
    free (self->clients);
    self->governors = governors;
    self->n_governors = g;
    self->clients = clients;
    self->n_clients = c;
    return 0;
}

int
auth_reload (auth_t *self)
{
    char err [512];
    int n = sq_keyring_load (self->ring, self->dir, err, sizeof err);
    if (n < 0 || s_index (self)) {
        sq_error ("keys not reloaded: %s", n < 0? err: "out of memory");
        return -1;
    }
    sq_info ("%d authorized keys (%u governors, %u clients and admins) from %s",
             n, self->n_governors, self->n_clients, self->dir);
    return 0;
}

auth_t *
auth_new (void *ctx, const char *secret_key_file, const char *keys_dir)
{
    char err [600];
    auth_t *self = (auth_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    sq_msg_init (&self->msg);
    if (sq_cert_load (&self->cert, secret_key_file, err, sizeof err)) {
        sq_error ("--secret-key: %s", err);
        auth_destroy (&self);
        return NULL;
    }
    if (!self->cert.has_secret) {
        sq_error ("--secret-key %s holds no secret key (give the .key file, not the .pub)",
                  secret_key_file);
        auth_destroy (&self);
        return NULL;
    }
    self->dir = strdup (keys_dir);
    self->ring = sq_keyring_new ();
    self->task_keys = sq_idmap_new ();
    if (!self->dir || !self->ring || !self->task_keys || auth_reload (self)) {
        auth_destroy (&self);
        return NULL;
    }
    self->zap = sq_zap_bind (ctx);
    if (!self->zap) {
        auth_destroy (&self);
        return NULL;
    }
    return self;
}

void
auth_destroy (auth_t **self_p)
{
    auth_t *self = *self_p;
    if (!self)
        return;
    if (self->zap)
        zmq_close (self->zap);
    sq_msg_release (&self->msg);
    sq_keyring_destroy (&self->ring);
    if (self->task_keys) {
        size_t cursor = 0;
        uint64_t prefix;
        s_task_entry_t *te;
        while ((te = (s_task_entry_t *) sq_idmap_next (self->task_keys, &cursor, &prefix))) {
            memset (te, 0, sizeof *te);
            free (te);
        }
        sq_idmap_destroy (&self->task_keys);
    }
    free (self->governors);
    free (self->clients);
    free (self->dir);
    memset (&self->cert, 0, sizeof self->cert);
    free (self);
    *self_p = NULL;
}

void *
auth_socket (auth_t *self)
{
    return self->zap;
}

void
auth_handle (auth_t *self)
{
    unsigned withheld = sq_ratelimit_withheld (&self->refused_log, S_REFUSED_WINDOW_MS);
    if (withheld)
        sq_info ("%u more connections refused (not logged one by one: at most %d lines per "
                 "%d s)", withheld, S_REFUSED_LINES, S_REFUSED_WINDOW_MS / 1000);
    for (int i = 0; i < S_ZAP_BURST; i++) {
        if (sq_msg_recv (&self->msg, self->zap, ZMQ_DONTWAIT, 8))
            break;
        sq_zap_request_t request;
        char err [200];
        const sq_keyentry_t *entry = NULL;
        const char *why = NULL;
        if (sq_zap_decode_msg (&request, &self->msg, err, sizeof err)) {
            //  A REP socket must answer every request, even one it cannot read.
            why = err;
            memset (&request, 0, sizeof request);
            if (self->msg.n > 1 && sq_msg_size (&self->msg, 1) <= sizeof request.request_id) {
                request.request_id_size = sq_msg_size (&self->msg, 1);
                memcpy (request.request_id, sq_msg_data (&self->msg, 1), request.request_id_size);
            }
        }
        else
        if (!request.curve)
            why = "only CURVE connections are accepted";
        else
        if (!(entry = sq_keyring_find (self->ring, request.z85, SQ_Z85_LEN))
        &&  !(entry = s_task_find (self, request.z85, SQ_Z85_LEN)))
            why = "key not authorized";
        if (why && sq_ratelimit_take (&self->refused_log, S_REFUSED_LINES, S_REFUSED_WINDOW_MS))
            sq_info ("connection refused: %s%s%s", why, request.curve? ": key ": "",
                     request.curve? request.z85: "");
        if (self->before)
            self->before (self->before_arg);
        sq_zap_reply (self->zap, &request, entry != NULL, entry? entry->z85: NULL, why);
        sq_msg_close (&self->msg);
    }
}

const sq_keyentry_t *
auth_find (auth_t *self, const char *z85, size_t len)
{
    const sq_keyentry_t *entry = sq_keyring_find (self->ring, z85, len);
    return entry? entry: s_task_find (self, z85, len);
}

uint64_t
auth_generation (auth_t *self)
{
    //  A task key that went counts as a reload: peers are checked again.
    return sq_keyring_generation (self->ring) + self->task_gen;
}

const sq_cert_t *
auth_cert (auth_t *self)
{
    return &self->cert;
}

void
auth_keysets (auth_t *self, const uint8_t *const **governors, uint32_t *n_governors,
              const uint8_t *const **clients, uint32_t *n_clients)
{
    *governors = self->governors;
    *n_governors = self->n_governors;
    *clients = self->clients;
    *n_clients = self->n_clients;
}
