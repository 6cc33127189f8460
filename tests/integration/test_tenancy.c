/*  test_tenancy: tenants sharing a cluster (docs/security.md, "Quotas and
    fair share"). Always runs with keys on.

    - fair share: while tenant alice floods the one cpu with high-priority
      sleeping tasks, bob's no-op runs at the next free slot: when it has
      finished, most of alice's flood is still waiting (without fair share
      the flood's priority made bob wait for all of it);
    - a cpu cap holds a tenant's tasks beyond it (ready, not failed) while
      other cpus are idle, and they all finish;
    - sessions, constants and stored caps refuse the request that would
      exceed them, naming the cap, the limit and the usage; the refusal
      lifts when usage falls;
    - INFO shows a tenant its own usage and limits, and its own objects,
      queue and watches only;
    - a connected key whose tenant changed in its .pub is refused at its
      next message after SIGHUP; connecting again, it is the new tenant and
      cannot resume the old tenant's session;
    - without keys, the `*` quota binds the one keyless tenant, and a
      broker restarted on its journal counts the sessions it restored.
*/
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_FLOOD 40

static harness_t *s_h;

static sq_client_t *
s_connect (const char *key)
{
    sq_client_t *client = sq_client_new ();
    CHECK_RC (sq_client_set_keys (client, key, harness_key ("broker.pub")), SQ_OK, "keys");
    sq_client_set_resume (client, 0);
    CHECK_RC (sq_client_connect (client, harness_endpoint (s_h), 5000), SQ_OK, "connect %s", key);
    return client;
}

static uint32_t
s_sleep (sq_session_t *session, double seconds)
{
    size_t size;
    void *config = sq_config_sleep (seconds, &size);
    return harness_task (session, "sleep", NULL, 0, 1, config, size);
}

//  --------------------------------------------------------------------------

static void
s_fair_share (const char *alice_key, const char *bob_key)
{
    sq_client_t *alice = s_connect (alice_key), *bob = s_connect (bob_key);
    sq_session_t *flood = sq_session_new (alice);
    uint32_t ids [S_FLOOD];
    for (int i = 0; i < S_FLOOD; i++) {
        ids [i] = s_sleep (flood, 0.5);
        CHECK_RC (sq_task_set_priority (flood, ids [i], 100), SQ_OK, "priority");
    }
    CHECK_RC (sq_submit (flood), SQ_OK, "alice's flood");
    CHECK (harness_info_wait_min (alice, "tasks.running", 1, 20000) >= 1, "the flood runs");
    sq_session_t *mine = sq_session_new (bob);
    uint32_t noop = harness_task (mine, "noop", NULL, 0, 1, NULL, 0);
    CHECK_RC (sq_submit (mine), SQ_OK, "bob's noop");
    CHECK_RC (sq_wait (mine, &noop, 1, 60000), SQ_OK, "bob's noop ran");
    //  Bob's task went at the first slot the flood freed (or the second:
    //  a task of alice's may have been placed as bob's SUBMIT came in).
    long waiting = harness_info_long (alice, "tasks.ready");
    CHECK (waiting >= S_FLOOD - 4, "bob's noop ran while alice's flood waited: %ld of %d "
           "still ready", waiting, S_FLOOD);
    harness_note ("bob's no-op ran while %ld of alice's %d high-priority tasks still waited",
                  waiting, S_FLOOD);
    sq_session_destroy (&mine);
    sq_session_destroy (&flood);
    sq_client_destroy (&bob);
    sq_client_destroy (&alice);
}

