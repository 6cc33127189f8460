/*  squall-governor: command line, signals, working directory, then the
    governor (governor.h) until it stops. */
#include "governor.h"
#include "keys.h"
#include "heap.h"
#include "store.h"
#include "cgroup.h"
#include "files.h"
#include "args.h"
#include "log.h"
#include "parentwatch.h"
#include "sandbox.h"
#include "gpus.h"
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sched.h>

#define S_TASK_READ_MAX 64

//  What tasks under Landlock may read beside their own directory: the
//  system's hierarchies (not /run, /home, /root, /srv, /var: other users'
//  and services' files), and what they may also write (shared by all).
static const char *s_system_read [] = {
    "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", NULL
};
static const char *s_shared_write [] = { "/tmp", "/var/tmp", "/dev/shm", NULL };

//  Adds to list (of n, at most max) the absolute paths an executor's
//  interpreter reads: its prefixes and sys.path, asked of it with this
//  environment (PYTHONPATH included). Returns the new count; best effort.
static size_t
s_python_paths (const char *python, char **list, size_t n, size_t max)
{
    int pipe_fds [2];
    if (pipe (pipe_fds))
        return n;
    pid_t pid = fork ();
    if (pid == 0) {
        dup2 (pipe_fds [1], 1);
        close (pipe_fds [0]);
        execlp (python, python, "-c", "import sys; print('\\n'.join([sys.prefix, "
                "sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix] + sys.path))",
                (char *) NULL);
        _exit (127);
    }
    close (pipe_fds [1]);
    FILE *f = pid > 0? fdopen (pipe_fds [0], "r"): NULL;
    if (!f)
        close (pipe_fds [0]);
    char line [PATH_MAX + 2];
    while (f && fgets (line, sizeof line, f)) {
        line [strcspn (line, "\n")] = 0;
        bool seen = line [0] != '/';
        for (size_t i = 0; i < n && !seen; i++)
            seen = strcmp (list [i], line) == 0;
        if (!seen && n == max)
            sq_warn ("--task-landlock: more Python paths than %zu, %s left out: tasks may "
                     "not read it (give it with --task-read)", max, line);
        else
        if (!seen && (list [n] = strdup (line)))
            n++;
    }
    if (f)
        fclose (f);
    while (pid > 0 && waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return n;
}

static const char *s_usage =
    "usage: squall-governor --broker ENDPOINT [options]\n"
    "  --broker ENDPOINT      broker's governor endpoint (tcp://host:port)\n"
    "  --cpus N               CPU slots for tasks (default: the CPUs it may run on,\n"
    "                         or its cgroup's CPU quota if smaller)\n"
    "  --name NAME            governor name (default: hostname-pid)\n"
    "  --listen-host IP       address to bind data and serve sockets (0.0.0.0\n"
    "                         with keys, 127.0.0.1 without)\n"
    "  --advertise HOST       host put in announced endpoints (default: the\n"
    "                         local address that reaches the broker)\n"
    "  --workdir DIR          where task directories go, made if missing\n"
    "                         (default: a fresh\n"
    "                         /tmp/squall-governor-XXXXXX, removed at exit)\n"
    "  --stream-dir DIR       where the governors of this host and user hand\n"
    "                         streams over as pipes (made, mode 0700; must be\n"
    "                         ours and closed to others; if its socket cannot be\n"
    "                         bound there: a warning, chunks); default: none, streams\n"
    "                         go as chunks (docs/security.md)\n"
    "  --log-limit SIZE       of each task's stdout and of its stderr, per attempt,\n"
    "                         keep this much: its first and last halves, the\n"
    "                         bytes between counted as dropped (default 1MiB;\n"
    "                         a task's own `log_limit` overrides it)\n"
    "  --memory SIZE          the governor's memory, e.g. 4GiB (default: physical\n"
    "                         memory, or the cgroup's limit); its object store\n"
    "                         gets what the copy heap (a quarter), 128MiB per\n"
    "                         CPU slot and 64MiB leave, at least a quarter, and\n"
    "                         spills objects to the workdir above 70 percent of\n"
    "                         it, or when it and what runs beside it pass 85\n"
    "                         percent of the cgroup's limit\n"
    "  --prefault SIZE|auto   touch SIZE of heap in the background at start, so\n"
    "                         that the first copies received land in pages that\n"
    "                         exist (at most a quarter of --memory, 2GiB; auto:\n"
    "                         that much; default 0; Compose, Helm and Slurm\n"
    "                         start governors with auto)\n"
    "  --resource NAME=N      a custom resource counter (repeatable)\n"
    "  --gpus auto|LIST       devices offered as gpus (LIST: 0,1,3): a task\n"
    "                         asking for gpus=N gets N of its own, 0.5 a share\n"
    "                         of one, named in its CUDA_VISIBLE_DEVICES (auto:\n"
    "                         $CUDA_VISIBLE_DEVICES if set, else what\n"
    "                         nvidia-smi -L lists, else none)\n"
    "  --heartbeat-ms MS      heartbeat interval until the broker sets it (1000)\n"
    "  --no-reconnect         exit (status 3) when the broker is lost, instead\n"
    "                         of reconnecting with back-off as a new governor\n"
    "  --broker-grace SEC     when the broker is lost, keep objects and running\n"
    "                         tasks this long while asking it (or a broker\n"
    "                         restarted on its journal) to take us back (60;\n"
    "                         0: start afresh at once)\n"
    "  --drain-timeout SEC    on a first SIGTERM the governor drains: the broker\n"
    "                         moves its work and the objects only it holds to\n"
    "                         other governors, then lets it leave; past SEC it\n"
    "                         leaves anyway (30; 0: SIGTERM stops at once).\n"
    "                         A second SIGTERM, or SIGINT, stops at once\n"
    "  --secret-key FILE      this governor's key pair (squall keygen NAME --role\n"
    "                         governor); with --broker-key every connection is\n"
    "                         CURVE encrypted and authenticated (docs/security.md)\n"
    "  --broker-key FILE      the broker's public key (its .pub file)\n"
    "  --insecure             allow binding a non-loopback address without keys\n"
    "  --task-uids FIRST-LAST user ids tasks run as, one per tenant, never the\n"
    "                         governor's (needs root; default as root:\n"
    "                         2000000000-2000065535; none: tasks run as the\n"
    "                         governor's user; docs/security.md)\n"
    "  --task-landlock MODE   auto, on or off: tasks under the governor's own user\n"
    "                         reach only system directories, the Python\n"
    "                         interpreter's paths, /tmp, /var/tmp, /dev/shm and\n"
    "                         their own directory (Landlock; auto: when the\n"
    "                         kernel has it; on: refuse to start without it)\n"
    "  --task-read PATH       one more path such tasks may read (repeatable)\n"
    "  --log-level LEVEL      error, warn, info or debug (info)\n"
    "  --python PATH          interpreter of Python executors (default:\n"
    "                         $SQUALL_PYTHON, else python3 from PATH)\n"
    "  --python-prestart      start one Python executor per cpu at once instead\n"
    "                         of at the first Python task (its start-up, 0.1-1 s,\n"
    "                         is then not paid by the first task)\n"
    "  --python-preload MODS  comma-separated modules every executor imports\n"
    "                         when it starts (implies --python-prestart)\n"
    "  --help                 this text\n"
    "  --version              the version of squall and of its protocol\n";

//  mkdir -p: every missing directory of path, mode 0700. 0 or -1 (errno).
static int
s_mkdirs (const char *path)
{
    char buf [PATH_MAX];
    if (snprintf (buf, sizeof buf, "%s", path) >= (int) sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; ; p++)
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir (buf, 0700) && errno != EEXIST)
                return -1;
            if (c == 0)
                return 0;
            *p = c;
        }
}

