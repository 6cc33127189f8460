/*  dirobj: packing and unpacking directory objects. */
#include "dirobj.h"
#include "grow.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MAGIC "SQDIR001"
#define S_MAX_DEPTH 256
#define S_MAX_PATH 4096

bool
dirobj_is (const char *content_type)
{
    return content_type && strcmp (content_type, DIROBJ_CONTENT_TYPE) == 0;
}

//  --------------------------------------------------------------------------
//  Packing: collect entries, then write them into one blob

typedef struct {
    char type;
    uint32_t mode;
    char *path;                 //  relative
    uint64_t size;              //  'f'
    char *target;               //  'l'
} s_entry_t;

typedef struct {
    s_entry_t *items;
    size_t n, cap;
    uint64_t bytes;
    const char *root;
    char *err;
    size_t err_size;
} s_walk_t;

static int
s_fail (s_walk_t *w, const char *what, const char *path)
{
    snprintf (w->err, w->err_size, "dir object: %s '%s'%s%s", what, path,
              errno? ": ": "", errno? strerror (errno): "");
    return -1;
}

//  True if the link target, read from a link at rel (relative path of the
//  link), stays inside the tree.
static bool
s_target_inside (const char *rel, const char *target)
{
    if (!*target || *target == '/')
        return false;
    int depth = 0;
    for (const char *p = rel; *p; p++)
        depth += *p == '/';          //  the link's directory depth
    const char *p = target;
    while (*p) {
        const char *slash = strchr (p, '/');
        size_t len = slash? (size_t) (slash - p): strlen (p);
        if (len == 2 && p [0] == '.' && p [1] == '.') {
            if (--depth < 0)
                return false;
        }
        else
        if (len > 0 && !(len == 1 && p [0] == '.'))
            depth++;
        p += len;
        while (*p == '/')
            p++;
    }
    return true;
}

static int
s_add (s_walk_t *w, s_entry_t entry)
{
    if (w->n == w->cap
    &&  sq_grow ((void **) &w->items, &w->cap, w->n + 1, sizeof *w->items, 64, SIZE_MAX)) {
        errno = ENOMEM;
        return s_fail (w, "out of memory at", entry.path);
    }
    w->items [w->n++] = entry;
    w->bytes += 1 + 4 + 4 + strlen (entry.path)
              + (entry.type == 'f'? 8 + entry.size: 0)
              + (entry.type == 'l'? 4 + strlen (entry.target): 0);
    return 0;
}

