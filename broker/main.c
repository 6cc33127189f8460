/*  squall-broker: command line and signals; the work is in broker.c. */
#include "broker.h"
#include "args.h"
#include "log.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>

static broker_t *s_broker;

static void
s_signal (int signum)
{
    (void) signum;
    if (s_broker)
        broker_stop (s_broker);
}

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: squall-broker [options]\n"
        "  --listen ENDPOINT     ZeroMQ endpoint to bind (default tcp://*:7760;\n"
        "                        tcp://127.0.0.1:* picks a free port)\n"
        "  --heartbeat-ms MS     governor heartbeat interval (default 1000)\n"
        "  --liveness N          missed heartbeats before a governor is dead (default 5)\n"
        "  --inline-max SIZE     objects up to SIZE travel inline (default 4KiB)\n"
        "  --max-message SIZE    largest frame accepted (default 256MiB)\n"
        "  --prefetch N          tasks queued per governor beyond its cpus (default 1024)\n"
        "  --allowed-failures N  governor deaths a running task may see before it\n"
        "                        fails as their suspected cause (default 3)\n"
        "  --upload-timeout-ms MS  how long an uploaded constant's SUBMIT and its\n"
        "                        governor's confirmation wait for each other (default 10000)\n"
        "  --http [HOST:]PORT    serve the dashboard, /metrics and the JSON API\n"
        "                        (port 0 picks a free one; see docs/dashboard.md)\n"
        "  --event-log FILE      append every event to FILE (docs/eventlog.md)\n"
        "  --log-level LEVEL     error, warn, info or debug (default info)\n"
        "  --help                this text\n"
        "Prints 'LISTENING <endpoint>' on stdout once bound, then\n"
        "'HTTP <port>' when serving the dashboard.\n");
}

int
main (int argc, char *argv [])
{
    broker_config_t config;
    broker_config_defaults (&config);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv [i];
        const char *value = i + 1 < argc? argv [i + 1]: NULL;
        int64_t n;
        uint64_t size;
        if (strcmp (arg, "--help") == 0 || strcmp (arg, "-h") == 0) {
            s_usage (stdout);
            return 0;
        }
        if (!value) {
            fprintf (stderr, "squall-broker: %s needs a value (see --help)\n", arg);
            return 2;
        }
        i++;
        if (strcmp (arg, "--listen") == 0)
            config.listen = value;
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
        if (strcmp (arg, "--allowed-failures") == 0 && sq_parse_int (value, 1, 1000, &n) == 0)
            config.allowed_failures = (uint32_t) n;
        else
        if (strcmp (arg, "--upload-timeout-ms") == 0 && sq_parse_int (value, 1, 3600000, &n) == 0)
            config.upload_timeout_ms = (int) n;
        else
        if (strcmp (arg, "--http") == 0 && *value)
            config.http = value;
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
    signal (SIGPIPE, SIG_IGN);
    s_broker = broker_new (&config);
    if (!s_broker)
        return 1;
    struct sigaction action;
    memset (&action, 0, sizeof action);
    action.sa_handler = s_signal;
    sigaction (SIGINT, &action, NULL);
    sigaction (SIGTERM, &action, NULL);
    printf ("LISTENING %s\n", broker_endpoint (s_broker));
    if (broker_http_port (s_broker))
        printf ("HTTP %u\n", broker_http_port (s_broker));
    fflush (stdout);
    sq_info ("listening on %s", broker_endpoint (s_broker));
    int rc = broker_run (s_broker);
    sq_info ("stopping");
    broker_destroy (&s_broker);
    return rc;
}