static int
s_bad (const char *message, const char *value)
{
    fprintf (stderr, "squall-governor: %s%s%s\n%s", message, value? ": ": "",
             value? value: "", s_usage);
    return 2;
}

static int
s_parse_u64 (const char *text, uint64_t max, uint64_t *value)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    if (errno || end == text || *end || text [0] == '-' || v > max)
        return -1;
    *value = v;
    return 0;
}

//  The local address the kernel would use to reach the broker: connect()
//  on a UDP socket picks the route and sends nothing.
static void
s_default_advertise (const char *broker, char *host, size_t size)
{
    snprintf (host, size, "127.0.0.1");
    const char *start = strstr (broker, "://");
    if (!start)
        return;
    start += 3;
    char name [256];
    const char *colon = strrchr (start, ':');
    if (!colon || (size_t) (colon - start) >= sizeof name)
        return;
    memcpy (name, start, (size_t) (colon - start));
    name [colon - start] = 0;
    char *h = name;
    if (h [0] == '[') {
        h++;
        char *close = strchr (h, ']');
        if (close)
            *close = 0;
    }
    struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *res = NULL;
    if (getaddrinfo (h, colon + 1, &hints, &res) || !res)
        return;
    int fd = socket (res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    if (fd >= 0 && connect (fd, res->ai_addr, res->ai_addrlen) == 0
    &&  getsockname (fd, (struct sockaddr *) &local, &len) == 0) {
        char text [INET6_ADDRSTRLEN];
        const void *addr = local.ss_family == AF_INET6
            ? (const void *) &((struct sockaddr_in6 *) &local)->sin6_addr
            : (const void *) &((struct sockaddr_in *) &local)->sin_addr;
        if (inet_ntop (local.ss_family, addr, text, sizeof text))
            snprintf (host, size, "%s", text);
    }
    if (fd >= 0)
        close (fd);
    freeaddrinfo (res);
}

static bool
s_loopback_host (const char *host)
{
    return strncmp (host, "127.", 4) == 0 || strcmp (host, "::1") == 0
        || strcmp (host, "localhost") == 0;
}

static int
s_load_keys (gov_config_t *config, const char *secret_key, const char *broker_key)
{
    char err [700];
    if (sq_cert_load_pair (secret_key, broker_key, "--secret-key", "--broker-key",
                           config->public_key, config->secret_key, config->broker_key,
                           err, sizeof err)) {
        fprintf (stderr, "squall-governor: %s\n", err);
        return -1;
    }
    config->has_keys = true;
    return 0;
}


int
main (int argc, char *argv [])
{
    //  First of all: a closed stderr (a starter that went away) must give
    //  EPIPE to the log's writes, not kill us before the options are read.
    signal (SIGPIPE, SIG_IGN);
    static const struct option options [] = {
        { "broker", required_argument, NULL, 'b' },
        { "cpus", required_argument, NULL, 'c' },
        { "name", required_argument, NULL, 'n' },
        { "listen-host", required_argument, NULL, 'l' },
        { "advertise", required_argument, NULL, 'a' },
        { "workdir", required_argument, NULL, 'w' },
        { "stream-dir", required_argument, NULL, 'T' },
        { "resource", required_argument, NULL, 'r' },
        { "gpus", required_argument, NULL, 'g' },
        { "memory", required_argument, NULL, 'M' },
        { "log-limit", required_argument, NULL, 'O' },
        { "prefault", required_argument, NULL, 'F' },
        { "heartbeat-ms", required_argument, NULL, 'H' },
        { "no-reconnect", no_argument, NULL, 'R' },
        { "broker-grace", required_argument, NULL, 'G' },
        { "drain-timeout", required_argument, NULL, 'D' },
        { "secret-key", required_argument, NULL, 'S' },
        { "broker-key", required_argument, NULL, 'K' },
        { "insecure", no_argument, NULL, 'I' },
        { "task-uids", required_argument, NULL, 'U' },
        { "task-landlock", required_argument, NULL, 'A' },
        { "task-read", required_argument, NULL, 'E' },
        { "log-level", required_argument, NULL, 'L' },
        { "python", required_argument, NULL, 'P' },
        { "python-prestart", no_argument, NULL, 'X' },
        { "python-preload", required_argument, NULL, 'Y' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 }
    };
    gov_config_t config = { .heartbeat_ms = 1000, .reconnect = true, .broker_grace_ms = 60000,
                            .drain_timeout_ms = 30000 };
    const char *secret_key = NULL, *broker_key = NULL;
    bool insecure = false;
    bool cpus_given = false;
    bool task_uids_given = false;
    const char *landlock_mode = "auto";
    char *task_read [S_TASK_READ_MAX / 2] = { NULL };
    size_t n_task_read = 0;
    const char *user_workdir = NULL;
    char *resource_names [SQ_MAX_RESOURCES] = { NULL };
    const char *gpus_arg = NULL;
    static char gpus_list [GPUS_MAX * 65 + 1];
    int opt;
    uint64_t value, prefault = 0;
    opterr = 0;
    static char broker_endpoint [SQ_MAX_NAME + 8];
    char err [300];
    //  A leading ':' tells a missing value (':') from an unknown option ('?').
    while ((opt = getopt_long (argc, argv, ":", options, NULL)) != -1) {
        switch (opt) {
            case 'b':
                if (sq_parse_endpoint (optarg, broker_endpoint, sizeof broker_endpoint,
                                       err, sizeof err))
                    return s_bad ("--broker", err);
                config.broker = broker_endpoint;
                break;
            case 'n':
                if (!*optarg || strlen (optarg) > 256)
                    return s_bad ("--name must have 1 to 256 characters", optarg);
                config.name = optarg;
                break;
            case 'l': config.listen_host = optarg; break;
            case 'a': config.advertise = optarg; break;
            case 'w': user_workdir = optarg; break;
            case 'T': config.stream_dir = optarg; break;
            case 'O':
                if (sq_parse_size (optarg, &config.log_limit) || config.log_limit < 2
                ||  config.log_limit > (1ull << 40))
                    return s_bad ("--log-limit needs a size between 2 bytes and 1TiB, e.g. 1MiB",
                                  optarg);
                break;
            case 'M':
                if (sq_parse_size (optarg, &config.memory) || config.memory < (1u << 20))
                    return s_bad ("--memory needs a size of at least 1MiB, e.g. 4GiB", optarg);
                break;
            case 'F':
                //  auto: all the heap keeps (heap_prefault_start caps it).
                if (strcmp (optarg, "auto") == 0)
                    prefault = UINT64_MAX;
                else
                if (sq_parse_size (optarg, &prefault))
                    return s_bad ("--prefault needs a size, e.g. 1GiB, or auto", optarg);
                break;
            case 'c':
                if (s_parse_u64 (optarg, 1000000, &value))
                    return s_bad ("--cpus needs a number", optarg);
                config.cpus = (uint32_t) value;
                cpus_given = true;
                break;
            case 'H':
                if (s_parse_u64 (optarg, 3600000, &value) || value == 0)
                    return s_bad ("--heartbeat-ms needs a positive number", optarg);
                config.heartbeat_ms = (int) value;
                break;
            case 'L': {
                int level = sq_log_parse_level (optarg);
                if (level < 0)
                    return s_bad ("--log-level must be error, warn, info or debug", optarg);
                sq_log_set_level ((sq_log_level_t) level);
                break;
            }
            case 'r': {
                char *eq = strchr (optarg, '=');
                if (!eq || eq == optarg || (size_t) (eq - optarg) > 64
                ||  s_parse_u64 (eq + 1, UINT64_MAX, &value))
                    return s_bad ("--resource needs NAME=N", optarg);
                if (config.n_resources + 1 >= SQ_MAX_RESOURCES)
                    return s_bad ("too many --resource options", NULL);
                char *name = strndup (optarg, (size_t) (eq - optarg));
                if (!name || strcmp (name, SQ_RES_CPUS) == 0) {
                    free (name);
                    return s_bad ("use --cpus for cpus", NULL);
                }
                //  gpus are counted in thousandths (fractions share a device).
                if (strcmp (name, SQ_RES_GPUS) == 0) {
                    if (value > UINT64_MAX / SQ_GPU_MILLI) {
                        free (name);
                        return s_bad ("--resource gpus: too many", optarg);
                    }
                    value *= SQ_GPU_MILLI;
                }
                resource_names [config.n_resources] = name;
                config.resources [config.n_resources++] =
                    (sq_resource_t) { { name, (uint32_t) strlen (name) }, value };
                break;
            }
            case 'g': gpus_arg = optarg; break;
            case 'P':
                //  Read by governor/pyexec.c; set before any thread starts.
                if (!*optarg || setenv ("SQUALL_PYTHON", optarg, 1))
                    return s_bad ("--python needs an interpreter", optarg);
                break;
            case 'X':
                //  Read by governor/pyexec.c, like SQUALL_PYTHON.
                setenv ("SQUALL_PYTHON_PRESTART", "1", 1);
                break;
            case 'Y':
                //  Read by the executors (executor.py) and pyexec.c.
                if (setenv ("SQUALL_PYTHON_PRELOAD", optarg, 1)
                ||  setenv ("SQUALL_PYTHON_PRESTART", "1", 1))
                    return s_bad ("--python-preload needs module names", optarg);
                break;
            case 'R': config.reconnect = false; break;
            case 'G':
                if (s_parse_u64 (optarg, 86400, &value))
                    return s_bad ("--broker-grace needs seconds", optarg);
                config.broker_grace_ms = (int) value * 1000;
                break;
            case 'D':
                if (s_parse_u64 (optarg, 86400, &value))
                    return s_bad ("--drain-timeout needs seconds", optarg);
                config.drain_timeout_ms = (int) value * 1000;
                break;
            case 'S': secret_key = optarg; break;
            case 'K': broker_key = optarg; break;
            case 'I': insecure = true; break;
            case 'U':
                if (sandbox_parse_range (optarg, &config.task_uid_first, &config.task_uid_count))
                    return s_bad ("--task-uids needs FIRST-LAST (user ids above 0) or none",
                                  optarg);
                task_uids_given = true;
                break;
            case 'A':
                if (strcmp (optarg, "auto") && strcmp (optarg, "on") && strcmp (optarg, "off"))
                    return s_bad ("--task-landlock must be auto, on or off", optarg);
                landlock_mode = optarg;
                break;
            case 'E':
                if (optarg [0] != '/')
                    return s_bad ("--task-read needs an absolute path", optarg);
                if (n_task_read == S_TASK_READ_MAX / 2)
                    return s_bad ("too many --task-read options", optarg);
                task_read [n_task_read++] = optarg;
                break;
            case 'h': fputs (s_usage, stdout); return 0;
            case 'V':
                printf ("squall-governor %d.%d.%d (protocol %d)\n", SQUALL_VERSION_MAJOR,
                        SQUALL_VERSION_MINOR, SQUALL_VERSION_PATCH, SQUALL_PROTOCOL_VERSION);
                return 0;
            case ':': return s_bad ("this option needs a value", argv [optind - 1]);
            default: return s_bad ("unknown option", argv [optind - 1]);
        }
    }
    if (optind < argc)
        return s_bad ("unexpected argument", argv [optind]);
    if (gpus_arg) {
        char *found = strcmp (gpus_arg, "auto") == 0? gpus_detect (): strdup (gpus_arg);
        const char *bad = !found || strlen (found) >= sizeof gpus_list
                        ? "--gpus: too long a list": NULL;
        snprintf (gpus_list, sizeof gpus_list, "%s", found && !bad? found: "");
        free (found);
        char err [128] = "";
        gpus_t *gpus = bad? NULL: gpus_new (gpus_list, err, sizeof err);
        uint32_t n = gpus? gpus_count (gpus): 0;
        gpus_destroy (&gpus);
        for (uint32_t i = 0; i < config.n_resources && !bad && !*err; i++)
            if (mpr_str_eq (config.resources [i].name, SQ_RES_GPUS))
                bad = "--gpus and --resource gpus=N do not go together";
        if (!bad && !*err && n && config.n_resources + 1 >= SQ_MAX_RESOURCES)
            bad = "too many --resource options";
        if (bad || *err) {
            for (uint32_t i = 0; i < config.n_resources; i++)
                free (resource_names [i]);
            if (bad)
                return s_bad (bad, gpus_arg);
            fprintf (stderr, "squall-governor: --gpus %s%s%s: %s\n", gpus_arg,
                     strcmp (gpus_arg, "auto")? "": " found ",
                     strcmp (gpus_arg, "auto")? "": gpus_list, err);
            return 2;
        }
        if (n) {
            //  What is not a task's own is nobody's: tasks without gpus,
            //  and Python executors started before any, see no device.
            if (setenv ("CUDA_VISIBLE_DEVICES", "", 1) || setenv ("SQUALL_GPUS", "", 1))
                return s_bad ("--gpus: cannot set the environment", NULL);
            config.gpus = gpus_list;
            config.resources [config.n_resources++] = (sq_resource_t) {
                { SQ_RES_GPUS, 4 }, (uint64_t) n * SQ_GPU_MILLI };
        }
        sq_info ("--gpus: %s", n? gpus_list: "no devices");
    }
    //  Defaults that fit the box this governor is in: a container's or a
    //  Slurm step's limits, not the host's (cgroup.h).
    cgroup_limits_t box;
    cgroup_limits ("", &box);
    if (!cpus_given) {
        cpu_set_t mine;
        long online = sysconf (_SC_NPROCESSORS_ONLN);
        long cpus = sched_getaffinity (0, sizeof mine, &mine) == 0? CPU_COUNT (&mine): online;
        if (box.cpus > 0 && (double) cpus > box.cpus)
            cpus = (long) box.cpus + ((double) (long) box.cpus < box.cpus);    //  rounded up
        config.cpus = cpus > 0? (uint32_t) cpus: 1;
        if (box.cpus > 0)
            sq_info ("--cpus %u: the cgroup's CPU quota is %.2f cpus", config.cpus, box.cpus);
    }
    if (config.memory == 0) {
        long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);
        config.memory = pages > 0 && page > 0? (uint64_t) pages * (uint64_t) page: 0;
        if (box.memory && (config.memory == 0 || box.memory < config.memory)) {
            config.memory = box.memory;
            sq_info ("--memory %llu: the cgroup's memory limit", (unsigned long long) box.memory);
        }
    }
    heap_configure (config.memory);
    config.box_memory = box.memory;
    config.store_limit = store_budget (config.memory, config.cpus, heap_kept ());
    if (config.store_limit)
        sq_info ("store: %llu of --memory %llu (the rest for %u executors and their tasks, the "
                 "copy heap, the governor), spilling above %d percent of it",
                 (unsigned long long) config.store_limit, (unsigned long long) config.memory,
                 config.cpus, STORE_SPILL_HIGH);
    if (!config.broker)
        return s_bad ("--broker is required", NULL);
    if (!secret_key != !broker_key)
        return s_bad ("--secret-key and --broker-key go together", NULL);
    if (secret_key && s_load_keys (&config, secret_key, broker_key))
        return 2;
    //  Where the key is, for the Landlock check below (argv is masked next).
    char key_real [PATH_MAX];
    bool key_known = secret_key && realpath (secret_key, key_real);
    //  The key is in memory now: where its file is need not stay in our
    //  command line, which anyone may read (/proc/PID/cmdline).
    for (int i = 1; secret_key && i < argc; i++) {
        char *at = strstr (argv [i], secret_key);
        if (at == secret_key)
            memset (at, '*', strlen (at));
    }
    //  Tasks never see what the governor holds (docs/security.md): our
    //  memory, environment and descriptors are closed to processes of our
    //  own user too (not dumpable: /proc/PID/mem, environ, fd, maps are
    //  root's), and as root tasks run under other user ids.
    prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (!task_uids_given && geteuid () == 0) {
        config.task_uid_first = SANDBOX_DEFAULT_FIRST;
        config.task_uid_count = SANDBOX_DEFAULT_COUNT;
    }
    //  Python executors run as the tenants' ids too: an interpreter they
    //  cannot reach (in root's home, say) would fail every py task.
    char uid_err [PATH_MAX + 256];
    const char *python = getenv ("SQUALL_PYTHON");
    if (sandbox_check_range (config.task_uid_first, config.task_uid_count,
                             uid_err, sizeof uid_err)
    ||  (config.task_uid_count
         && sandbox_can_run (config.task_uid_first, python && *python? python: "python3",
                             uid_err, sizeof uid_err))) {
        if (task_uids_given)
            return s_bad ("--task-uids", uid_err);
        sq_warn ("tasks run as the governor's own user, not apart: %s (docs/security.md, --task-uids)",
                 uid_err);
        config.task_uid_count = 0;
    }
    if (config.task_uid_count)
        sq_info ("tasks run as user ids %u-%u, one per tenant", config.task_uid_first,
                 config.task_uid_first + config.task_uid_count - 1);
    //  Without keys nothing but this machine may reach our sockets, unless
    //  told it is fine: anyone who can would read every object we hold.
    if (!config.listen_host)
        config.listen_host = config.has_keys? "0.0.0.0": "127.0.0.1";
    if (!config.has_keys && !s_loopback_host (config.listen_host)) {
        if (!insecure)
            return s_bad ("refusing to bind a non-loopback address without keys (anyone "
                          "reaching it could read every object here): give --secret-key and "
                          "--broker-key, or accept it with --insecure", config.listen_host);
        sq_warn ("INSECURE: data and serve sockets on %s without keys", config.listen_host);
    }
    if (strncmp (config.broker, "tcp://", 6) && strncmp (config.broker, "ipc://", 6)
    &&  strncmp (config.broker, "inproc://", 9))
        return s_bad ("--broker must be an endpoint like tcp://host:port", config.broker);

    char default_name [300], advertise [INET6_ADDRSTRLEN + 1];
    if (!config.name) {
        char host [256] = "governor";
        gethostname (host, sizeof host - 1);
        host [sizeof host - 1] = 0;
        snprintf (default_name, sizeof default_name, "%s-%d", host, (int) getpid ());
        config.name = default_name;
    }
    if (!config.advertise) {
        s_default_advertise (config.broker, advertise, sizeof advertise);
        config.advertise = advertise;
    }
    char log_name [320];
    snprintf (log_name, sizeof log_name, "governor %s", config.name);
    sq_log_set_name (log_name);

    char workdir [PATH_MAX];
    if (user_workdir) {
        char real [PATH_MAX];
        //  A missing workdir is made (with its parents): a governor that
        //  exited over it left whole test clusters silently idle.
        if (!realpath (user_workdir, real) && errno == ENOENT && s_mkdirs (user_workdir) == 0)
            sq_info ("created the working directory %s", user_workdir);
        struct stat st;
        errno = 0;
        if (!realpath (user_workdir, real) || stat (real, &st) || !S_ISDIR (st.st_mode)) {
            fprintf (stderr, "squall-governor: --workdir %s: %s\n", user_workdir,
                     errno? strerror (errno): "not a directory");
            return 2;
        }
        snprintf (workdir, sizeof workdir, "%.*s/governor-%d", PATH_MAX - 40, real, (int) getpid ());
        files_rmtree (workdir);
        if (mkdir (workdir, 0700)) {
            sq_error ("cannot create %s: %s", workdir, strerror (errno));
            return 1;
        }
    }
    else {
        snprintf (workdir, sizeof workdir, "/tmp/squall-governor-XXXXXX");
        if (!mkdtemp (workdir)) {
            sq_error ("cannot create a working directory: %s", strerror (errno));
            return 1;
        }
    }
    //  Tasks under other user ids pass through it to their own directories
    //  (0700, theirs), and may list nothing in it nor write to it; every
    //  directory above it must let them through (a --workdir in root's
    //  home would not).
    if (config.task_uid_count && chmod (workdir, 0711)) {
        sq_error ("cannot make %s searchable: %s", workdir, strerror (errno));
        files_rmtree (workdir);
        return 1;
    }
    if (config.task_uid_count
    &&  sandbox_can_run (config.task_uid_first, workdir, uid_err, sizeof uid_err)) {
        if (task_uids_given) {
            files_rmtree (workdir);
            return s_bad ("--task-uids: tasks could not enter the working directory", uid_err);
        }
        sq_warn ("tasks run as the governor's own user, not apart: %s (docs/security.md, "
                 "--task-uids, --workdir)", uid_err);
        config.task_uid_count = 0;
        chmod (workdir, 0700);
    }
    config.workdir = workdir;

    //  Tasks under our own identity could read all we can, our key first:
    //  Landlock keeps them to what they need (docs/security.md).
    if (config.task_uid_count == 0 && strcmp (landlock_mode, "off")) {
        char *ll_read [S_TASK_READ_MAX + 16];
        size_t n = 0;
        for (size_t i = 0; s_system_read [i]; i++)
            ll_read [n++] = (char *) s_system_read [i];
        for (size_t i = 0; i < n_task_read; i++)
            ll_read [n++] = task_read [i];
        size_t owned = n;
        //  The interpreter itself, which may be a wrapper outside its prefix.
        char python_real [PATH_MAX];
        if (python && strchr (python, '/') && realpath (python, python_real)
        &&  (ll_read [n] = strdup (python_real)))
            n++;
        n = s_python_paths (python && *python? python: "python3", ll_read, n, S_TASK_READ_MAX + 15);
        ll_read [n] = NULL;
        char ll_err [300];
        int rc = sandbox_landlock_start ((const char *const *) ll_read, s_shared_write,
                                         ll_err, sizeof ll_err);
        for (size_t i = owned; i < n; i++)
            free (ll_read [i]);
        if (rc && strcmp (landlock_mode, "on") == 0) {
            files_rmtree (workdir);
            return s_bad ("--task-landlock on", ll_err);
        }
        const char *top;
        if (rc)
            sq_warn ("tasks run as the governor's own user and may read its files, its key "
                     "among them: %s (docs/security.md, --task-landlock)", ll_err);
        else
            sq_info ("tasks reach only system directories, the Python paths, /tmp and their "
                     "own directory (Landlock ABI %d)", sandbox_landlock_abi ());
        if (rc == 0 && key_known && (top = sandbox_landlock_reaches (key_real)))
            sq_warn ("--secret-key %s lies under %s, which tasks may read: keep it elsewhere "
                     "(docs/security.md)", key_real, top);
        if (rc == 0 && (top = sandbox_landlock_reaches (workdir)))
            sq_warn ("the working directory %s lies under %s, which every task may read: "
                     "tasks can read each other's files; give a --workdir elsewhere "
                     "(docs/security.md)", workdir, top);
    }

    //  Signals are read from a signalfd in the receive loop; blocked before
    //  any thread starts (ZeroMQ's included) so that none of them takes one.
    sigset_t set;
    sigemptyset (&set);
    sigaddset (&set, SIGINT);
    sigaddset (&set, SIGTERM);
    pthread_sigmask (SIG_BLOCK, &set, NULL);
    //  A stop is bounded whatever the peers do: the receive thread arms an
    //  alarm when a signal stops it (receiver.c), and this leaves then.
    signal (SIGALRM, sq_stop_watchdog);
    int signal_fd = signalfd (-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    int code = 1;
    //  After the mask: the watcher's SIGTERM must reach the signalfd.
    char watch_err [256];
    parentwatch_t *watch = NULL;
    if (parentwatch_from_env (&watch, watch_err, sizeof watch_err)) {
        fprintf (stderr, "squall-governor: %s\n", watch_err);
        if (signal_fd >= 0)
            close (signal_fd);
        files_rmtree (workdir);
        for (uint32_t i = 0; i < config.n_resources; i++)
            free (resource_names [i]);
        return 2;
    }
    //  A client's key the starter's environment may carry is no task's:
    //  every task inherits the rest of this environment.
    unsetenv ("SQUALL_SECRET_KEY");
    //  Where a Python task's squall.get_client() connects (the broker's
    //  ROUTER serves clients and governors alike): an address, no secret.
    //  With keys its key pair comes over the executor's socket, made for
    //  that task attempt (docs/security.md, "Tasks that submit tasks").
    if (setenv ("SQUALL_TASK_BROKER", config.broker, 1))
        sq_warn ("cannot set SQUALL_TASK_BROKER: %s", strerror (errno));
    if (heap_prefault_start (prefault))
        sq_warn ("--prefault: cannot start its thread: %s", strerror (errno));
    governor_t *governor = signal_fd >= 0? governor_new (&config): NULL;
    if (governor) {
        code = governor_run (governor, signal_fd);
        governor_destroy (&governor);
    }
    else
        sq_error ("cannot start: %s", strerror (errno));
    heap_prefault_stop ();
    parentwatch_destroy (&watch);
    if (signal_fd >= 0)
        close (signal_fd);
    files_rmtree (workdir);
    for (uint32_t i = 0; i < config.n_resources; i++)
        free (resource_names [i]);
    sandbox_landlock_stop ();
    sq_info ("stopped (exit %d)", code);
    return code;
}