//  carol may hold 1 cpu: of 3 one-cpu tasks, 1 runs and 2 wait (the
//  cluster has 2 cpus), then all finish.
static void
s_cpu_cap (const char *carol_key)
{
    sq_client_t *carol = s_connect (carol_key);
    sq_session_t *session = sq_session_new (carol);
    uint32_t ids [3];
    for (int i = 0; i < 3; i++)
        ids [i] = s_sleep (session, 0.5);
    CHECK_RC (sq_submit (session), SQ_OK, "carol's tasks");
    //  Every look: at most 1 busy; until one shows 1 busy and some waiting
    //  (between two tasks none may be busy for a moment).
    bool seen = false;
    double deadline = harness_now () + 30;
    while (!seen && harness_now () < deadline) {
        char *json = harness_info (carol);
        long busy = harness_json_long (json, "tasks.running") + harness_json_long (json, "tasks.assigned");
        long ready = harness_json_long (json, "tasks.ready");
        long held = harness_json_long (json, "tenant.cpus");
        CHECK (busy <= 1 && held == busy && harness_json_long (json, "tenant.limits.cpus") == 1
               && harness_json_long (json, "tasks.failed") == 0,
               "carol holds at most 1 cpu (cap 1), nothing fails: %s", json);
        seen = busy == 1 && ready >= 1;
        free (json);
        if (!seen)
            harness_pause (20);
    }
    CHECK (seen, "one of carol's tasks ran while others waited, ready");
    CHECK_RC (sq_wait (session, ids, 3, 60000), SQ_OK, "all of carol's tasks finish");
    sq_session_destroy (&session);
    sq_client_destroy (&carol);
    harness_note ("a tenant at its cpu cap (1) runs one task at a time on 2 free cpus; the "
                  "others wait and finish");
}

//  The refusal of the last request: code and message with the cap, limit, usage.
static void
s_refused (sq_client_t *client, int rc, const char *cap, const char *limit, const char *usage)
{
    const char *message = sq_client_errmsg (client);
    CHECK (rc == SQ_E_BUSY, "over the %s cap: code %d (%s)", cap, rc, message);
    char quota [64];
    snprintf (quota, sizeof quota, "%s quota exceeded", cap);
    CHECK (strstr (message, quota) && strstr (message, limit) && strstr (message, usage),
           "the refusal names the %s cap, %s and %s: %s", cap, limit, usage, message);
    harness_note ("refused: %s", message);
}

static void
s_caps (const char *dave_key)
{
    sq_client_t *dave = s_connect (dave_key);
    //  sessions=2
    sq_session_t *one = sq_session_new (dave), *two = sq_session_new (dave);
    CHECK (one && two, "two sessions");
    CHECK (sq_session_new (dave) == NULL, "a third session is refused");
    s_refused (dave, sq_client_errcode (dave), "sessions", "limit 2", "in use 2");
    sq_session_destroy (&two);
    two = sq_session_new (dave);
    CHECK (two, "with one closed, a session opens again");
    //  constants=5000: 3000 bytes fit, 3000 more do not.
    uint8_t bytes [3000];
    memset (bytes, 7, sizeof bytes);
    harness_blob (one, bytes, sizeof bytes);
    CHECK_RC (sq_submit (one), SQ_OK, "3000 bytes of constants");
    harness_blob (two, bytes, sizeof bytes);
    s_refused (dave, sq_submit (two), "constants", "limit 4.9 KiB", "in use 2.9 KiB");
    CHECK (strstr (sq_client_errmsg (dave), "this request 2.9 KiB"), "and the request's size");
    sq_session_destroy (&two);
    two = sq_session_new (dave);
    //  stored=10K: a 20000-byte result kept on a governor holds it over.
    uint8_t big [2000];
    memset (big, 1, sizeof big);
    uint32_t parts [10];
    uint32_t part = harness_blob (two, big, sizeof big);
    for (int i = 0; i < 10; i++)
        parts [i] = part;
    sq_session_destroy (&one);      //  its 3000 bytes of constants go
    uint32_t result = harness_task1 (two, "concat", parts, 10, NULL, 0);
    CHECK_RC (sq_keep (two, result), SQ_OK, "keep");
    CHECK_RC (sq_submit (two), SQ_OK, "the 20000-byte result");
    CHECK_RC (sq_wait (two, &result, 1, 30000), SQ_OK, "made");
    //  INFO's stored bytes are at most a second old.
    CHECK (harness_info_wait (dave, "tenant.stored", 20000, 10000) == 20000, "INFO: 20000 bytes stored");
    harness_task (two, "noop", NULL, 0, 1, NULL, 0);
    s_refused (dave, sq_submit (two), "stored", "limit 10.0 KiB", "in use 19.5 KiB");
    CHECK_RC (sq_unkeep (two, result), SQ_OK, "unkeep");
    CHECK (harness_info_wait (dave, "tenant.stored", 0, 10000) == 0, "nothing stored");
    harness_task (two, "noop", NULL, 0, 1, NULL, 0);
    CHECK_RC (sq_submit (two), SQ_OK, "with the result released, a SUBMIT is taken again");
    sq_session_destroy (&two);
    sq_client_destroy (&dave);
}

