/*  test_load: 32 concurrent clients, each in its own thread with its own
    sq_client_t, each submitting one 2 000-task graph whose result is
    checked byte-exact; three waves of them. The broker's resident memory
    (VmRSS of /proc/<pid>/status) is read after the first wave (warm-up:
    allocator arenas and tables reach their working size) and after the
    later waves, once every session of theirs is closed.

    "Back near the starting figure": after the last wave the RSS is at most
    the after-warm-up figure plus max (20 MiB, 25 %). A leak of even 300
    bytes per task would add about 38 MiB over two waves of 64 000 tasks.
    Under AddressSanitizer the RSS figures are printed but not judged (its
    quarantine holds freed memory); there LeakSanitizer judges instead, at
    the broker's exit, which harness_destroy requires to be clean.

    Graph of one client (seed = client number): a constant of 2 000 bytes;
    1 000 slice tasks taking bytes [2j, 2j+2); 999 concat tasks joining them
    back pairwise as a balanced tree; one noop passing the root on. The
    kept result must equal the constant.

    Environment: SQUALL_LOAD_CLIENTS, SQUALL_LOAD_TASKS, SQUALL_LOAD_WAVES
    change the sizes (defaults 32, 2000, 3). */
#include "../integration/harness.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static harness_t *h;
static int s_clients = 32;
static int s_tasks = 2000;          //  per graph: leaves + (leaves - 1) + 1
static atomic_int s_done;
static atomic_int s_failed;
static atomic_int s_dropped;        //  live connections the broker dropped

typedef struct {
    int index;
    int wave;
    double seconds;
    pthread_t thread;
} s_worker_t;

static int
s_env_int (const char *name, int fallback)
{
    const char *value = getenv (name);
    return value && atoi (value) > 0? atoi (value): fallback;
}

static long
s_rss_kib (pid_t pid)
{
    char path [64], line [256];
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *f = fopen (path, "r");
    long kib = -1;
    if (!f)
        return -1;
    while (fgets (line, sizeof line, f))
        if (strncmp (line, "VmRSS:", 6) == 0)
            kib = atol (line + 6);
    fclose (f);
    return kib;
}

//  One try at the client's graph: 0 when correct, 1 when the broker dropped
//  the connection (problem says where), -1 on any other failure.
static int
s_attempt (s_worker_t *self, char *problem, size_t problem_size)
{
    int lost = 0;
    sq_client_t *client = sq_client_new ();
    sq_session_t *session = NULL;
    uint32_t *level = NULL;
    void *got = NULL;
    size_t got_size = 0;
    int leaves = (s_tasks - 1 + 1) / 2;             //  2n - 1 + 1 = tasks
    size_t size = (size_t) leaves * 2;
    uint8_t *data = (uint8_t *) malloc (size);
    harness_pattern (data, size, (uint32_t) (self->wave * 1000 + self->index));
    if (!client || sq_client_connect (client, harness_endpoint (h), 10000)) {
        snprintf (problem, problem_size, "connect: %s", client? sq_client_errmsg (client): "no memory");
        goto done;
    }
    session = sq_session_new (client);
    if (!session) {
        snprintf (problem, problem_size, "session: %s", sq_client_errmsg (client));
        goto done;
    }
    uint32_t blob = sq_blob (session, data, size, NULL);
    level = (uint32_t *) malloc (sizeof (uint32_t) * (size_t) leaves);
    int n = 0, made = 0;
    for (int j = 0; j < leaves; j++) {
        size_t cfg_size;
        void *cfg = sq_config_slice ((uint64_t) j * 2, (int64_t) j * 2 + 2, &cfg_size);
        uint32_t t = sq_task (session, "slice", &blob, 1, 1, cfg, cfg_size);
        sq_free (cfg);
        level [n++] = sq_output (t, 0);
        made++;
    }
    while (n > 1) {
        int m = 0;
        for (int j = 0; j + 1 < n; j += 2) {
            uint32_t t = sq_task (session, "concat", &level [j], 2, 1, NULL, 0);
            level [m++] = sq_output (t, 0);
            made++;
        }
        if (n % 2)
            level [m++] = level [n - 1];
        n = m;
    }
    uint32_t last = sq_task (session, "noop", &level [0], 1, 1, NULL, 0);
    made++;
    uint32_t result = sq_output (last, 0);
    if (!blob || !last || made != s_tasks || sq_keep (session, result)) {
        snprintf (problem, problem_size, "graph building (%d tasks): %s", made, sq_client_errmsg (client));
        goto done;
    }
    if (sq_submit (session)) {
        snprintf (problem, problem_size, "submit: %s", sq_client_errmsg (client));
        goto done;
    }
    int rc = sq_fetch (session, result, 120000, &got, &got_size, NULL);
    if (rc)
        snprintf (problem, problem_size, "fetch: %s", sq_client_errmsg (client));
    else
    if (got_size != size || memcmp (got, data, size))
        snprintf (problem, problem_size, "result differs (%zu bytes, expected %zu)", got_size, size);
done:
    lost = client && sq_client_errcode (client) == SQ_E_CONNECTION;
    sq_free (got);
    free (level);
    free (data);
    sq_session_destroy (&session);
    sq_client_destroy (&client);
    return *problem? (lost? 1: -1): 0;
}

