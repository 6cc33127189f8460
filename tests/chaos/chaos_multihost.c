/*  chaos_multihost: a broker and three governors, each in its own network
    namespace (made by netns.sh, run by run_multihost.sh which also tears
    everything down), and a client in the broker's namespace. Each trial
    submits a graph that moves real data governor to governor, then (except
    in trial 0, the control) hits a randomly chosen governor at a random
    point: SIGKILL, or its link is cut (`ip link set eth0 down` inside its
    namespace). The trial passes when the result is byte-exact and the
    broker's INFO counts every task of the graph finished exactly once
    (tasks.finished == tasks of the graph, the trial's session being the
    only one open; failed 0; nothing active). Re-executions are allowed
    (lineage recomputation) and counted: every execute task appends a line
    to a shared log, so the control trial must show exactly one run per
    execute task.

    Per trial it prints what was done to whom and when, when the broker
    noticed (INFO governors fell to 2), how long recovery took (fault to
    result, next to the control trial's whole run time), and ok or BAD.
    After each trial the hit governor is restarted (link restored first).

    Usage (as root, inside <prefix>-broker, the prefix in SQUALL_CHAOS_NS,
    default "sqc"; see run_multihost.sh):
      chaos_multihost BROKER_BIN GOVERNOR_BIN WORKDIR [TRIALS] [SEED]
    Exit 0 when every trial is ok, 1 otherwise. */
#include "squall.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_GOVS 3
#define S_K 6                       //  chains in the graph
#define S_CONST 4000                //  bytes of each constant: inline, so
                                    //  the broker keeps them (recomputable)
#define S_PARTS 60                  //  constants concatenated into big_i
#define S_BROKER_ADDR "10.213.0.10"
#define S_PORT "7760"

static const char *s_broker_bin, *s_governor_bin, *s_workdir;
static uint64_t s_rng;

typedef struct {
    pid_t pid;
    int out;                        //  its stdout (read end)
    char label [48];
} s_proc_t;

static s_proc_t s_broker;
static s_proc_t s_govs [S_GOVS];
static int s_gov_starts;

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint32_t
s_rand (void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t) (s_rng >> 16);
}

static void
s_kill_proc (s_proc_t *p)
{
    if (p->pid > 0) {
        kill (p->pid, SIGKILL);
        waitpid (p->pid, NULL, 0);
        p->pid = 0;
    }
    if (p->out > 0)
        close (p->out);
    p->out = 0;
}

static void
s_kill_all (void)
{
    for (int i = 0; i < S_GOVS; i++)
        s_kill_proc (&s_govs [i]);
    s_kill_proc (&s_broker);
}

static void
s_fatal_signal (int sig)
{
    s_kill_all ();
    signal (sig, SIG_DFL);
    raise (sig);
}

static void
s_die (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    printf ("FAIL chaos_multihost: ");
    vprintf (format, args);
    printf ("\n");
    va_end (args);
    fflush (stdout);
    exit (1);                       //  atexit kills the processes
}

//  Runs argv with stdout on a pipe and stderr appended to log; the child
//  dies with us (PR_SET_PDEATHSIG survives the exec of `ip netns exec`,
//  which execs the program itself in the same process).
static void
s_spawn (s_proc_t *p, const char *label, const char *log, char *const argv [])
{
    int fds [2];
    if (pipe (fds))
        s_die ("pipe: %s", strerror (errno));
    pid_t pid = fork ();
    if (pid < 0)
        s_die ("fork: %s", strerror (errno));
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        dup2 (fds [1], 1);
        int fd = open (log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2 (fd, 2);
        close (fds [0]);
        close (fds [1]);
        execvp (argv [0], argv);
        _exit (127);
    }
    close (fds [1]);
    p->pid = pid;
    p->out = fds [0];
    snprintf (p->label, sizeof p->label, "%s", label);
}