//  INFO: each sees its own tenant's numbers.
static void
s_info (const char *alice_key, const char *bob_key)
{
    sq_client_t *alice = s_connect (alice_key), *bob = s_connect (bob_key);
    sq_session_t *session = sq_session_new (alice);
    uint8_t bytes [1000];
    memset (bytes, 3, sizeof bytes);
    uint32_t blob = harness_blob (session, bytes, sizeof bytes);
    uint32_t slow = s_sleep (session, 30);
    CHECK_RC (sq_submit (session), SQ_OK, "alice's work");
    (void) blob;
    char *json = harness_info (alice);
    CHECK (harness_json_long (json, "objects") >= 2 && harness_json_long (json, "tenant.constants") == 1000
           && harness_json_long (json, "tenant.sessions") == 1
           && harness_json_long (json, "tenant.limits.sessions") == 0,
           "alice's INFO shows her objects, constants and sessions: %s", json);
    free (json);
    json = harness_info (bob);
    CHECK (harness_json_long (json, "objects") == 0 && harness_json_long (json, "sessions") == 0
           && harness_json_long (json, "tenant.constants") == 0
           && harness_json_long (json, "tenant.sessions") == 0
           && harness_json_long (json, "ready_queue") == 0
           && strstr (json, "\"name\":\"bob\"") && !strstr (json, "alice"),
           "bob's INFO shows none of alice's: %s", json);
    free (json);
    sq_session_destroy (&session);
    (void) slow;
    sq_client_destroy (&bob);
    sq_client_destroy (&alice);
    harness_note ("INFO shows each tenant its own objects, queue, usage and limits");
}

//  A key's tenant changed in its .pub, then SIGHUP.
static void
s_tenant_changed (const char *key)
{
    sq_client_t *client = s_connect (key);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "a session of tenant first");
    uint32_t old_session = sq_session_id (session);
    char *json = harness_info (client);
    CHECK (strstr (json, "\"name\":\"first\""), "tenant first: %s", json);
    free (json);
    //  Rewrite the tenant in the .pub the broker reads.
    char pub [400];
    snprintf (pub, sizeof pub, "%.*s.pub", (int) (strlen (key) - 4), key);
    FILE *f = fopen (pub, "r");
    CHECK (f, "open %s", pub);
    char text [4096];
    size_t n = fread (text, 1, sizeof text - 1, f);
    fclose (f);
    text [n] = 0;
    char *at = strstr (text, "tenant = \"first\"");
    CHECK (at, "the .pub names its tenant: %s", text);
    char changed [4200];
    snprintf (changed, sizeof changed, "%.*stenant = \"second\"%s", (int) (at - text), text,
              at + strlen ("tenant = \"first\""));
    f = fopen (pub, "w");
    CHECK (f && fputs (changed, f) >= 0 && fclose (f) == 0, "rewrite %s", pub);
    CHECK (harness_reload_keys (s_h) == 0, "SIGHUP");
    int rc = 0;
    double deadline = harness_now () + 10;
    while (rc == 0 && harness_now () < deadline) {
        rc = sq_client_info (client, &json);
        if (rc == 0) {
            sq_free (json);
            harness_pause (20);
        }
    }
    CHECK (rc == SQ_E_DENIED && strstr (sq_client_errmsg (client), "tenant changed"),
           "the connection of a key whose tenant changed is refused: %d (%s)", rc,
           sq_client_errmsg (client));
    harness_note ("after SIGHUP: %s", sq_client_errmsg (client));
    sq_session_destroy (&session);
    sq_client_destroy (&client);
    //  Connecting again, it is the new tenant; the old session is not its.
    raw_t *raw = raw_new_keyed (harness_endpoint (s_h), 0, key, harness_key ("broker.pub"));
    CHECK (raw_hello (raw) == 0, "the key connects again");
    sq_request_t q = { .type = SQ_MSG_RESUME, .req = raw_next_req (raw), .session = old_session,
                       .token = { (const char *) raw->token, SQ_TOKEN_LEN } };
    CHECK (raw_request (raw, &q, 5000) == SQ_E_SESSION, "the old tenant's session is "
           "unknown to the new tenant (code %u)", raw->reply.code);
    raw_destroy (&raw);
    client = s_connect (key);
    json = harness_info (client);
    CHECK (strstr (json, "\"name\":\"second\""), "tenant second now: %s", json);
    free (json);
    sq_client_destroy (&client);
    harness_note ("a key whose tenant changed must reconnect, and is then the new tenant");
}

