/*  The governor's defaults from its cgroup (governor/cgroup.c), on whole
    fake systems built in a temporary directory: a host with no limits, a
    container on cgroup v2 (its group at the root of its own view), a
    Slurm step nested under a job whose limit is the smaller, a v1 host
    like Debian's hybrid layout, a container on v1 whose mount root is its
    own group, and files with garbage in them, which count as no limit. */
#include "cgroup.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdarg.h>
#include <sys/stat.h>

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf (stderr, __VA_ARGS__); fprintf (stderr, "\n"); exit (1); } } while (0)

static char s_root [256];

//  Writes root/path, making its directories.
static void
s_put (const char *path, const char *format, ...)
{
    char full [1024];
    snprintf (full, sizeof full, "%s%s", s_root, path);
    for (char *p = full + strlen (s_root) + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir (full, 0755);
            *p = '/';
        }
    FILE *f = fopen (full, "w");
    CHECK (f, "%s", full);
    va_list args;
    va_start (args, format);
    vfprintf (f, format, args);
    va_end (args);
    fclose (f);
}

static void
s_fresh (const char *name)
{
    snprintf (s_root, sizeof s_root, "/tmp/squall-cgroup-test-%d-%s", (int) getpid (), name);
    char command [1024];
    snprintf (command, sizeof command, "rm -rf '%s' && mkdir -p '%s'", s_root, s_root);
    CHECK (system (command) == 0, "%s", command);
}

static void
s_clean (void)
{
    char command [1024];
    snprintf (command, sizeof command, "rm -rf '%s'", s_root);
    CHECK (system (command) == 0, "%s", command);
}

static const char *s_v2_mounts =
    "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n";

