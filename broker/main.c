/*  squall-broker: command line and signals; the work is in broker.c. */
#include "broker.h"
#include "tenancy.h"
#include "args.h"
#include "log.h"
#include "parentwatch.h"
#include "proto.h"
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static broker_t *s_broker;
static tenancy_quota_t s_quotas [TENANCY_MAX_QUOTAS];

//  A stop is bounded whatever the peers do: if the reactor has not wound
//  down S_STOP_GRACE seconds after the signal (a second one: at once), the
//  process leaves. What the journal holds was written at the end of every
//  turn (journal.h), so only its last fdatasync is skipped.
#define S_STOP_GRACE 10


static void
s_signal (int signum)
{
    static volatile sig_atomic_t stops;
    if (s_broker && signum == SIGHUP)
        broker_reload (s_broker);
    else
    if (s_broker) {
        broker_stop (s_broker);
        if (stops++)
            sq_stop_watchdog (signum);
        alarm (S_STOP_GRACE);
    }
}

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: squall-broker [options]\n"
        "  --listen ENDPOINT     ZeroMQ endpoint to bind (default tcp://*:7760 with keys,\n"
        "                        tcp://127.0.0.1:7760 without; tcp://127.0.0.1:* picks\n"
        "                        a free port)\n"
        "  --secret-key FILE     the broker's key pair (squall keygen NAME --role broker);\n"
        "                        with --authorized-keys, every connection is CURVE\n"
        "                        encrypted and authenticated (docs/security.md)\n"
        "  --authorized-keys DIR the *.pub keys (client, governor, admin) it accepts;\n"
        "                        re-read on SIGHUP\n"
        "  --insecure            allow a non-loopback endpoint (--listen, --http)\n"
        "                        without keys\n"
        "  --shared-governor-keys  let several live governors use one governor key\n"
        "                        (default: a key already connected as a governor is\n"
        "                        refused until that governor's connection is gone)\n"
        "  --capability-ttl-ms MS  how long a client may read or upload an object on a\n"
        "                        governor after asking the broker (default 60000)\n"
        "  --journal FILE        keep sessions, graphs and results in FILE: a restarted\n"
        "                        broker resumes from it, governors reattach with their\n"
        "                        objects and clients resume their sessions\n"
        "  --journal-sync MS     make the journal durable this often (default 100)\n"
        "  --journal-compact SIZE  never compact a journal smaller than SIZE (64MiB)\n"
        "  --session-grace MS    how long a session whose client went away waits for it\n"
        "                        to resume (default 60000; 0 closes it at once)\n"
        "  --job-retention TIME  how long a job that ended and that no client holds\n"
        "                        is kept (7d by default; units ms s m h d; 0: for ever)\n"
        "  --job-limit N         at most N such jobs are kept, the oldest go (10000)\n"
        "  --resource-wait SECONDS  how long a task that no connected governor has the\n"
        "                        cpus and resources for waits for one to join before it\n"
        "                        fails (default 60; time with no governor connected\n"
        "                        does not count; 0 fails it at once, and refuses at\n"
        "                        submit one above what every governor offered)\n"
        "  --reattach-wait MS    how long a restarted broker waits for its governors\n"
        "                        before it recomputes what they held (default 15000)\n"
        "  --heartbeat-ms MS     governor heartbeat interval (default 1000)\n"
        "  --liveness N          missed heartbeats before a governor is dead (default 5)\n"
        "  --inline-max SIZE     objects up to SIZE travel inline (default 4KiB)\n"
        "  --max-message SIZE    largest frame accepted (default 256MiB)\n"
        "  --prefetch N          tasks queued per governor beyond its cpus (default 1024)\n"
        "  --queue-ms N          queue about N ms of a governor's recent task durations\n"
        "                        per cpu, at most --prefetch tasks (default 2)\n"
        "  --allowed-failures N  governor deaths a running task may see before it\n"
        "                        fails as their suspected cause (default 3)\n"
        "  --upload-timeout-ms MS  how long an uploaded constant's SUBMIT and its\n"
        "                        governor's confirmation wait for each other (default 10000)\n"
        "  --http [HOST:]PORT    serve the dashboard, /metrics and the JSON API\n"
        "                        (port 0 picks a free one; HOST 127.0.0.1 unless given,\n"
        "                        another needs keys or --insecure; docs/dashboard.md)\n"
        "  --http-token FILE     with keys: every dashboard request but /metrics must\n"
        "                        carry this file's token\n"
        "  --tenant-quota TENANT:cpus=N,stored=SIZE,constants=SIZE,sessions=N,weight=W\n"
        "                        limits of a tenant (* for every tenant not named; any\n"
        "                        subset of the fields; repeatable): cpus its tasks hold\n"
        "                        at once (more wait), bytes of its results on governors\n"
        "                        and of its constants, open sessions (over them a\n"
        "                        request is refused), and its weight in the fair share\n"
        "                        of cpus between tenants (default 1; docs/security.md)\n"
        "  --event-log FILE      append every event to FILE (docs/eventlog.md)\n"
        "  --log-level LEVEL     error, warn, info or debug (default info)\n"
        "  --help                this text\n"
        "  --version             the version of squall and of its protocol\n"
        "Prints 'LISTENING <endpoint>' on stdout once bound, then\n"
        "'HTTP <port>' when serving the dashboard.\n");
}