static int
s_cmp_names (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  Walks dir (relative path rel, "" for the root), in name order so that the
//  same tree always packs to the same bytes.
static int
s_walk (s_walk_t *w, const char *rel, int depth)
{
    char full [2 * S_MAX_PATH + 8];
    snprintf (full, sizeof full, "%s%s%s", w->root, *rel? "/": "", rel);
    if (depth > S_MAX_DEPTH) {
        errno = 0;
        return s_fail (w, "too deep at", full);
    }
    DIR *dir = opendir (full);
    if (!dir)
        return s_fail (w, "cannot read", full);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir (dir))) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        if (n == cap && sq_grow ((void **) &names, &cap, n + 1, sizeof *names, 16, SIZE_MAX)) {
            rc = -1;
            break;
        }
        if (!(names [n] = strdup (de->d_name))) { rc = -1; break; }
        n++;
    }
    closedir (dir);
    if (rc) {
        errno = ENOMEM;
        s_fail (w, "out of memory reading", full);
    }
    if (n)
        qsort (names, n, sizeof *names, s_cmp_names);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char child [S_MAX_PATH], path [2 * S_MAX_PATH + 8];
        int len = snprintf (child, sizeof child, "%s%s%s", rel, *rel? "/": "", names [i]);
        snprintf (path, sizeof path, "%s/%s", w->root, child);
        if (len < 0 || (size_t) len >= sizeof child || strlen (w->root) + 1 + (size_t) len >= S_MAX_PATH) {
            errno = ENAMETOOLONG;
            rc = s_fail (w, "path too long", child);
            break;
        }
        struct stat st;
        if (lstat (path, &st)) {
            rc = s_fail (w, "cannot stat", path);
            break;
        }
        s_entry_t entry = { 0, (uint32_t) (st.st_mode & 07777), strdup (child), 0, NULL };
        if (!entry.path) {
            errno = ENOMEM;
            rc = s_fail (w, "out of memory at", child);
            break;
        }
        if (S_ISDIR (st.st_mode)) {
            entry.type = 'd';
            rc = s_add (w, entry);
            if (rc == 0)
                rc = s_walk (w, child, depth + 1);
            continue;
        }
        if (S_ISREG (st.st_mode)) {
            entry.type = 'f';
            entry.size = (uint64_t) st.st_size;
        }
        else
        if (S_ISLNK (st.st_mode)) {
            char target [S_MAX_PATH];
            ssize_t tlen = readlink (path, target, sizeof target - 1);
            if (tlen < 0) {
                free (entry.path);
                rc = s_fail (w, "cannot read link", path);
                break;
            }
            target [tlen] = 0;
            if (!s_target_inside (child, target)) {
                errno = 0;
                free (entry.path);
                rc = s_fail (w, "a link pointing outside the tree (or absolute) at", child);
                break;
            }
            entry.type = 'l';
            entry.target = strdup (target);
            if (!entry.target) {
                free (entry.path);
                errno = ENOMEM;
                rc = s_fail (w, "out of memory at", child);
                break;
            }
        }
        else {
            errno = 0;
            free (entry.path);
            rc = s_fail (w, "neither a file, a directory nor a link:", child);
            break;
        }
        if (rc == 0 && s_add (w, entry)) {
            free (entry.path);
            free (entry.target);
            rc = -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        free (names [i]);
    free (names);
    return rc;
}

static char *
s_put32 (char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *p++ = (char) (v >> (8 * i));
    return p;
}

static char *
s_put64 (char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *p++ = (char) (v >> (8 * i));
    return p;
}

static int
s_read_file (const char *path, char *into, uint64_t size)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    uint64_t done = 0;
    while (done < size) {
        ssize_t n = read (fd, into + done, (size_t) (size - done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close (fd);
            errno = n == 0? EIO: errno;     //  shrank meanwhile
            return -1;
        }
        done += (uint64_t) n;
    }
    close (fd);
    return 0;
}

sq_blob_t *
dirobj_pack (const char *root, char *err, size_t err_size)
{
    s_walk_t w = { NULL, 0, 0, strlen (S_MAGIC), root, err, err_size };
    int rc = s_walk (&w, "", 0);
    sq_blob_t *blob = NULL;
    if (rc == 0 && w.bytes > SIZE_MAX / 2) {
        errno = EFBIG;
        rc = s_fail (&w, "too large:", root);
    }
    if (rc == 0 && !(blob = sq_blob_new ((size_t) w.bytes))) {
        errno = ENOMEM;
        rc = s_fail (&w, "out of memory packing", root);
    }
    if (rc == 0) {
        char *p = (char *) sq_blob_wdata (blob);
        memcpy (p, S_MAGIC, strlen (S_MAGIC));
        p += strlen (S_MAGIC);
        for (size_t i = 0; i < w.n && rc == 0; i++) {
            s_entry_t *e = &w.items [i];
            *p++ = e->type;
            p = s_put32 (p, e->mode);
            size_t len = strlen (e->path);
            p = s_put32 (p, (uint32_t) len);
            memcpy (p, e->path, len);
            p += len;
            if (e->type == 'f') {
                p = s_put64 (p, e->size);
                char path [S_MAX_PATH + 8];
                snprintf (path, sizeof path, "%s/%s", root, e->path);
                if (s_read_file (path, p, e->size))
                    rc = s_fail (&w, "cannot read", path);
                p += e->size;
            }
            else
            if (e->type == 'l') {
                size_t tlen = strlen (e->target);
                p = s_put32 (p, (uint32_t) tlen);
                memcpy (p, e->target, tlen);
                p += tlen;
            }
        }
        if (rc)
            sq_blob_unref (&blob);
    }
    for (size_t i = 0; i < w.n; i++) {
        free (w.items [i].path);
        free (w.items [i].target);
    }
    free (w.items);
    return blob;
}