//  A client whose connection the broker dropped tries again with a new
//  one (up to 3 times), so that the load and memory figures are still
//  measured; every drop is counted and fails the test at the end.
static void *
s_worker (void *arg)
{
    s_worker_t *self = (s_worker_t *) arg;
    double t0 = harness_now ();
    char problem [256] = "";
    int rc = 1;
    for (int attempt = 0; attempt < 3 && rc == 1; attempt++) {
        *problem = 0;
        rc = s_attempt (self, problem, sizeof problem);
        if (rc == 1) {
            printf ("DROPPED wave %d client %d: %s\n", self->wave, self->index, problem);
            fflush (stdout);
            atomic_fetch_add (&s_dropped, 1);
        }
    }
    if (rc) {
        printf ("FAIL wave %d client %d: %s\n", self->wave, self->index, problem);
        fflush (stdout);
        atomic_fetch_add (&s_failed, 1);
    }
    self->seconds = harness_now () - t0;
    atomic_fetch_add (&s_done, 1);
    return NULL;
}

//  One wave; returns the peak RSS seen while it ran (KiB)
static long
s_wave (int wave, sq_client_t *monitor)
{
    s_worker_t *workers = (s_worker_t *) calloc ((size_t) s_clients, sizeof *workers);
    atomic_store (&s_done, 0);
    double t0 = harness_now ();
    for (int i = 0; i < s_clients; i++) {
        workers [i].index = i;
        workers [i].wave = wave;
        CHECK (pthread_create (&workers [i].thread, NULL, s_worker, &workers [i]) == 0, "thread");
    }
    long peak = 0;
    double deadline = t0 + 600;
    while (atomic_load (&s_done) < s_clients) {
        long rss = s_rss_kib (harness_broker_pid (h));
        if (rss > peak)
            peak = rss;
        CHECK (harness_now () < deadline, "wave %d: %d of %d clients done after 600 s",
               wave, atomic_load (&s_done), s_clients);
        harness_pause (100);
    }
    double slowest = 0;
    for (int i = 0; i < s_clients; i++) {
        pthread_join (workers [i].thread, NULL);
        if (workers [i].seconds > slowest)
            slowest = workers [i].seconds;
    }
    double took = harness_now () - t0;
    free (workers);
    CHECK (atomic_load (&s_failed) == 0, "wave %d: %d clients failed", wave, atomic_load (&s_failed));
    //  Every session of the wave closed: only the monitor is connected
    long clients = harness_info_wait (monitor, "clients", 1, 30000);
    long sessions = harness_info_wait (monitor, "sessions", 0, 30000);
    CHECK (clients == 1 && sessions == 0, "wave %d: sessions closed (clients %ld, sessions %ld)",
           wave, clients, sessions);
    long objects = harness_info_wait (monitor, "objects", 0, 30000);
    CHECK (objects == 0, "wave %d: every object freed (objects %ld)", wave, objects);
    harness_note ("wave %d: %d clients x %d tasks correct in %.1f s (%.0f tasks/s, slowest "
                  "client %.1f s), broker peak RSS %.1f MiB", wave, s_clients, s_tasks, took,
                  s_clients * s_tasks / took, slowest, peak / 1024.0);
    return peak;
}

int
main (void)
{
    s_clients = s_env_int ("SQUALL_LOAD_CLIENTS", 32);
    s_tasks = s_env_int ("SQUALL_LOAD_TASKS", 2000);
    if (s_tasks % 2)
        s_tasks++;
    int waves = s_env_int ("SQUALL_LOAD_WAVES", 3);
    if (waves < 2)
        waves = 2;
    h = harness_new (2, 2);
    sq_client_t *monitor = harness_client (h);
    pid_t broker = harness_broker_pid (h);
    long rss0 = s_rss_kib (broker);
    harness_note ("broker RSS before any load: %.1f MiB", rss0 / 1024.0);

    s_wave (0, monitor);
    long start = s_rss_kib (broker);
    harness_note ("broker RSS after the warm-up wave, sessions closed: %.1f MiB (the starting figure)",
                  start / 1024.0);
    long end = start;
    for (int wave = 1; wave < waves; wave++) {
        s_wave (wave, monitor);
        end = s_rss_kib (broker);
        harness_note ("broker RSS after wave %d, sessions closed: %.1f MiB (%+.1f MiB from the start)",
                      wave, end / 1024.0, (end - start) / 1024.0);
    }
    long allowed = start / 4 > 20 * 1024? start / 4: 20 * 1024;
#if defined (__SANITIZE_ADDRESS__)
    harness_note ("AddressSanitizer build: RSS not judged (quarantine); LeakSanitizer judges "
                  "at the broker's exit (allowed would be +%.1f MiB)", allowed / 1024.0);
#else
    CHECK (end - start <= allowed, "broker RSS %.1f MiB after the load, %.1f MiB at the start: "
           "more than %.1f MiB more", end / 1024.0, start / 1024.0, allowed / 1024.0);
    harness_note ("broker RSS back near its starting figure: %+.1f MiB (allowed +%.1f MiB)",
                  (end - start) / 1024.0, allowed / 1024.0);
#endif
    harness_client_destroy (&monitor);
    CHECK (harness_destroy (&h) == 0, "broker and governors exited cleanly");
    CHECK (atomic_load (&s_dropped) == 0, "the broker dropped %d live client connections "
           "(DROPPED lines above; each client then tried again on a new one)",
           atomic_load (&s_dropped));
    printf ("test_load: OK\n");
    return 0;
}
