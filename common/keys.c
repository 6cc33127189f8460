/*  keys: CurveZMQ key pairs, key files and the keyring. */
#include "keys.h"
#include "log.h"
#include "fdpass.h"
#include "grow.h"
#include <zmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_KEYS 65536        //  keys in one keyring

static const char *s_roles [] = { "none", "client", "governor", "admin", "broker" };

const char *
sq_role_name (sq_role_t role)
{
    return (unsigned) role < sizeof s_roles / sizeof s_roles [0]? s_roles [role]: "none";
}

sq_role_t
sq_role_parse (const char *name)
{
    for (int i = 1; i < (int) (sizeof s_roles / sizeof s_roles [0]); i++)
        if (name && strcmp (name, s_roles [i]) == 0)
            return (sq_role_t) i;
    return SQ_ROLE_NONE;
}

bool
sq_key_name_ok (const char *name)
{
    size_t n = name? strlen (name): 0;
    if (n == 0 || n > SQ_MAX_TENANT || name [0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name [i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
        ||  c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

void
sq_key_z85 (const uint8_t *key, char *text)
{
    zmq_z85_encode (text, key, SQ_KEY_LEN);
}

int
sq_key_from_z85 (const char *text, size_t len, uint8_t *key)
{
    static const char alphabet [] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    char copy [SQ_Z85_LEN + 1];
    if (len != SQ_Z85_LEN)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (!text [i] || !strchr (alphabet, text [i]))
            return -1;
    memcpy (copy, text, len);
    copy [len] = 0;
    return zmq_z85_decode (key, copy)? 0: -1;
}

//  --------------------------------------------------------------------------
//  Certificate text (ZPL, the subset zcert writes): comment lines start
//  with '#'; a section is a name at column 0; its properties are indented
//  `name = "value"` (or unquoted) lines.

static int
s_fail (char *err, size_t err_size, int line, const char *why)
{
    if (err && err_size && line)
        snprintf (err, err_size, "line %d: %s", line, why);
    else
    if (err && err_size)
        snprintf (err, err_size, "%s", why);
    return -1;
}

//  One property line (after its indentation): name and value, bounded.
static int
s_property (const char *p, const char *end, char *name, size_t name_size,
            char *value, size_t value_size)
{
    const char *n0 = p;
    while (p < end && *p != ' ' && *p != '=' && *p != '\t')
        p++;
    size_t n = (size_t) (p - n0);
    if (n == 0 || n >= name_size)
        return -1;
    memcpy (name, n0, n);
    name [n] = 0;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p != '=')
        return -1;
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    const char *v0 = p, *v1;
    if (p < end && *p == '"') {
        v0 = ++p;
        while (p < end && *p != '"')
            p++;
        if (p == end)
            return -1;
        v1 = p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p != end)
            return -1;
    }
    else {
        v1 = end;
        while (v1 > v0 && (v1 [-1] == ' ' || v1 [-1] == '\t'))
            v1--;
    }
    size_t v = (size_t) (v1 - v0);
    if (v >= value_size)
        return -1;
    memcpy (value, v0, v);
    value [v] = 0;
    return memchr (value, 0, v)? -1: 0;
}

int
sq_cert_parse (sq_cert_t *cert, const char *text, size_t size, char *err, size_t err_size)
{
    memset (cert, 0, sizeof *cert);
    if (size > SQ_CERT_MAX_FILE)
        return s_fail (err, err_size, 0, "too big for a key file");
    enum { NONE, METADATA, CURVE, OTHER } section = NONE;
    bool has_public = false;
    const char *p = text, *end = text + size;
    for (int line = 1; p < end; line++) {
        const char *eol = memchr (p, '\n', (size_t) (end - p));
        const char *next = eol? eol + 1: end;
        if (!eol)
            eol = end;
        if (eol > p && eol [-1] == '\r')
            eol--;
        const char *q = p;
        while (q < eol && (*q == ' ' || *q == '\t'))
            q++;
        bool indented = q > p;
        if (q == eol || *q == '#') {
            p = next;
            continue;
        }
        if (!indented) {
            size_t n = (size_t) (eol - q);
            section = n == 8 && memcmp (q, "metadata", 8) == 0? METADATA
                    : n == 5 && memcmp (q, "curve", 5) == 0? CURVE: OTHER;
            p = next;
            continue;
        }
        char name [64], value [256];
        if (s_property (q, eol, name, sizeof name, value, sizeof value))
            return s_fail (err, err_size, line, "expected name = \"value\"");
        if (section == NONE)
            return s_fail (err, err_size, line, "a property outside any section");
        if (section == CURVE && strcmp (name, "public-key") == 0) {
            if (sq_key_from_z85 (value, strlen (value), cert->public_key))
                return s_fail (err, err_size, line, "public-key is not a 40-character Z85 key");
            has_public = true;
        }
        else
        if (section == CURVE && strcmp (name, "secret-key") == 0) {
            if (sq_key_from_z85 (value, strlen (value), cert->secret_key))
                return s_fail (err, err_size, line, "secret-key is not a 40-character Z85 key");
            cert->has_secret = true;
        }
        else
        if (section == METADATA && strcmp (name, "role") == 0) {
            cert->role = sq_role_parse (value);
            if (cert->role == SQ_ROLE_NONE)
                return s_fail (err, err_size, line,
                               "role must be client, governor, admin or broker");
        }
        else
        if (section == METADATA && strcmp (name, "tenant") == 0) {
            if (!sq_key_name_ok (value))
                return s_fail (err, err_size, line,
                               "tenant must be 1 to 64 of A-Z a-z 0-9 . _ -");
            snprintf (cert->tenant, sizeof cert->tenant, "%.*s", SQ_MAX_TENANT, value);
        }
        p = next;
    }
    if (!has_public)
        return s_fail (err, err_size, 0, "no curve public-key");
    if (cert->has_secret) {
        //  The two halves must belong together.
        uint8_t derived [SQ_KEY_LEN];
        char secret [SQ_Z85_LEN + 1], public_ [SQ_Z85_LEN + 1];
        sq_key_z85 (cert->secret_key, secret);
        if (zmq_curve_public (public_, secret) || zmq_z85_decode (derived, public_) == NULL
        ||  memcmp (derived, cert->public_key, SQ_KEY_LEN))
            return s_fail (err, err_size, 0, "public-key and secret-key are not a pair");
    }
    sq_key_z85 (cert->public_key, cert->public_z85);
    return 0;
}

int
sq_cert_load (sq_cert_t *cert, const char *path, char *err, size_t err_size)
{
    char why [300];
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf (err, err_size, "%s: %s", path, strerror (errno));
        return -1;
    }
    struct stat st;
    char *text = NULL;
    ssize_t got = 0;
    if (fstat (fd, &st) || !S_ISREG (st.st_mode) || st.st_size > SQ_CERT_MAX_FILE) {
        snprintf (err, err_size, "%s: not a key file (a regular file of at most %d bytes)",
                  path, SQ_CERT_MAX_FILE);
        close (fd);
        return -1;
    }
    text = (char *) malloc ((size_t) st.st_size + 1);
    if (text) {
        size_t have = 0;
        while (have < (size_t) st.st_size) {
            got = read (fd, text + have, (size_t) st.st_size - have);
            if (got <= 0)
                break;
            have += (size_t) got;
        }
        got = (ssize_t) have;
    }
    close (fd);
    if (!text || got != st.st_size) {
        snprintf (err, err_size, "%s: cannot read it", path);
        free (text);
        return -1;
    }
    int rc = sq_cert_parse (cert, text, (size_t) got, why, sizeof why);
    free (text);
    if (rc) {
        snprintf (err, err_size, "%s: %s", path, why);
        return -1;
    }
    if (cert->has_secret && (st.st_mode & 077)) {
        snprintf (err, err_size, "%s holds a secret key but others may read it: "
                  "chmod 600 %s", path, path);
        return -1;
    }
    return 0;
}

int
sq_cert_load_pair (const char *secret_file, const char *broker_file,
                   const char *secret_name, const char *broker_name,
                   uint8_t *public_key, uint8_t *secret_key, uint8_t *broker_key,
                   char *err, size_t err_size)
{
    sq_cert_t mine, broker;
    char why [600];
    if (sq_cert_load (&mine, secret_file, why, sizeof why)) {
        snprintf (err, err_size, "%s: %s", secret_name, why);
        return -1;
    }
    if (!mine.has_secret) {
        snprintf (err, err_size, "%s holds no secret key (give the .key file, not the .pub)",
                  secret_file);
        return -1;
    }
    if (sq_cert_load (&broker, broker_file, why, sizeof why)) {
        snprintf (err, err_size, "%s: %s", broker_name, why);
        return -1;
    }
    memcpy (public_key, mine.public_key, SQ_KEY_LEN);
    memcpy (secret_key, mine.secret_key, SQ_KEY_LEN);
    memcpy (broker_key, broker.public_key, SQ_KEY_LEN);
    memset (&mine, 0, sizeof mine);
    return 0;
}

//  Writes a file that must not exist yet, with the given mode from the
//  start (a secret is never readable by others, not even for a moment).
static int
s_write_new (const char *path, mode_t mode, const char *text, char *err, size_t err_size)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        snprintf (err, err_size, "cannot create %s: %s", path, strerror (errno));
        return -1;
    }
    int wrote = sq_write_all (fd, text, strlen (text));
    if (fchmod (fd, mode) || wrote || fsync (fd)) {
        snprintf (err, err_size, "cannot write %s: %s", path, strerror (errno));
        close (fd);
        unlink (path);
        return -1;
    }
    close (fd);
    return 0;
}