//  --------------------------------------------------------------------------
//  Unpacking

typedef struct {
    const unsigned char *p, *end;
} s_cursor_t;

static int
s_get (s_cursor_t *c, void *into, size_t n)
{
    if ((size_t) (c->end - c->p) < n)
        return -1;
    memcpy (into, c->p, n);
    c->p += n;
    return 0;
}

static int
s_get32 (s_cursor_t *c, uint32_t *v)
{
    unsigned char b [4];
    if (s_get (c, b, 4))
        return -1;
    *v = (uint32_t) b [0] | (uint32_t) b [1] << 8 | (uint32_t) b [2] << 16 | (uint32_t) b [3] << 24;
    return 0;
}

static int
s_get64 (s_cursor_t *c, uint64_t *v)
{
    uint32_t lo, hi;
    if (s_get32 (c, &lo) || s_get32 (c, &hi))
        return -1;
    *v = (uint64_t) hi << 32 | lo;
    return 0;
}

//  A relative path of clean components.
static bool
s_path_ok (const char *path, size_t len)
{
    if (len == 0 || len >= S_MAX_PATH || memchr (path, 0, len))
        return false;
    const char *p = path, *end = path + len;
    while (p < end) {
        const char *slash = memchr (p, '/', (size_t) (end - p));
        size_t n = slash? (size_t) (slash - p): (size_t) (end - p);
        if (n == 0 || (n == 1 && p [0] == '.') || (n == 2 && p [0] == '.' && p [1] == '.'))
            return false;
        p += n + (slash? 1: 0);
        if (slash && p == end)
            return false;       //  trailing slash
    }
    return true;
}