//  Reads stdout of p until a line starting with prefix (10 s deadline)
static void
s_expect (s_proc_t *p, const char *prefix, char *line, size_t line_size)
{
    double deadline = s_now () + 10;
    size_t n = 0;
    while (s_now () < deadline) {
        struct pollfd pfd = { p->out, POLLIN, 0 };
        if (poll (&pfd, 1, 100) <= 0)
            continue;
        char c;
        ssize_t got = read (p->out, &c, 1);
        if (got <= 0)
            s_die ("%s exited before printing %s", p->label, prefix);
        if (c != '\n') {
            if (n + 1 < line_size)
                line [n++] = c;
            continue;
        }
        line [n] = 0;
        if (strncmp (line, prefix, strlen (prefix)) == 0)
            return;
        n = 0;
    }
    s_die ("%s did not print %s within 10 s", p->label, prefix);
}

//  Prefix of the namespaces (SQUALL_CHAOS_NS, set by run_multihost.sh)
static const char *
s_ns (void)
{
    const char *ns = getenv ("SQUALL_CHAOS_NS");
    return ns && *ns && strlen (ns) < 20? ns: "sqc";
}

//  SQUALL_LOG_LEVEL (default info) for the broker and governors
static const char *
s_log_level (void)
{
    const char *level = getenv ("SQUALL_LOG_LEVEL");
    return level && *level? level: "info";
}

//  A key file's path under the work directory's keys (authorized/ for the
//  keys the broker accepts). Static storage: one of a few rotating buffers.
static char *
s_key_path (const char *name)
{
    static char paths [8][512];
    static int next;
    char *path = paths [next++ % 8];
    bool authorized = name [0] == 'g' || strcmp (name, "client.key") == 0;
    snprintf (path, 512, "%s/keys/%s%s", s_workdir, authorized? "authorized/": "", name);
    return path;
}

static sq_client_t *
s_client_new (void)
{
    sq_client_t *client = sq_client_new ();
    if (sq_client_set_keys (client, s_key_path ("client.key"), s_key_path ("broker.pub")))
        s_die ("client keys: %s", sq_client_errmsg (client));
    return client;
}

static void
s_start_governor (int i)
{
    char ns [32], name [32], host [32], cpus [] = "2", label [48], log [512], work [512];
    snprintf (ns, sizeof ns, "%s-g%d", s_ns (), i + 1);
    snprintf (name, sizeof name, "g%d", i + 1);
    snprintf (host, sizeof host, "10.213.0.%d", 11 + i);
    snprintf (label, sizeof label, "governor %s", name);
    snprintf (log, sizeof log, "%s/%s.log", s_workdir, name);
    snprintf (work, sizeof work, "%s/work-%s-%d", s_workdir, name, s_gov_starts++);
    mkdir (work, 0755);
    char key_name [40];
    snprintf (key_name, sizeof key_name, "%s.key", name);
    char *key = s_key_path (key_name);
    char *argv [] = {
        (char *) "ip", (char *) "netns", (char *) "exec", ns,
        (char *) s_governor_bin, (char *) "--broker", (char *) "tcp://" S_BROKER_ADDR ":" S_PORT,
        (char *) "--secret-key", key,
        (char *) "--broker-key", s_key_path ("broker.pub"),
        (char *) "--cpus", cpus, (char *) "--name", name,
        (char *) "--listen-host", host, (char *) "--advertise", host,
        (char *) "--workdir", work, (char *) "--heartbeat-ms", (char *) "200",
        (char *) "--log-level", (char *) s_log_level (), NULL
    };
    s_spawn (&s_govs [i], label, log, argv);
    char line [256];
    s_expect (&s_govs [i], "READY", line, sizeof line);
}

static void
s_link (int i, bool up)
{
    char ns [32], cmd [128];
    snprintf (ns, sizeof ns, "%s-g%d", s_ns (), i + 1);
    snprintf (cmd, sizeof cmd, "ip -n %s link set eth0 %s", ns, up? "up": "down");
    if (system (cmd) != 0)
        s_die ("%s failed", cmd);
}

