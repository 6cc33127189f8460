/*  cgroup: a process's memory and CPU limits from its control groups. */
#include "cgroup.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_FILE_MAX 65536        //  /proc/self/mountinfo of a busy host fits
#define S_PATH_MAX 4096
//  v1 says "no limit" with a huge number (the largest page multiple below
//  2^63); anything this big is no limit.
#define S_NO_LIMIT (1ull << 60)

//  Reads a whole small file into buf (NUL-terminated). Length, or -1.
static ssize_t
s_read (const char *root, const char *path, char *buf, size_t size)
{
    char full [2 * S_PATH_MAX + 64];
    if ((size_t) snprintf (full, sizeof full, "%s%s", root, path) >= sizeof full)
        return -1;
    int fd = open (full, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t n = read (fd, buf + got, size - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    close (fd);
    buf [got] = 0;
    return (ssize_t) got;
}

//  Reads dir/name, a file of the group's.
static ssize_t
s_read_in (const char *root, const char *dir, const char *name, char *buf, size_t size)
{
    char path [S_PATH_MAX + 64];
    if ((size_t) snprintf (path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return -1;
    return s_read (root, path, buf, size);
}

//  A decimal number alone on the file's first line (trailing newline
//  allowed). 0 with *value, or -1.
static int
s_number (const char *text, uint64_t *value)
{
    if (!isdigit ((unsigned char) *text))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull (text, &end, 10);
    if (errno || (*end && *end != '\n') || (*end == '\n' && end [1]))
        return -1;
    *value = v;
    return 0;
}

//  Where the hierarchy that holds `controller` ("" for v2's unified one) is
//  mounted, and this process's group in it: dir = mount point + the
//  group's path below the mount's root. 0, or -1 if not found.
static int
s_group_dir (const char *root, const char *controller, char *dir, size_t dir_size,
             size_t *mount_len)
{
    static char cgroups [S_FILE_MAX], mounts [S_FILE_MAX];
    if (s_read (root, "/proc/self/cgroup", cgroups, sizeof cgroups) <= 0
    ||  s_read (root, "/proc/self/mountinfo", mounts, sizeof mounts) <= 0)
        return -1;
    //  /proc/self/cgroup: "ID:CONTROLLERS:PATH"; v2 is "0::PATH".
    char path [S_PATH_MAX] = "";
    bool found = false;
    char *save_line;
    for (char *line = strtok_r (cgroups, "\n", &save_line); line && !found;
         line = strtok_r (NULL, "\n", &save_line)) {
        char *c1 = strchr (line, ':');
        char *c2 = c1? strchr (c1 + 1, ':'): NULL;
        if (!c2)
            continue;
        *c2 = 0;
        const char *controllers = c1 + 1;
        if (*controller == 0)
            found = *controllers == 0 && c1 == line + 1 && line [0] == '0';
        else {
            //  "cpu,cpuacct" holds "cpu"; "cpuset" does not.
            size_t len = strlen (controller);
            for (const char *p = controllers; p && *p; ) {
                if (strncmp (p, controller, len) == 0 && (p [len] == ',' || p [len] == 0))
                    found = true;
                p = strchr (p, ',');
                if (p)
                    p++;
            }
        }
        if (found && strlen (c2 + 1) < sizeof path)
            strcpy (path, c2 + 1);
        else
            found = false;
    }
    if (!found || path [0] != '/')
        return -1;
    //  /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPER"
    for (char *line = strtok_r (mounts, "\n", &save_line); line;
         line = strtok_r (NULL, "\n", &save_line)) {
        char *fields [6];
        int n = 0;
        char *save, *tok = strtok_r (line, " ", &save);
        for (; tok && n < 5; tok = strtok_r (NULL, " ", &save))
            fields [n++] = tok;
        if (n < 5)
            continue;
        char *dash = NULL;
        for (; tok; tok = strtok_r (NULL, " ", &save))
            if (strcmp (tok, "-") == 0) {
                dash = tok;
                break;
            }
        char *fstype = dash? strtok_r (NULL, " ", &save): NULL;
        char *source = fstype? strtok_r (NULL, " ", &save): NULL;
        char *super = source? strtok_r (NULL, " ", &save): NULL;
        if (!fstype)
            continue;
        bool match = false;
        if (*controller == 0)
            match = strcmp (fstype, "cgroup2") == 0;
        else
        if (strcmp (fstype, "cgroup") == 0 && super) {
            size_t len = strlen (controller);
            for (const char *p = super; p && *p; ) {
                if (strncmp (p, controller, len) == 0 && (p [len] == ',' || p [len] == 0))
                    match = true;
                p = strchr (p, ',');
                if (p)
                    p++;
            }
        }
        if (!match)
            continue;
        //  The group's path below the mount's root; a mount of a group the
        //  process is not under (another namespace's view) is taken as the
        //  process's own group.
        const char *mount_root = fields [3], *mount_point = fields [4];
        size_t root_len = strcmp (mount_root, "/") == 0? 0: strlen (mount_root);
        const char *below = path;
        if (root_len && strncmp (path, mount_root, root_len) == 0
        &&  (path [root_len] == '/' || path [root_len] == 0))
            below = path + root_len;
        else
        if (root_len)
            below = "";
        if ((size_t) snprintf (dir, dir_size, "%s%s", mount_point,
                               strcmp (below, "/") == 0? "": below) >= dir_size)
            return -1;
        *mount_len = strlen (mount_point);
        return 0;
    }
    return -1;
}

//  Calls `read` on dir and on each parent up to the mount point (the
//  first mount_len bytes of dir), which is read last.
typedef void (s_level_fn) (const char *root, const char *dir, void *arg);

static void
s_levels (const char *root, const char *group, size_t mount_len, s_level_fn *read, void *arg)
{
    char dir [S_PATH_MAX];
    snprintf (dir, sizeof dir, "%s", group);
    while (1) {
        read (root, dir, arg);
        char *slash = strrchr (dir, '/');
        if (strlen (dir) <= mount_len || !slash || (size_t) (slash - dir) < mount_len)
            break;
        *slash = 0;
    }
}

static void
s_memory_v2 (const char *root, const char *dir, void *arg)
{
    uint64_t *limit = (uint64_t *) arg, v;
    char text [64];
    if (s_read_in (root, dir, "memory.max", text, sizeof text) > 0 && s_number (text, &v) == 0
    &&  v > 0 && v < S_NO_LIMIT && (*limit == 0 || v < *limit))
        *limit = v;
}

static void
s_memory_v1 (const char *root, const char *dir, void *arg)
{
    uint64_t *limit = (uint64_t *) arg, v;
    char text [64];
    if (s_read_in (root, dir, "memory.limit_in_bytes", text, sizeof text) > 0 && s_number (text, &v) == 0
    &&  v > 0 && v < S_NO_LIMIT && (*limit == 0 || v < *limit))
        *limit = v;
}

static void
s_cpu_v2 (const char *root, const char *dir, void *arg)
{
    double *limit = (double *) arg;
    char text [64];
    if (s_read_in (root, dir, "cpu.max", text, sizeof text) <= 0)
        return;
    //  "QUOTA PERIOD" or "max PERIOD"
    char *space = strchr (text, ' ');
    uint64_t quota, period;
    if (!space)
        return;
    *space = 0;
    if (s_number (text, &quota) || s_number (space + 1, &period) || quota == 0 || period == 0)
        return;
    double cpus = (double) quota / (double) period;
    if (*limit == 0 || cpus < *limit)
        *limit = cpus;
}

static void
s_cpu_v1 (const char *root, const char *dir, void *arg)
{
    double *limit = (double *) arg;
    char text [64];
    uint64_t quota, period;
    //  "-1" (no quota) is not a number here, so it is skipped.
    if (s_read_in (root, dir, "cpu.cfs_quota_us", text, sizeof text) <= 0
    ||  s_number (text, &quota) || quota == 0
    ||  s_read_in (root, dir, "cpu.cfs_period_us", text, sizeof text) <= 0
    ||  s_number (text, &period) || period == 0)
        return;
    double cpus = (double) quota / (double) period;
    if (*limit == 0 || cpus < *limit)
        *limit = cpus;
}

void
cgroup_limits (const char *root, cgroup_limits_t *limits)
{
    limits->memory = 0;
    limits->cpus = 0;
    char dir [S_PATH_MAX];
    size_t mount_len;
    if (s_group_dir (root, "", dir, sizeof dir, &mount_len) == 0) {
        s_levels (root, dir, mount_len, s_memory_v2, &limits->memory);
        s_levels (root, dir, mount_len, s_cpu_v2, &limits->cpus);
    }
    if (s_group_dir (root, "memory", dir, sizeof dir, &mount_len) == 0)
        s_levels (root, dir, mount_len, s_memory_v1, &limits->memory);
    if (s_group_dir (root, "cpu", dir, sizeof dir, &mount_len) == 0)
        s_levels (root, dir, mount_len, s_cpu_v1, &limits->cpus);
}

//  --------------------------------------------------------------------------
//  Usage

#define S_STAT_MAX 16384        //  memory.stat: about 1.5 KB on v1, 3 KB on v2

struct _cgroup_usage_t {
    char usage [2 * S_PATH_MAX + 64];       //  full paths, root included
    char stat [2 * S_PATH_MAX + 64];
    bool v1;
    char text [S_STAT_MAX];                 //  memory.stat as last read
};

static bool
s_readable (const char *path)
{
    return access (path, R_OK) == 0;
}

cgroup_usage_t *
cgroup_usage_new (const char *root)
{
    cgroup_usage_t *self = (cgroup_usage_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    char dir [S_PATH_MAX];
    size_t mount_len;
    if (s_group_dir (root, "", dir, sizeof dir, &mount_len) == 0) {
        snprintf (self->usage, sizeof self->usage, "%s%s/memory.current", root, dir);
        snprintf (self->stat, sizeof self->stat, "%s%s/memory.stat", root, dir);
        if (s_readable (self->usage) && s_readable (self->stat))
            return self;
    }
    if (s_group_dir (root, "memory", dir, sizeof dir, &mount_len) == 0) {
        snprintf (self->usage, sizeof self->usage, "%s%s/memory.usage_in_bytes", root, dir);
        snprintf (self->stat, sizeof self->stat, "%s%s/memory.stat", root, dir);
        self->v1 = true;
        if (s_readable (self->usage) && s_readable (self->stat))
            return self;
    }
    free (self);
    return NULL;
}

void
cgroup_usage_destroy (cgroup_usage_t **self_p)
{
    free (*self_p);
    *self_p = NULL;
}

//  The value of "name N" on a line of memory.stat. 0, or -1 if absent.
static int
s_stat_field (const char *text, const char *name, uint64_t *value)
{
    size_t len = strlen (name);
    for (const char *line = text; line && *line; ) {
        const char *next = strchr (line, '\n');
        if (strncmp (line, name, len) == 0 && line [len] == ' ') {
            char number [32];
            size_t n = (next? (size_t) (next - line): strlen (line)) - len - 1;
            if (n == 0 || n >= sizeof number)
                return -1;
            memcpy (number, line + len + 1, n);
            number [n] = 0;
            return s_number (number, value);
        }
        line = next? next + 1: NULL;
    }
    return -1;
}

int
cgroup_usage_read (cgroup_usage_t *self, uint64_t *bytes)
{
    char text [64];
    uint64_t usage, active, inactive;
    if (s_read ("", self->usage, text, sizeof text) <= 0 || s_number (text, &usage)
    ||  s_read ("", self->stat, self->text, sizeof self->text) <= 0
    ||  s_stat_field (self->text, self->v1? "total_active_file": "active_file", &active)
    ||  s_stat_field (self->text, self->v1? "total_inactive_file": "inactive_file", &inactive))
        return -1;
    uint64_t file = active + inactive;
    *bytes = usage > file? usage - file: 0;
    return 0;
}