//  Whether --help lists the option: any other is unknown, whether a value
//  follows or not.
static bool
s_known (const char *arg)
{
    char *text = NULL;
    size_t size = 0;
    FILE *usage = open_memstream (&text, &size);
    if (!usage)
        return true;            //  the value check still applies
    s_usage (usage);
    fclose (usage);
    char line [128];
    snprintf (line, sizeof line, "\n  %s ", arg);
    bool known = text && strlen (arg) < 100 && strstr (text, line);
    free (text);
    return known;
}

int
main (int argc, char *argv [])
{
    broker_config_t config;
    broker_config_defaults (&config);
    bool listen_given = false;
    static char listen [SQ_MAX_NAME + 8];
    for (int i = 1; i < argc; i++) {
        const char *arg = argv [i];
        const char *value = i + 1 < argc? argv [i + 1]: NULL;
        int64_t n;
        uint64_t size;
        if (strcmp (arg, "--help") == 0 || strcmp (arg, "-h") == 0) {
            s_usage (stdout);
            return 0;
        }
        if (strcmp (arg, "--version") == 0) {
            printf ("squall-broker %d.%d.%d (protocol %d)\n", SQUALL_VERSION_MAJOR,
                    SQUALL_VERSION_MINOR, SQUALL_VERSION_PATCH, SQUALL_PROTOCOL_VERSION);
            return 0;
        }
        if (strcmp (arg, "--insecure") == 0) {
            config.insecure = true;
            continue;
        }
        if (strcmp (arg, "--shared-governor-keys") == 0) {
            config.shared_governor_keys = true;
            continue;
        }
        if (!s_known (arg)) {
            fprintf (stderr, "squall-broker: unknown option %s (see --help)\n", arg);
            return 2;
        }
        if (!value) {
            fprintf (stderr, "squall-broker: %s needs a value (see --help)\n", arg);
            return 2;
        }
        i++;
        if (strcmp (arg, "--listen") == 0) {
            char err [300];
            if (sq_parse_endpoint (value, listen, sizeof listen, err, sizeof err)) {
                fprintf (stderr, "squall-broker: --listen %s\n", err);
                return 2;
            }
            config.listen = listen;
            listen_given = true;
        }
        else
        if (strcmp (arg, "--secret-key") == 0 && *value)
            config.secret_key = value;
        else
        if (strcmp (arg, "--authorized-keys") == 0 && *value)
            config.authorized_keys = value;
        else
        if (strcmp (arg, "--http-token") == 0 && *value)
            config.http_token = value;
        else
        if (strcmp (arg, "--capability-ttl-ms") == 0 && sq_parse_int (value, 1, 86400000, &n) == 0)
            config.capability_ttl_ms = (int) n;
        else
        if (strcmp (arg, "--journal") == 0 && *value)
            config.journal = value;
        else
        if (strcmp (arg, "--journal-sync") == 0 && sq_parse_int (value, 1, 60000, &n) == 0)
            config.journal_sync_ms = (int) n;
        else
        if (strcmp (arg, "--journal-compact") == 0 && sq_parse_size (value, &size) == 0)
            config.journal_compact = size;
        else
        if (strcmp (arg, "--session-grace") == 0 && sq_parse_int (value, 0, 86400000, &n) == 0)
            config.session_grace_ms = (int) n;
        else
        if (strcmp (arg, "--job-retention") == 0 && sq_parse_duration_ms (value, &n) == 0)
            config.job_retention_ms = n;
        else
        if (strcmp (arg, "--job-limit") == 0 && sq_parse_int (value, 0, 100000000, &n) == 0)
            config.job_limit = (uint32_t) n;
        else
        if (strcmp (arg, "--resource-wait") == 0 && sq_parse_int (value, 0, 86400, &n) == 0)
            config.resource_wait_ms = (int) n * 1000;
        else
        if (strcmp (arg, "--reattach-wait") == 0 && sq_parse_int (value, 0, 3600000, &n) == 0)
            config.reattach_wait_ms = (int) n;
        else
        if (strcmp (arg, "--heartbeat-ms") == 0 && sq_parse_int (value, 10, 3600000, &n) == 0)
            config.heartbeat_ms = (int) n;
        else
        if (strcmp (arg, "--liveness") == 0 && sq_parse_int (value, 2, 1000, &n) == 0)
            config.liveness = (int) n;
        else
        if (strcmp (arg, "--inline-max") == 0 && sq_parse_size (value, &size) == 0
            && size <= (64u << 20))
            config.inline_max = size;
        else
        if (strcmp (arg, "--max-message") == 0 && sq_parse_size (value, &size) == 0
            && size >= 4096 && size <= ((uint64_t) 1 << 32))
            config.max_message = size;
        else
        if (strcmp (arg, "--prefetch") == 0 && sq_parse_int (value, 0, 1000000, &n) == 0)
            config.prefetch = (uint32_t) n;
        else
        if (strcmp (arg, "--queue-ms") == 0 && sq_parse_int (value, 1, 3600000, &n) == 0)
            config.queue_us = (uint32_t) n * 1000;
        else
        if (strcmp (arg, "--allowed-failures") == 0 && sq_parse_int (value, 1, 1000, &n) == 0)
            config.allowed_failures = (uint32_t) n;
        else
        if (strcmp (arg, "--upload-timeout-ms") == 0 && sq_parse_int (value, 1, 3600000, &n) == 0)
            config.upload_timeout_ms = (int) n;
        else
        if (strcmp (arg, "--http") == 0 && *value)
            config.http = value;
        else
        if (strcmp (arg, "--tenant-quota") == 0) {
            char err [400];
            if (config.n_tenant_quotas == TENANCY_MAX_QUOTAS) {
                fprintf (stderr, "squall-broker: at most %d --tenant-quota\n", TENANCY_MAX_QUOTAS);
                return 2;
            }
            if (tenancy_quota_parse (value, &s_quotas [config.n_tenant_quotas], err, sizeof err)) {
                fprintf (stderr, "squall-broker: %s\n", err);
                return 2;
            }
            config.tenant_quotas = s_quotas;
            config.n_tenant_quotas++;
        }
        else
        if (strcmp (arg, "--event-log") == 0 && *value)
            config.event_log = value;
        else
        if (strcmp (arg, "--log-level") == 0 && sq_log_parse_level (value) >= 0)
            sq_log_set_level ((sq_log_level_t) sq_log_parse_level (value));
        else {
            fprintf (stderr, "squall-broker: invalid option or value: %s %s (see --help)\n", arg, value);
            return 2;
        }
    }
    sq_log_set_name ("broker");
    //  Without keys the default stays on this machine (broker.c refuses
    //  anything else without --insecure).
    if (!listen_given && !config.secret_key)
        config.listen = "tcp://127.0.0.1:7760";
    signal (SIGPIPE, SIG_IGN);
    //  A bad $SQUALL_PARENT_FD is refused before anything starts: a broker
    //  its starter thinks it can stop must not run unwatched.
    char err [256];
    parentwatch_t *watch = NULL;
    if (parentwatch_from_env (&watch, err, sizeof err)) {
        fprintf (stderr, "squall-broker: %s\n", err);
        return 2;
    }
    s_broker = broker_new (&config);
    if (!s_broker) {
        parentwatch_destroy (&watch);
        return 1;
    }
    struct sigaction action;
    memset (&action, 0, sizeof action);
    action.sa_handler = s_signal;
    sigaction (SIGINT, &action, NULL);
    sigaction (SIGTERM, &action, NULL);
    sigaction (SIGHUP, &action, NULL);
    action.sa_handler = sq_stop_watchdog;
    sigaction (SIGALRM, &action, NULL);
    printf ("LISTENING %s\n", broker_endpoint (s_broker));
    if (broker_http_port (s_broker))
        printf ("HTTP %u\n", broker_http_port (s_broker));
    fflush (stdout);
    sq_info ("listening on %s", broker_endpoint (s_broker));
    int rc = broker_run (s_broker);
    sq_info ("stopping");
    broker_destroy (&s_broker);
    parentwatch_destroy (&watch);
    return rc;
}