int
main (void)
{
    cgroup_limits_t limits;

    //  1. A host on v2 without limits: the root group has no memory.max.
    s_fresh ("host");
    s_put ("/proc/self/cgroup", "0::/user.slice/session-1.scope\n");
    s_put ("/proc/self/mountinfo", "%s", s_v2_mounts);
    s_put ("/sys/fs/cgroup/user.slice/session-1.scope/memory.max", "max\n");
    s_put ("/sys/fs/cgroup/user.slice/session-1.scope/cpu.max", "max 100000\n");
    s_put ("/sys/fs/cgroup/user.slice/memory.max", "max\n");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 0 && limits.cpus == 0, "no limits: %llu %.2f",
           (unsigned long long) limits.memory, limits.cpus);
    s_clean ();

    //  2. A container on v2 with a cgroup namespace: its group is "/", the
    //  mount shows its own group at the mount point.
    s_fresh ("container");
    s_put ("/proc/self/cgroup", "0::/\n");
    s_put ("/proc/self/mountinfo", "%s", s_v2_mounts);
    s_put ("/sys/fs/cgroup/memory.max", "1073741824\n");
    s_put ("/sys/fs/cgroup/cpu.max", "150000 100000\n");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 1073741824, "container memory: %llu", (unsigned long long) limits.memory);
    CHECK (limits.cpus > 1.49 && limits.cpus < 1.51, "container cpus: %.2f", limits.cpus);
    s_clean ();

    //  3. A Slurm step nested in its job: the job's limit is smaller and
    //  binds the step; the step's cpu quota is the smaller one.
    s_fresh ("slurm");
    s_put ("/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n");
    s_put ("/proc/self/mountinfo", "%s", s_v2_mounts);
    s_put ("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/memory.max", "536870912\n");
    s_put ("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.max", "1073741824\n");
    s_put ("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/user/task_0/memory.max", "max\n");
    s_put ("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/cpu.max", "400000 100000\n");
    s_put ("/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/cpu.max", "200000 100000\n");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 536870912, "the job's limit binds the step: %llu",
           (unsigned long long) limits.memory);
    CHECK (limits.cpus > 1.99 && limits.cpus < 2.01, "the step's quota: %.2f", limits.cpus);
    s_clean ();

    //  4. A v1 (hybrid) host, as Debian lays it out: memory and cpu,cpuacct
    //  hierarchies, v1's "no limit" number, a quota of -1 beside a limit.
    s_fresh ("v1");
    s_put ("/proc/self/cgroup",
           "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n3:cpuset:/\n"
           "2:cpu,cpuacct:/batch\n0::/\n");
    s_put ("/proc/self/mountinfo",
           "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
           "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
           "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
           "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n");
    s_put ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    s_put ("/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
    s_put ("/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "2147483648\n");
    s_put ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    s_put ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    s_put ("/sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us", "50000\n");
    s_put ("/sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us", "100000\n");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 2147483648ull, "v1 memory: %llu", (unsigned long long) limits.memory);
    CHECK (limits.cpus > 0.49 && limits.cpus < 0.51, "v1 quota: %.2f", limits.cpus);
    s_clean ();

    //  5. A container on v1: the mount's root is the container's group, and
    //  /proc/self/cgroup names it in full (no cgroup namespace).
    s_fresh ("v1container");
    s_put ("/proc/self/cgroup", "5:memory:/docker/f00d\n4:cpu,cpuacct:/docker/f00d\n");
    s_put ("/proc/self/mountinfo",
           "40 39 0:32 /docker/f00d /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n"
           "41 39 0:29 /docker/f00d /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n");
    s_put ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "805306368\n");
    s_put ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
    s_put ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 805306368, "v1 container memory: %llu", (unsigned long long) limits.memory);
    CHECK (limits.cpus > 2.99 && limits.cpus < 3.01, "v1 container cpus: %.2f", limits.cpus);
    s_clean ();

    //  6. Garbage: words, negative and trailing text, an empty file, a
    //  zero period, a mountinfo line cut short: no limit, no crash.
    s_fresh ("garbage");
    s_put ("/proc/self/cgroup", "0::/g\ngarbage line\n:::\n");
    s_put ("/proc/self/mountinfo", "1 2 3\n%s30 22 0:26 / /x rw -\n", s_v2_mounts);
    s_put ("/sys/fs/cgroup/g/memory.max", "lots\n");
    s_put ("/sys/fs/cgroup/memory.max", "-5\n");
    s_put ("/sys/fs/cgroup/g/cpu.max", "100000 0\n");
    s_put ("/sys/fs/cgroup/cpu.max", "12 34 56\n");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 0 && limits.cpus == 0, "garbage is no limit: %llu %.2f",
           (unsigned long long) limits.memory, limits.cpus);
    s_put ("/sys/fs/cgroup/g/memory.max", "1048576 extra\n");
    s_put ("/sys/fs/cgroup/memory.max", "");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 0, "a number with more on its line is not one: %llu",
           (unsigned long long) limits.memory);
    s_clean ();

    //  7. No /proc at all.
    s_fresh ("empty");
    cgroup_limits (s_root, &limits);
    CHECK (limits.memory == 0 && limits.cpus == 0, "nothing found, nothing assumed");
    s_clean ();

    //  8. Usage (cgroup_usage_*): what the group uses less its file pages,
    //  v2 and v1, read again after it changed; garbage is unreadable.
    s_fresh ("usage2");
    s_put ("/proc/self/cgroup", "0::/\n");
    s_put ("/proc/self/mountinfo", "%s", s_v2_mounts);
    s_put ("/sys/fs/cgroup/memory.current", "900000000\n");
    s_put ("/sys/fs/cgroup/memory.stat", "anon 500000000\nfile 400000000\n"
           "active_file 150000000\ninactive_file 250000000\nshmem 0\n");
    cgroup_usage_t *usage = cgroup_usage_new (s_root);
    uint64_t used = 0;
    CHECK (usage && cgroup_usage_read (usage, &used) == 0 && used == 500000000,
           "v2 usage less file pages: %llu", (unsigned long long) used);
    s_put ("/sys/fs/cgroup/memory.current", "1000000000\n");
    CHECK (cgroup_usage_read (usage, &used) == 0 && used == 600000000,
           "read again: %llu", (unsigned long long) used);
    s_put ("/sys/fs/cgroup/memory.stat", "active_file x\ninactive_file 1\n");
    CHECK (cgroup_usage_read (usage, &used) == -1, "garbage in memory.stat is unreadable");
    s_put ("/sys/fs/cgroup/memory.stat", "inactive_file 1\n");
    CHECK (cgroup_usage_read (usage, &used) == -1, "a missing field is unreadable");
    s_put ("/sys/fs/cgroup/memory.stat", "active_file 2000000000\ninactive_file 0\n");
    CHECK (cgroup_usage_read (usage, &used) == 0 && used == 0, "more file than usage: 0");
    cgroup_usage_destroy (&usage);
    CHECK (usage == NULL, "destroy nulls");
    s_clean ();
    s_fresh ("usage1");
    s_put ("/proc/self/cgroup", "5:memory:/docker/f00d\n");
    s_put ("/proc/self/mountinfo",
           "40 39 0:32 /docker/f00d /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n");
    s_put ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "800000000\n");
    s_put ("/sys/fs/cgroup/memory/memory.stat", "cache 300000000\nrss 500000000\n"
           "active_file 1\ninactive_file 1\n"
           "total_active_file 100000000\ntotal_inactive_file 200000000\n");
    usage = cgroup_usage_new (s_root);
    CHECK (usage && cgroup_usage_read (usage, &used) == 0 && used == 500000000,
           "v1 usage less its total_ file pages: %llu", (unsigned long long) used);
    cgroup_usage_destroy (&usage);
    s_clean ();
    s_fresh ("nousage");
    s_put ("/proc/self/cgroup", "0::/\n");
    s_put ("/proc/self/mountinfo", "%s", s_v2_mounts);
    CHECK (cgroup_usage_new (s_root) == NULL, "no usage file: no reader");
    s_clean ();

    //  9. This machine, for the log: whatever it is, it does not crash.
    cgroup_limits ("", &limits);
    printf ("test_governor_cgroup: host, v2 container, Slurm step, v1 hybrid and container, "
            "garbage: ok (this machine: memory %llu, cpus %.2f)\n",
            (unsigned long long) limits.memory, limits.cpus);
    return 0;
}