//  Without keys: one anonymous tenant, under the `*` quota; a restart on
//  the journal keeps its session counted.
static void
s_keyless (void)
{
    unsetenv ("SQUALL_TEST_SECURE");
    char dir [] = "/tmp/squall-tenancy-XXXXXX";
    CHECK (mkdtemp (dir), "mkdtemp");
    char journal [300];
    snprintf (journal, sizeof journal, "%s/journal", dir);
    const char *args [] = { "--tenant-quota", "*:sessions=1", "--journal", journal,
                            "--reattach-wait", "10000", NULL };
    harness_t *h = harness_new_args (1, 1, args);
    harness_set_restart_args (h, args);
    sq_client_t *client = harness_client (h);
    sq_session_t *one = sq_session_new (client);
    CHECK (one, "one session");
    CHECK (sq_session_new (client) == NULL, "a second is refused");
    s_refused (client, sq_client_errcode (client), "sessions", "limit 1", "in use 1");
    CHECK (strstr (sq_client_errmsg (client), "tenant (keyless)"), "the keyless tenant: %s",
           sq_client_errmsg (client));
    char *json = harness_info (client);
    CHECK (harness_json_long (json, "tenant.sessions") == 1
           && harness_json_long (json, "tenant.limits.sessions") == 1,
           "INFO shows the keyless tenant's usage and limit: %s", json);
    free (json);
    CHECK (harness_restart_broker (h) == 0, "the broker restarts on its journal");
    CHECK (harness_info_wait (client, "tenant.sessions", 1, 20000) == 1,
           "the restored session is counted");
    CHECK (sq_session_new (client) == NULL, "so a second is still refused");
    s_refused (client, sq_client_errcode (client), "sessions", "limit 1", "in use 1");
    sq_session_destroy (&one);
    sq_session_t *again = sq_session_new (client);
    CHECK (again, "with the restored one closed, a session opens");
    sq_session_destroy (&again);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    unlink (journal);
    rmdir (dir);
    setenv ("SQUALL_TEST_SECURE", "1", 1);
}

int
main (void)
{
    setenv ("SQUALL_TEST_SECURE", "1", 1);
    char *alice = strdup (harness_keygen ("alice", "client", "alice"));
    char *bob = strdup (harness_keygen ("bob", "client", "bob"));
    char *carol = strdup (harness_keygen ("carol", "client", "carol"));
    char *dave = strdup (harness_keygen ("dave", "client", "dave"));
    char *changing = strdup (harness_keygen ("changing", "client", "first"));
    //  One governor of one cpu, nothing queued beyond it: a freed slot is
    //  the scheduler's choice.
    const char *args [] = { "--prefetch", "0", "--heartbeat-ms", "200",
                            "--tenant-quota", "carol:cpus=1",
                            "--tenant-quota", "dave:sessions=2,constants=5000,stored=10K",
                            NULL };
    s_h = harness_new_args (1, 1, args);
    s_fair_share (alice, bob);
    s_info (alice, bob);
    s_caps (dave);
    CHECK (harness_add_governor (s_h, "g1", 1) >= 0, "a second governor");
    s_cpu_cap (carol);
    s_tenant_changed (changing);
    CHECK (harness_destroy (&s_h) == 0, "processes exited cleanly");
    s_keyless ();
    free (alice);
    free (bob);
    free (carol);
    free (dave);
    free (changing);
    printf ("test_tenancy: all checks passed\n");
    return 0;
}