int
sq_keys_generate (const char *name, const char *dir, const char *role, const char *tenant,
                  char *err, size_t err_size)
{
    sq_role_t r = sq_role_parse (role);
    if (!sq_key_name_ok (name))
        return s_fail (err, err_size, 0, "the key name must be 1 to 64 of A-Z a-z 0-9 . _ -");
    if (r == SQ_ROLE_NONE)
        return s_fail (err, err_size, 0, "the role must be client, governor, admin or broker");
    if (tenant && !sq_key_name_ok (tenant))
        return s_fail (err, err_size, 0, "the tenant must be 1 to 64 of A-Z a-z 0-9 . _ -");
    if (tenant && r != SQ_ROLE_CLIENT && r != SQ_ROLE_ADMIN)
        return s_fail (err, err_size, 0, "only client and admin keys belong to a tenant");
    //  A client is its own tenant unless told otherwise; an admin sees every
    //  tenant but acts in its own.
    if (!tenant && (r == SQ_ROLE_CLIENT || r == SQ_ROLE_ADMIN))
        tenant = name;
    char public_ [SQ_Z85_LEN + 1], secret [SQ_Z85_LEN + 1];
    if (zmq_curve_keypair (public_, secret))
        return s_fail (err, err_size, 0, "this libzmq cannot make CURVE keys");
    char stamp [64], meta [256], path_key [4096], path_pub [4096];
    time_t now = time (NULL);
    struct tm tm;
    strftime (stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime_r (&now, &tm));
    snprintf (meta, sizeof meta, "metadata\n    role = \"%s\"\n%s%s%s", sq_role_name (r),
              tenant? "    tenant = \"": "", tenant? tenant: "", tenant? "\"\n": "");
    const char *d = dir && *dir? dir: ".";
    snprintf (path_key, sizeof path_key, "%s/%s.key", d, name);
    snprintf (path_pub, sizeof path_pub, "%s/%s.pub", d, name);
    size_t size = strlen (meta) + 1024;
    char *text = (char *) malloc (size);
    if (!text)
        return s_fail (err, err_size, 0, "out of memory");
    snprintf (text, size,
              "#   ****  Generated on %s by squall keygen  ****\n"
              "#   ZeroMQ CURVE **Secret** Certificate\n"
              "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
              "%scurve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
              stamp, meta, public_, secret);
    int rc = s_write_new (path_key, 0600, text, err, err_size);
    if (rc == 0) {
        snprintf (text, size,
                  "#   ****  Generated on %s by squall keygen  ****\n"
                  "#   ZeroMQ CURVE Public Certificate\n"
                  "#   Exchange securely, or use a secure mechanism to verify the contents\n"
                  "#   of this file after exchange.\n\n"
                  "%scurve\n    public-key = \"%s\"\n",
                  stamp, meta, public_);
        rc = s_write_new (path_pub, 0644, text, err, err_size);
        if (rc)
            unlink (path_key);
    }
    memset (secret, 0, sizeof secret);
    memset (text, 0, size);
    free (text);
    return rc;
}