//  INFO counters, parsed just enough (the JSON of sq_client_info)
static long
s_json_long (const char *json, const char *key)
{
    char pattern [64];
    snprintf (pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr (json, pattern);
    return p? atol (p + strlen (pattern)): -1;
}

static long
s_info (sq_client_t *client, const char *section, const char *key)
{
    char *json = NULL;
    if (sq_client_info (client, &json) || !json)
        return -1;
    const char *from = section? strstr (json, section): json;
    long v = from? s_json_long (from, key): -1;
    sq_free (json);
    return v;
}

static long
s_governors (sq_client_t *client)
{
    char *json = NULL;
    if (sq_client_info (client, &json) || !json)
        return -1;
    long n = 0;
    for (const char *p = strstr (json, "\"data_endpoint\""); p; p = strstr (p + 1, "\"data_endpoint\""))
        n++;
    sq_free (json);
    return n;
}

static bool
s_wait_governors (sq_client_t *client, long want, double seconds)
{
    double deadline = s_now () + seconds;
    while (s_now () < deadline) {
        if (s_governors (client) == want)
            return true;
        usleep (20000);
    }
    return false;
}

//  A second client that notes when the broker stops listing all governors
typedef struct {
    pthread_t thread;
    atomic_bool stop;
    _Atomic double t_detect;        //  -1 until seen
} s_watch_t;

static void *
s_watcher (void *arg)
{
    s_watch_t *self = (s_watch_t *) arg;
    sq_client_t *client = s_client_new ();
    if (sq_client_connect (client, "tcp://" S_BROKER_ADDR ":" S_PORT, 10000) == 0)
        while (!atomic_load (&self->stop)) {
            long n = s_governors (client);
            if (n >= 0 && n < S_GOVS) {
                atomic_store (&self->t_detect, s_now ());
                break;
            }
            usleep (10000);
        }
    sq_client_destroy (&client);
    return NULL;
}

//  sha256sum of bytes as `sha256sum` prints it for stdin ("hex  -\n")
static void
s_sha256 (const void *data, size_t size, char out [128])
{
    char path [512], cmd [600];
    snprintf (path, sizeof path, "%s/sha-input", s_workdir);
    FILE *f = fopen (path, "wb");
    if (!f || fwrite (data, 1, size, f) != size || fclose (f))
        s_die ("write %s", path);
    snprintf (cmd, sizeof cmd, "sha256sum < '%s'", path);
    FILE *p = popen (cmd, "r");
    size_t n = p? fread (out, 1, 127, p): 0;
    out [n] = 0;
    if (!p || pclose (p) != 0 || n != 68)
        s_die ("sha256sum gave '%s'", out);
}

static int
s_count_lines (const char *path, const char *prefix)
{
    FILE *f = fopen (path, "r");
    if (!f)
        return 0;
    char line [256];
    int n = 0;
    while (fgets (line, sizeof line, f))
        n += strncmp (line, prefix, strlen (prefix)) == 0;
    fclose (f);
    return n;
}

typedef struct {
    int trial;
    int n_tasks;
    uint32_t result, big;           //  kept objects
    char *expect_result;
    size_t expect_result_size;
    uint8_t *expect_big;
    size_t expect_big_size;
} s_graph_t;

//  The graph of a trial (sizes in the comment at the top of the file):
//    c_i        constants, 4000 random bytes (at most inline_max, so the
//               broker holds them), kept, so every object can be recomputed
//    big_i      concat of 60 constants c_i, c_i+1, ...     240 000 bytes
//    mid_i      concat (big_i, big_i+1, big_i+2)           720 000 bytes, inputs from
//                                                          several governors
//    s_i        slice (mid_i) of 300 KiB at a random offset
//    x_i        execute: sleep 0.5; cat; print the tag     s_i + tag
//    h_i        execute: sleep 0.3; sha256sum of x_i       "hex  -\n"
//    result     concat (h_0 .. h_5), kept;  mid_0 kept too (GFETCH)
static void
s_build (sq_session_t *session, s_graph_t *g, const char *exec_log)
{
    uint8_t *c [S_K], *big [S_K], *mid [S_K];
    uint32_t cid [S_K], bigid [S_K], midid [S_K], hid [S_K];
    size_t big_size = (size_t) S_CONST * S_PARTS, mid_size = big_size * 3, s_size = 300 * 1024;
    g->n_tasks = 0;
    for (int i = 0; i < S_K; i++) {
        c [i] = (uint8_t *) malloc (S_CONST);
        for (size_t j = 0; j < S_CONST; j++)
            c [i] [j] = (uint8_t) s_rand ();
        cid [i] = sq_blob (session, c [i], S_CONST, NULL);
        //  Kept: the roots of the lineage. A constant nobody keeps is
        //  released once its consumers finished, and cannot be had again.
        sq_keep (session, cid [i]);
    }
    for (int i = 0; i < S_K; i++) {
        //  S_PARTS constants: c_i, c_i+1, c_i+2, ... round the ring
        uint32_t ins [S_PARTS];
        big [i] = (uint8_t *) malloc (big_size);
        for (int j = 0; j < S_PARTS; j++) {
            ins [j] = cid [(i + j) % S_K];
            memcpy (big [i] + (size_t) j * S_CONST, c [(i + j) % S_K], S_CONST);
        }
        uint32_t t = sq_task (session, "concat", ins, S_PARTS, 1, NULL, 0);
        sq_task_set_max_retries (session, t, 5);
        bigid [i] = sq_output (t, 0);
        g->n_tasks++;
    }
    for (int i = 0; i < S_K; i++) {
        uint32_t ins [] = { bigid [i], bigid [(i + 1) % S_K], bigid [(i + 2) % S_K] };
        uint32_t t = sq_task (session, "concat", ins, 3, 1, NULL, 0);
        sq_task_set_max_retries (session, t, 5);
        midid [i] = sq_output (t, 0);
        mid [i] = (uint8_t *) malloc (mid_size);
        for (int j = 0; j < 3; j++)
            memcpy (mid [i] + j * big_size, big [(i + j) % S_K], big_size);
        g->n_tasks++;
    }
    char *result = (char *) calloc (S_K, 128);
    size_t result_size = 0;
    for (int i = 0; i < S_K; i++) {
        size_t off = s_rand () % (mid_size - s_size);
        size_t cfg_size;
        void *cfg = sq_config_slice (off, (int64_t) (off + s_size), &cfg_size);
        uint32_t t = sq_task (session, "slice", &midid [i], 1, 1, cfg, cfg_size);
        sq_free (cfg);
        sq_task_set_max_retries (session, t, 5);
        uint32_t sid = sq_output (t, 0);
        g->n_tasks++;

        char tag [64], env_tag [96], env_log [600], env_run [96];
        snprintf (tag, sizeof tag, "trial-%d-chain-%d", g->trial, i);
        snprintf (env_tag, sizeof env_tag, "SQC_TAG=%s", tag);
        snprintf (env_log, sizeof env_log, "SQC_LOG=%s", exec_log);
        snprintf (env_run, sizeof env_run, "SQC_RUN=t%d x%d", g->trial, i);
        const char *env [] = { env_tag, env_log, env_run, NULL };
        const char *x_args [] = { "sh", "-c",
            "echo \"$SQC_RUN\" >> \"$SQC_LOG\"; sleep 0.5; cat; printf %s \"$SQC_TAG\"" };
        const char *stdio [] = { "" };
        cfg = sq_config_execute (x_args, 3, stdio, 1, 0, stdio, 1, 0, env, &cfg_size);
        t = sq_task (session, "execute", &sid, 1, 1, cfg, cfg_size);
        sq_free (cfg);
        sq_task_set_max_retries (session, t, 5);
        uint32_t xid = sq_output (t, 0);
        g->n_tasks++;

        snprintf (env_run, sizeof env_run, "SQC_RUN=t%d h%d", g->trial, i);
        const char *h_args [] = { "sh", "-c", "echo \"$SQC_RUN\" >> \"$SQC_LOG\"; sleep 0.3; sha256sum" };
        cfg = sq_config_execute (h_args, 3, stdio, 1, 0, stdio, 1, 0, env, &cfg_size);
        t = sq_task (session, "execute", &xid, 1, 1, cfg, cfg_size);
        sq_free (cfg);
        sq_task_set_max_retries (session, t, 5);
        hid [i] = sq_output (t, 0);
        g->n_tasks++;

        size_t x_size = s_size + strlen (tag);
        uint8_t *x = (uint8_t *) malloc (x_size);
        memcpy (x, mid [i] + off, s_size);
        memcpy (x + s_size, tag, strlen (tag));
        s_sha256 (x, x_size, result + result_size);
        result_size += strlen (result + result_size);
        free (x);
    }
    uint32_t t = sq_task (session, "concat", hid, S_K, 1, NULL, 0);
    sq_task_set_max_retries (session, t, 5);
    g->n_tasks++;
    g->result = sq_output (t, 0);
    g->big = midid [0];
    sq_keep (session, g->result);
    sq_keep (session, g->big);
    g->expect_result = result;
    g->expect_result_size = result_size;
    g->expect_big = mid [0];
    g->expect_big_size = mid_size;
    for (int i = 0; i < S_K; i++) {
        free (c [i]);
        free (big [i]);
        if (i)
            free (mid [i]);
    }
}

static void
s_graph_free (s_graph_t *g)
{
    free (g->expect_result);
    free (g->expect_big);
}

int
main (int argc, char **argv)
{
    if (argc < 4) {
        fprintf (stderr, "usage: chaos_multihost BROKER_BIN GOVERNOR_BIN WORKDIR [TRIALS] [SEED]\n");
        return 2;
    }
    s_broker_bin = argv [1];
    s_governor_bin = argv [2];
    s_workdir = argv [3];
    int trials = argc > 4? atoi (argv [4]): 12;
    s_rng = argc > 5? strtoull (argv [5], NULL, 0): (uint64_t) time (NULL);
    if (!s_rng)
        s_rng = 1;
    printf ("chaos_multihost: %d trials, seed %llu (replay: same SEED argument)\n",
            trials, (unsigned long long) s_rng);
    atexit (s_kill_all);
    signal (SIGINT, s_fatal_signal);
    signal (SIGTERM, s_fatal_signal);
    signal (SIGPIPE, SIG_IGN);

    char log [512], exec_log [512], line [256];
    snprintf (log, sizeof log, "%s/broker.log", s_workdir);
    snprintf (exec_log, sizeof exec_log, "%s/executions.log", s_workdir);
    //  Every connection across the namespaces is CURVE (docs/security.md):
    //  one key for the broker, one per governor (gN: the broker lets one
    //  live governor use a key), one client key.
    char keys [512], authorized [512], err [600];
    snprintf (keys, sizeof keys, "%s/keys", s_workdir);
    snprintf (authorized, sizeof authorized, "%s/keys/authorized", s_workdir);
    mkdir (keys, 0700);
    mkdir (authorized, 0700);
    if (sq_keygen ("broker", keys, "broker", NULL, err, sizeof err)
    ||  sq_keygen ("client", authorized, "client", NULL, err, sizeof err))
        s_die ("keygen: %s", err);
    for (int i = 0; i < S_GOVS; i++) {
        char name [16];
        snprintf (name, sizeof name, "g%d", i + 1);
        if (sq_keygen (name, authorized, "governor", NULL, err, sizeof err))
            s_die ("keygen: %s", err);
    }
    char *bargv [] = {
        (char *) s_broker_bin, (char *) "--listen", (char *) "tcp://" S_BROKER_ADDR ":" S_PORT,
        (char *) "--secret-key", s_key_path ("broker.key"),
        (char *) "--authorized-keys", authorized,
        (char *) "--heartbeat-ms", (char *) "200", (char *) "--liveness", (char *) "5",
        (char *) "--log-level", (char *) s_log_level (), NULL
    };
    s_spawn (&s_broker, "broker", log, bargv);
    s_expect (&s_broker, "LISTENING", line, sizeof line);
    for (int i = 0; i < S_GOVS; i++)
        s_start_governor (i);
    sq_client_t *client = s_client_new ();
    if (sq_client_connect (client, "tcp://" S_BROKER_ADDR ":" S_PORT, 10000))
        s_die ("connect: %s", sq_client_errmsg (client));
    if (!s_wait_governors (client, S_GOVS, 10))
        s_die ("the broker does not show %d governors", S_GOVS);
    printf ("broker %s and governors 10.213.0.11-13 up, each in its own namespace\n", S_BROKER_ADDR);

    double baseline = 0;
    int bad = 0;
    for (int trial = 0; trial < trials; trial++) {
        //  What to do: trial 0 nothing; else every third a link cut
        int mode = trial == 0? 0: (trial % 3 == 0? 2: 1);
        int victim = (int) (s_rand () % S_GOVS);
        //  somewhere in the first 5-70 % of the control run's time
        double delay = trial == 0? 0: (0.05 + (s_rand () % 1000) / 1000.0 * 0.65) * baseline;
        sq_session_t *session = sq_session_new (client);
        if (!session)
            s_die ("session: %s", sq_client_errmsg (client));
        s_graph_t g;
        memset (&g, 0, sizeof g);
        g.trial = trial;
        s_build (session, &g, exec_log);
        double t0 = s_now ();
        if (sq_submit (session))
            s_die ("trial %d: submit: %s", trial, sq_client_errmsg (client));
        char what [160] = "control, no fault";
        double t_fault = t0, t_detect = -1;
        long finished_at_fault = -1;
        s_watch_t watch;
        memset (&watch, 0, sizeof watch);
        watch.t_detect = -1;
        if (mode) {
            if (pthread_create (&watch.thread, NULL, s_watcher, &watch))
                s_die ("thread");
            //  the fault at t0 + delay, waiting by polling the clock (the
            //  graph runs meanwhile)
            while (s_now () < t0 + delay)
                usleep (2000);
            finished_at_fault = s_info (client, "\"tasks\"", "finished");
            t_fault = s_now ();
            if (mode == 1) {
                snprintf (what, sizeof what, "SIGKILL governor g%d (pid %d)", victim + 1,
                          (int) s_govs [victim].pid);
                kill (s_govs [victim].pid, SIGKILL);
            }
            else {
                snprintf (what, sizeof what, "link of governor g%d cut (eth0 down in %s-g%d)",
                          victim + 1, s_ns (), victim + 1);
                s_link (victim, false);
            }
        }
        //  The result, the big object, then the counters
        void *data = NULL, *big = NULL;
        size_t size = 0, big_size = 0;
        int rc = sq_fetch (session, g.result, 60000, &data, &size, NULL);
        double t_result = s_now ();
        char problem [512] = "";
        if (rc)
            snprintf (problem, sizeof problem, "fetch result: %s", sq_client_errmsg (client));
        else
        if (size != g.expect_result_size || memcmp (data, g.expect_result, size))
            snprintf (problem, sizeof problem, "result differs (%zu bytes, expected %zu)",
                      size, g.expect_result_size);
        if (!*problem) {
            rc = sq_fetch (session, g.big, 30000, &big, &big_size, NULL);
            if (rc)
                snprintf (problem, sizeof problem, "fetch 720 000-byte object: %s", sq_client_errmsg (client));
            else
            if (big_size != g.expect_big_size || memcmp (big, g.expect_big, big_size))
                snprintf (problem, sizeof problem, "720 000-byte object differs");
        }
        //  Let the broker settle: the counters of a finished graph
        long finished = -1, failed = -1, active = -1;
        double settle = s_now () + 10;
        while (s_now () < settle) {
            char *json = NULL;
            if (sq_client_info (client, &json) == 0 && json) {
                const char *tasks = strstr (json, "\"tasks\"");
                finished = tasks? s_json_long (tasks, "finished"): -1;
                failed = tasks? s_json_long (tasks, "failed"): -1;
                active = tasks? s_json_long (tasks, "waiting") + s_json_long (tasks, "ready")
                         + s_json_long (tasks, "assigned") + s_json_long (tasks, "running"): -1;
                sq_free (json);
            }
            if (finished == g.n_tasks && active == 0)
                break;
            usleep (20000);
        }
        if (!*problem && (finished != g.n_tasks || failed != 0 || active != 0))
            snprintf (problem, sizeof problem, "INFO tasks: finished %ld of %d, failed %ld, active %ld",
                      finished, g.n_tasks, failed, active);
        char runs_prefix [32];
        snprintf (runs_prefix, sizeof runs_prefix, "t%d ", trial);
        int runs = s_count_lines (exec_log, runs_prefix);
        if (!*problem && mode == 0 && runs != S_K * 2)
            snprintf (problem, sizeof problem, "control trial ran execute tasks %d times, not %d",
                      runs, S_K * 2);
        if (trial == 0)
            baseline = t_result - t0;
        //  How long until the broker noticed (if it has not yet, wait a bit)
        if (mode) {
            double until = s_now () + 10;
            while (s_now () < until && atomic_load (&watch.t_detect) < 0)
                usleep (20000);
            atomic_store (&watch.stop, true);
            pthread_join (watch.thread, NULL);
            t_detect = atomic_load (&watch.t_detect);
        }
        if (mode)
            printf ("trial %2d: %s at +%.2f s (%ld of %d tasks finished); broker noticed %s; "
                    "%s at +%.2f s: recovery %.2f s (control run %.2f s); execute runs %d "
                    "for %d tasks; INFO finished %ld/%d failed %ld: %s%s\n",
                    trial, what, t_fault - t0, finished_at_fault, g.n_tasks,
                    t_detect < 0? "never (within 10 s)": "(below)",
                    *problem? "gave up": "result", t_result - t0, t_result - t_fault,
                    baseline, runs, S_K * 2, finished, g.n_tasks, failed,
                    *problem? "BAD: ": "ok", problem);
        else
            printf ("trial %2d: %s; result in %.2f s; execute runs %d for %d tasks; "
                    "INFO finished %ld/%d failed %ld: %s%s\n",
                    trial, what, t_result - t0, runs, S_K * 2, finished, g.n_tasks, failed,
                    *problem? "BAD: ": "ok", problem);
        if (mode && t_detect >= 0)
            printf ("          broker noticed the loss %.2f s after the fault\n", t_detect - t_fault);
        fflush (stdout);
        bad += *problem != 0;
        sq_free (data);
        sq_free (big);
        s_graph_free (&g);
        sq_session_destroy (&session);
        //  Back to three healthy governors
        if (mode) {
            if (mode == 2)
                s_link (victim, true);
            s_kill_proc (&s_govs [victim]);
            if (!s_wait_governors (client, S_GOVS - 1, 15))
                s_die ("after trial %d: the broker still lists g%d", trial, victim + 1);
            s_start_governor (victim);
        }
        if (!s_wait_governors (client, S_GOVS, 15))
            s_die ("after trial %d: %ld governors, not %d", trial, s_governors (client), S_GOVS);
    }
    sq_client_destroy (&client);
    //  An orderly stop: every process must exit with status 0 (under ASan
    //  that includes LeakSanitizer's verdict)
    s_proc_t *all [S_GOVS + 1] = { &s_broker, &s_govs [0], &s_govs [1], &s_govs [2] };
    for (int i = 0; i <= S_GOVS; i++)
        if (all [i]->pid > 0)
            kill (all [i]->pid, i == 0? SIGTERM: SIGINT);   //  governors leave without draining
    for (int i = 0; i <= S_GOVS; i++) {
        if (all [i]->pid <= 0)
            continue;
        double deadline = s_now () + 20;
        int status = -1;
        while (s_now () < deadline && waitpid (all [i]->pid, &status, WNOHANG) == 0)
            usleep (20000);
        if (status == -1 || !WIFEXITED (status) || WEXITSTATUS (status) != 0) {
            printf ("BAD: %s did not exit cleanly after its signal (status %d)\n", all [i]->label, status);
            bad++;
            kill (all [i]->pid, SIGKILL);
            waitpid (all [i]->pid, NULL, 0);
        }
        all [i]->pid = 0;
    }
    printf ("chaos_multihost: %d of %d trials ok (logs in %s)\n", trials - bad, trials, s_workdir);
    return bad? 1: 0;
}
