/*  test_broker_taskkeys: the keys of tasks that submit tasks in the
    broker's auth (broker/peers/auth.c, docs/security.md "Tasks that submit
    tasks"), in-process with a real keyring and ZAP socket.

    - a registered key is found as a client of the tenant given (never an
      admin), and is a task key; an unknown one is not;
    - it is found only while the broker says its attempt lives: a dead one
      is not found and is dropped (the generation moves, so connections
      made with it are checked again);
    - past its hard expiry it is not found, whatever the attempt does;
    - a keyring key cannot be registered as a task's, nor a key twice;
    - the table is bounded: full of live keys, the next is refused; once
      some died, they make room.
*/
#include "auth.h"
#include "squall.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

//  Attempts the "broker" says still run: task key -> alive.
static uint64_t s_dead_task = UINT64_MAX;

static bool
s_live (void *arg, const auth_taskref_t *ref)
{
    (void) arg;
    return ref->task != s_dead_task;
}

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_key (uint8_t *key, char *z85, uint32_t seed)
{
    for (int i = 0; i < 32; i++)
        key [i] = (uint8_t) (seed * 2654435761u >> (i % 24)) ^ (uint8_t) (i * 37 + seed);
    memcpy (key, &seed, sizeof seed);
    zmq_z85_encode (z85, key, 32);
}

int
main (void)
{
    char dir [] = "/tmp/squall-taskkeys-XXXXXX";
    CHECK (mkdtemp (dir), "mkdtemp");
    char authorized [600], secret [700], err [600];
    snprintf (authorized, sizeof authorized, "%s/authorized", dir);
    CHECK (mkdir (authorized, 0700) == 0, "mkdir");
    CHECK (sq_keygen ("broker", dir, "broker", NULL, err, sizeof err) == 0, "%s", err);
    CHECK (sq_keygen ("alice", authorized, "admin", "a", err, sizeof err) == 0, "%s", err);
    snprintf (secret, sizeof secret, "%s/broker.key", dir);
    void *ctx = zmq_ctx_new ();
    auth_t *auth = auth_new (ctx, secret, authorized);
    CHECK (auth, "auth_new");
    auth_set_live (auth, s_live, NULL);

    uint8_t key [32];
    char z85 [41];
    s_key (key, z85, 1);
    CHECK (!auth_find (auth, z85, 40) && !auth_is_task_key (auth, z85, 40), "unknown key");
    auth_taskref_t ref = { 7, 1, 3, s_now_ms () + 60000 };
    CHECK (auth_task_key_add (auth, key, "a", &ref) == 0, "add");
    const sq_keyentry_t *entry = auth_find (auth, z85, 40);
    CHECK (entry && entry->role == SQ_ROLE_CLIENT && strcmp (entry->tenant, "a") == 0,
           "a task key is a client of its task's tenant");
    CHECK (auth_is_task_key (auth, z85, 40), "is a task key");
    CHECK (auth_task_key_add (auth, key, "b", &ref) == -1, "a key twice");
    CHECK (strcmp (auth_find (auth, z85, 40)->tenant, "a") == 0, "unchanged");

    //  Its attempt ends: not found, dropped, and the generation moves.
    uint64_t generation = auth_generation (auth);
    s_dead_task = 7;
    CHECK (!auth_find (auth, z85, 40), "a dead attempt's key");
    CHECK (auth_generation (auth) != generation, "generation moved");
    CHECK (!auth_is_task_key (auth, z85, 40) && auth_task_keys (auth) == 0, "dropped");
    s_dead_task = UINT64_MAX;
    CHECK (!auth_find (auth, z85, 40), "gone for good");

    //  The hard expiry, whatever the attempt does.
    s_key (key, z85, 2);
    auth_taskref_t old = { 8, 1, 3, s_now_ms () - 1 };
    CHECK (auth_task_key_add (auth, key, "a", &old) == 0, "add");
    CHECK (!auth_find (auth, z85, 40), "expired");

    //  A keyring key is never a task's.
    FILE *pub = NULL;
    char path [700], line [200], ring_z85 [41] = "";
    snprintf (path, sizeof path, "%s/alice.pub", authorized);
    CHECK ((pub = fopen (path, "r")), "alice.pub");
    while (fgets (line, sizeof line, pub))
        if (sscanf (line, " public-key = \"%40[^\"]\"", ring_z85) == 1)
            break;
    fclose (pub);
    uint8_t ring_key [32];
    CHECK (strlen (ring_z85) == 40 && zmq_z85_decode (ring_key, ring_z85), "alice's key");
    CHECK (auth_task_key_add (auth, ring_key, "b", &ref) == -1, "a keyring key");
    CHECK (auth_find (auth, ring_z85, 40)->role == SQ_ROLE_ADMIN, "still alice's");

    //  Bounded: full of live keys, the next is refused; dead ones make room.
    for (uint32_t i = 0; i < AUTH_TASK_KEYS_MAX; i++) {
        s_key (key, z85, 1000 + i);
        auth_taskref_t r = { 100 + (i % 2), 1, 3, s_now_ms () + 60000 };
        CHECK (auth_task_key_add (auth, key, "a", &r) == 0,
               "add %u", i);
    }
    size_t full = auth_task_keys (auth);
    CHECK (full == AUTH_TASK_KEYS_MAX, "full: %zu", full);
    s_key (key, z85, 99999);
    auth_taskref_t next = { 200, 1, 3, s_now_ms () + 60000 };
    CHECK (auth_task_key_add (auth, key, "a", &next) == -1, "over the bound");
    s_dead_task = 100;          //  half of them die
    CHECK (auth_task_key_add (auth, key, "a", &next) == 0, "room made");
    CHECK (auth_task_keys (auth) == AUTH_TASK_KEYS_MAX / 2 + 1, "%zu", auth_task_keys (auth));
    CHECK (auth_find (auth, z85, 40), "the new one");

    auth_destroy (&auth);
    CHECK (!auth, "destroyed");
    zmq_ctx_term (ctx);
    char cmd [700];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK (system (cmd) == 0, "cleanup");
    printf ("test_broker_taskkeys: OK\n");
    return 0;
}