//  --------------------------------------------------------------------------
//  Keyring: entries in an array, found by a sorted index of their Z85 text.

struct _sq_keyring_t {
    sq_keyentry_t *entries;
    size_t n;
    uint64_t generation;
};

sq_keyring_t *
sq_keyring_new (void)
{
    return (sq_keyring_t *) calloc (1, sizeof (sq_keyring_t));
}

void
sq_keyring_destroy (sq_keyring_t **self_p)
{
    sq_keyring_t *self = *self_p;
    if (self) {
        free (self->entries);
        free (self);
        *self_p = NULL;
    }
}

static int
s_entry_cmp (const void *a, const void *b)
{
    return memcmp (((const sq_keyentry_t *) a)->z85, ((const sq_keyentry_t *) b)->z85,
                   SQ_Z85_LEN);
}

int
sq_keyring_load (sq_keyring_t *self, const char *dir, char *err, size_t err_size)
{
    DIR *d = opendir (dir);
    if (!d) {
        snprintf (err, err_size, "cannot read the key directory %s: %s", dir, strerror (errno));
        return -1;
    }
    size_t n = 0, cap = 16;
    sq_keyentry_t *entries = (sq_keyentry_t *) malloc (cap * sizeof *entries);
    struct dirent *e;
    while (entries && (e = readdir (d))) {
        size_t len = strlen (e->d_name);
        if (len < 5 || strcmp (e->d_name + len - 4, ".pub") || e->d_name [0] == '.')
            continue;
        if (n == S_MAX_KEYS) {
            sq_warn ("%s: more than %d keys; the rest are ignored", dir, S_MAX_KEYS);
            break;
        }
        char path [4096], why [512];
        snprintf (path, sizeof path, "%s/%s", dir, e->d_name);
        sq_cert_t cert;
        if (sq_cert_load (&cert, path, why, sizeof why)) {
            sq_warn ("key skipped: %s", why);
            continue;
        }
        if (cert.role == SQ_ROLE_NONE || cert.role == SQ_ROLE_BROKER) {
            sq_warn ("key skipped: %s has no client, governor or admin role", path);
            continue;
        }
        if (n == cap && sq_grow ((void **) &entries, &cap, n + 1, sizeof *entries, 16, SIZE_MAX))
            break;
        sq_keyentry_t *entry = &entries [n];
        memset (entry, 0, sizeof *entry);
        memcpy (entry->key, cert.public_key, SQ_KEY_LEN);
        memcpy (entry->z85, cert.public_z85, sizeof entry->z85);
        entry->role = cert.role;
        snprintf (entry->name, sizeof entry->name, "%.*s",
                  (int) (len - 4 > SQ_MAX_TENANT? SQ_MAX_TENANT: len - 4), e->d_name);
        //  A client key without a tenant is its own tenant.
        snprintf (entry->tenant, sizeof entry->tenant, "%s",
                  cert.tenant [0]? cert.tenant:
                  cert.role == SQ_ROLE_GOVERNOR? "": entry->name);
        n++;
    }
    closedir (d);
    if (!entries) {
        snprintf (err, err_size, "out of memory");
        return -1;
    }
    qsort (entries, n, sizeof *entries, s_entry_cmp);
    //  The same key twice (two files): the first in order wins.
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept && memcmp (entries [kept - 1].z85, entries [i].z85, SQ_Z85_LEN) == 0) {
            sq_warn ("key %s listed twice in %s (%s and %s); the first is used",
                     entries [i].z85, dir, entries [kept - 1].name, entries [i].name);
            continue;
        }
        entries [kept++] = entries [i];
    }
    free (self->entries);
    self->entries = entries;
    self->n = kept;
    self->generation++;
    return (int) kept;
}

const sq_keyentry_t *
sq_keyring_find (sq_keyring_t *self, const char *z85, size_t len)
{
    if (len != SQ_Z85_LEN)
        return NULL;
    size_t lo = 0, hi = self->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = memcmp (self->entries [mid].z85, z85, SQ_Z85_LEN);
        if (c == 0)
            return &self->entries [mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

uint64_t
sq_keyring_generation (sq_keyring_t *self)
{
    return self->generation;
}

size_t
sq_keyring_size (sq_keyring_t *self)
{
    return self->n;
}

const sq_keyentry_t *
sq_keyring_at (sq_keyring_t *self, size_t i)
{
    return i < self->n? &self->entries [i]: NULL;
}
