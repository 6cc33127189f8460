/*  tenants: one tenant's no-op latency while another floods the cluster
    (fair share between tenants, docs/security.md "Quotas and fair share").

    usage: squall-bench-tenants ENDPOINT BROKER_PUB FLOOD_KEY PROBE_KEY
                                [FLOOD_TASKS [SLEEP_S [PROBES]]]

    The flooding tenant (FLOOD_KEY) submits FLOOD_TASKS (300) built-in
    sleep tasks of SLEEP_S (0.2) seconds at priority 100; once they run,
    the other tenant (PROBE_KEY) submits PROBES (10) no-ops one after the
    other and times each from its SUBMIT to the end of its WAIT. Prints the
    median and the largest, and how many flood tasks had finished by the
    end. bench/tenants.py starts the cluster (keys, two tenants) and runs
    this. */
#include "squall.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static sq_client_t *
s_connect (const char *endpoint, const char *key, const char *broker_pub)
{
    sq_client_t *client = sq_client_new ();
    if (!client || sq_client_set_keys (client, key, broker_pub)
    ||  sq_client_connect (client, endpoint, 10000)) {
        fprintf (stderr, "bench: connect with %s: %s\n", key,
                 client? sq_client_errmsg (client): "out of memory");
        exit (1);
    }
    return client;
}

//  A number from INFO's JSON: the first "key": after `after` (or the start).
static long
s_json_long (const char *json, const char *after, const char *key)
{
    const char *p = after? strstr (json, after): json;
    char needle [64];
    snprintf (needle, sizeof needle, "\"%s\":", key);
    p = p? strstr (p, needle): NULL;
    return p? strtol (p + strlen (needle), NULL, 10): -1;
}

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y? -1: x > y;
}

int
main (int argc, char *argv [])
{
    if (argc < 5) {
        fprintf (stderr, "usage: squall-bench-tenants ENDPOINT BROKER_PUB FLOOD_KEY PROBE_KEY "
                 "[FLOOD_TASKS [SLEEP_S [PROBES]]]\n");
        return 2;
    }
    const char *endpoint = argv [1], *broker_pub = argv [2];
    int flood_n = argc > 5? atoi (argv [5]): 300;
    double sleep_s = argc > 6? atof (argv [6]): 0.2;
    int probes = argc > 7? atoi (argv [7]): 10;
    if (flood_n < 1 || sleep_s <= 0 || probes < 1 || probes > 1000) {
        fprintf (stderr, "bench: bad arguments\n");
        return 2;
    }
    sq_client_t *flooder = s_connect (endpoint, argv [3], broker_pub);
    sq_client_t *prober = s_connect (endpoint, argv [4], broker_pub);
    sq_session_t *flood = sq_session_new (flooder), *probe = sq_session_new (prober);
    if (!flood || !probe) {
        fprintf (stderr, "bench: sessions: %s\n", sq_client_errmsg (flood? prober: flooder));
        return 1;
    }
    size_t size;
    void *config = sq_config_sleep (sleep_s, &size);
    for (int i = 0; i < flood_n; i++) {
        uint32_t id = sq_task (flood, "sleep", NULL, 0, 1, config, size);
        if (!id || sq_task_set_priority (flood, id, 100)) {
            fprintf (stderr, "bench: flood task: %s\n", sq_client_errmsg (flooder));
            return 1;
        }
    }
    sq_free (config);
    if (sq_submit (flood)) {
        fprintf (stderr, "bench: flood submit: %s\n", sq_client_errmsg (flooder));
        return 1;
    }
    //  The flood holds every cpu before the first probe.
    char *json = NULL;
    double deadline = s_now () + 30;
    long running = 0;
    while (running < 1 && s_now () < deadline) {
        if (sq_client_info (flooder, &json) == 0) {
            running = s_json_long (json, "\"tasks\"", "running");
            sq_free (json);
        }
    }
    double *latency = (double *) calloc ((size_t) probes, sizeof *latency);
    for (int p = 0; p < probes; p++) {
        double t0 = s_now ();
        uint32_t id = sq_task (probe, "noop", NULL, 0, 1, NULL, 0);
        if (!id || sq_submit (probe) || sq_wait (probe, &id, 1, 600000)) {
            fprintf (stderr, "bench: probe: %s\n", sq_client_errmsg (prober));
            return 1;
        }
        latency [p] = s_now () - t0;
    }
    long finished = -1, ready = -1;
    if (sq_client_info (flooder, &json) == 0) {
        finished = s_json_long (json, "\"tasks\"", "finished");
        ready = s_json_long (json, "\"tasks\"", "ready");
        sq_free (json);
    }
    qsort (latency, (size_t) probes, sizeof *latency, s_cmp);
    printf ("flood: %d sleep tasks of %.3f s at priority 100; probe: %d no-ops of another "
            "tenant, one after the other: latency median %.1f ms, max %.1f ms; flood tasks "
            "finished by then %ld, still ready %ld\n", flood_n, sleep_s, probes,
            latency [probes / 2] * 1000, latency [probes - 1] * 1000, finished, ready);
    free (latency);
    sq_session_destroy (&probe);
    sq_session_destroy (&flood);
    sq_client_destroy (&prober);
    sq_client_destroy (&flooder);
    return 0;
}