//  Opens the directory holding `path` (relative to rootfd) without following
//  links; *name is set to the last component. fd or -1.
static int
s_open_parent (int rootfd, char *path, char **name)
{
    int fd = dup (rootfd);
    char *p = path;
    char *slash;
    while (fd >= 0 && (slash = strchr (p, '/'))) {
        *slash = 0;
        int next = openat (fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *slash = '/';
        close (fd);
        fd = next;
        p = slash + 1;
    }
    *name = p;
    return fd;
}

int
dirobj_unpack (const void *data, size_t size, const char *root, char *err, size_t err_size)
{
    s_cursor_t c = { (const unsigned char *) data, (const unsigned char *) data + size };
    char magic [8];
    if (s_get (&c, magic, 8) || memcmp (magic, S_MAGIC, 8)) {
        snprintf (err, err_size, "dir object: not a directory archive (no %s header)", S_MAGIC);
        return -1;
    }
    if (mkdir (root, 0755)) {
        snprintf (err, err_size, "dir object: cannot create '%s': %s", root, strerror (errno));
        return -1;
    }
    int rootfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        snprintf (err, err_size, "dir object: cannot open '%s': %s", root, strerror (errno));
        return -1;
    }
    //  Directory modes are set last, deepest first: a read-only directory
    //  must still receive its entries.
    char **dirs = NULL;
    uint32_t *modes = NULL;
    size_t n_dirs = 0, cap_dirs = 0;
    int rc = 0;
    char path [S_MAX_PATH];
    while (c.p < c.end && rc == 0) {
        unsigned char type;
        uint32_t mode, len;
        if (s_get (&c, &type, 1) || s_get32 (&c, &mode) || s_get32 (&c, &len)
        ||  len >= sizeof path || s_get (&c, path, len)) {
            snprintf (err, err_size, "dir object: truncated entry");
            rc = -1;
            break;
        }
        path [len] = 0;
        if (!s_path_ok (path, len)) {
            snprintf (err, err_size, "dir object: refused path '%s'", path);
            rc = -1;
            break;
        }
        mode &= 07777;
        char *name;
        int parent = s_open_parent (rootfd, path, &name);
        if (parent < 0) {
            snprintf (err, err_size, "dir object: '%s' is not under a directory of the archive: %s",
                      path, strerror (errno));
            rc = -1;
            break;
        }
        if (type == 'd') {
            if (mkdirat (parent, name, 0700)) {
                snprintf (err, err_size, "dir object: cannot create '%s': %s", path, strerror (errno));
                rc = -1;
            }
            else {
                //  Two arrays side by side: both grow from one capacity
                size_t cap_modes = cap_dirs;
                if (n_dirs == cap_dirs
                &&  (sq_grow ((void **) &modes, &cap_modes, n_dirs + 1, sizeof *modes, 16, SIZE_MAX)
                ||   sq_grow ((void **) &dirs, &cap_dirs, n_dirs + 1, sizeof *dirs, 16, SIZE_MAX)))
                    rc = -1;
                if (rc == 0 && (dirs [n_dirs] = strdup (path)))
                    modes [n_dirs++] = mode;
                else {
                    snprintf (err, err_size, "dir object: out of memory");
                    rc = -1;
                }
            }
        }
        else
        if (type == 'f') {
            uint64_t fsize;
            if (s_get64 (&c, &fsize) || fsize > (uint64_t) (c.end - c.p)) {
                snprintf (err, err_size, "dir object: truncated file '%s'", path);
                rc = -1;
            }
            int fd = rc? -1: openat (parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                     0600);
            if (rc == 0 && fd < 0) {
                snprintf (err, err_size, "dir object: cannot create '%s': %s", path, strerror (errno));
                rc = -1;
            }
            uint64_t done = 0;
            while (rc == 0 && done < fsize) {
                ssize_t n = write (fd, c.p + done, (size_t) (fsize - done));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    snprintf (err, err_size, "dir object: cannot write '%s': %s", path,
                              strerror (n < 0? errno: ENOSPC));
                    rc = -1;
                }
                else
                    done += (uint64_t) n;
            }
            if (fd >= 0) {
                if (rc == 0 && fchmod (fd, mode)) {
                    snprintf (err, err_size, "dir object: cannot chmod '%s': %s", path, strerror (errno));
                    rc = -1;
                }
                close (fd);
            }
            c.p += rc? 0: fsize;
        }
        else
        if (type == 'l') {
            uint32_t tlen;
            char target [S_MAX_PATH];
            if (s_get32 (&c, &tlen) || tlen >= sizeof target || s_get (&c, target, tlen)) {
                snprintf (err, err_size, "dir object: truncated link '%s'", path);
                rc = -1;
            }
            else {
                target [tlen] = 0;
                if (memchr (target, 0, tlen) || !s_target_inside (path, target)) {
                    snprintf (err, err_size, "dir object: link '%s' points outside the tree", path);
                    rc = -1;
                }
                else
                if (symlinkat (target, parent, name)) {
                    snprintf (err, err_size, "dir object: cannot create link '%s': %s", path,
                              strerror (errno));
                    rc = -1;
                }
            }
        }
        else {
            snprintf (err, err_size, "dir object: unknown entry type %u at '%s'", type, path);
            rc = -1;
        }
        close (parent);
    }
    for (size_t i = n_dirs; i-- > 0; ) {
        if (rc == 0 && fchmodat (rootfd, dirs [i], modes [i], 0)) {
            snprintf (err, err_size, "dir object: cannot chmod '%s': %s", dirs [i], strerror (errno));
            rc = -1;
        }
        free (dirs [i]);
    }
    free (dirs);
    free (modes);
    close (rootfd);
    return rc;
}
