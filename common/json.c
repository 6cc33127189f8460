/*  json: a msgpack value as JSON text. */
#include "json.h"
#include "grow.h"
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_JSON_MAX_DEPTH 32

//  Conversion is generic: maps become objects (keys that are
//  not strings are written as the JSON text of the key, quoted), arrays,
//  strings (escaped), integers, floats (non-finite ones as null), booleans,
//  nil as null, binary values as strings of lowercase hex digits, extension
//  values as null.

typedef struct {
    char *data;
    size_t len;
    size_t cap;
    bool failed;                //  out of memory, or too_large
    bool too_large;
} s_text_t;

//  Bounds on what a value may become: escaping a key inside a key inside
//  a key doubles its text each time, so a few bytes of nested map keys
//  would otherwise ask for gigabytes (found by the fuzzer).
#define S_JSON_MAX (64u << 20)
#define S_JSON_KEY_MAX 4096

static void
s_put (s_text_t *t, const char *bytes, size_t n)
{
    if (t->failed)
        return;
    if (t->len + n > S_JSON_MAX) {
        t->failed = t->too_large = true;
        return;
    }
    if (t->len + n + 1 > t->cap
    &&  sq_grow ((void **) &t->data, &t->cap, t->len + n + 1, 1, 256, S_JSON_MAX + 1)) {
        t->failed = true;
        return;
    }
    memcpy (t->data + t->len, bytes, n);
    t->len += n;
    t->data [t->len] = 0;
}

static void
s_putf (s_text_t *t, const char *format, ...) __attribute__ ((format (printf, 2, 3)));
static void
s_putf (s_text_t *t, const char *format, ...)
{
    char buf [64];
    va_list args;
    va_start (args, format);
    int n = vsnprintf (buf, sizeof buf, format, args);
    va_end (args);
    if (n > 0)
        s_put (t, buf, (size_t) n < sizeof buf? (size_t) n: sizeof buf - 1);
}

static void
s_put_json_string (s_text_t *t, mpr_str_t s)
{
    s_put (t, "\"", 1);
    for (uint32_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char) s.ptr [i];
        if (c == '"')
            s_put (t, "\\\"", 2);
        else
        if (c == '\\')
            s_put (t, "\\\\", 2);
        else
        if (c == '\n')
            s_put (t, "\\n", 2);
        else
        if (c == '\r')
            s_put (t, "\\r", 2);
        else
        if (c == '\t')
            s_put (t, "\\t", 2);
        else
        if (c < 0x20 || c == 0x7f)
            s_putf (t, "\\u%04x", c);
        else
            s_put (t, (const char *) &c, 1);
    }
    s_put (t, "\"", 1);
}

static int s_json_value (mpr_t *r, s_text_t *t, int depth);

//  A map key: strings as they are, anything else as its JSON text, quoted.
static int
s_json_key (mpr_t *r, s_text_t *t, int depth)
{
    if (mpr_peek (r) == MPR_STR) {
        mpr_str_t s;
        if (mpr_str (r, &s, UINT32_MAX))
            return -1;
        s_put_json_string (t, s);
        return 0;
    }
    s_text_t key = { NULL, 0, 0, false, false };
    int rc = s_json_value (r, &key, depth);
    if (rc == 0 && key.len > S_JSON_KEY_MAX)
        rc = mpr_fail (r, "a map key's JSON text is over 4096 bytes");
    if (rc == 0 && !key.failed) {
        mpr_str_t s = { key.data? key.data: "", (uint32_t) key.len };
        s_put_json_string (t, s);
    }
    if (key.failed) {
        t->failed = true;
        t->too_large |= key.too_large;
    }
    free (key.data);
    return rc;
}

static int
s_json_value (mpr_t *r, s_text_t *t, int depth)
{
    if (depth > S_JSON_MAX_DEPTH)
        return mpr_fail (r, "value nested too deeply");
    mpr_str_t s;
    uint32_t n;
    switch (mpr_peek (r)) {
        case MPR_NIL:
            s_put (t, "null", 4);
            return mpr_nil (r);
        case MPR_BOOL: {
            bool b;
            if (mpr_bool (r, &b))
                return -1;
            s_put (t, b? "true": "false", b? 4: 5);
            return 0;
        }
        case MPR_UINT: {
            uint64_t u;
            if (mpr_uint (r, &u))
                return -1;
            s_putf (t, "%llu", (unsigned long long) u);
            return 0;
        }
        case MPR_INT: {
            int64_t i;
            if (mpr_int (r, &i))
                return -1;
            s_putf (t, "%lld", (long long) i);
            return 0;
        }
        case MPR_FLOAT: {
            double d;
            if (mpr_double (r, &d))
                return -1;
            if (isfinite (d))
                s_putf (t, "%.17g", d);
            else
                s_put (t, "null", 4);
            return 0;
        }
        case MPR_STR:
            if (mpr_str (r, &s, UINT32_MAX))
                return -1;
            s_put_json_string (t, s);
            return 0;
        case MPR_BIN:
            if (mpr_bin (r, &s, UINT32_MAX))
                return -1;
            s_put (t, "\"", 1);
            for (uint32_t i = 0; i < s.len; i++)
                s_putf (t, "%02x", (unsigned char) s.ptr [i]);
            s_put (t, "\"", 1);
            return 0;
        case MPR_ARRAY:
            if (mpr_array (r, &n))
                return -1;
            s_put (t, "[", 1);
            for (uint32_t i = 0; i < n; i++) {
                if (i)
                    s_put (t, ",", 1);
                if (s_json_value (r, t, depth + 1))
                    return -1;
            }
            s_put (t, "]", 1);
            return 0;
        case MPR_MAP:
            if (mpr_map (r, &n))
                return -1;
            s_put (t, "{", 1);
            for (uint32_t i = 0; i < n; i++) {
                if (i)
                    s_put (t, ",", 1);
                if (s_json_key (r, t, depth + 1))
                    return -1;
                s_put (t, ":", 1);
                if (s_json_value (r, t, depth + 1))
                    return -1;
            }
            s_put (t, "}", 1);
            return 0;
        case MPR_EXT:
            s_put (t, "null", 4);
            return mpr_skip (r, NULL, NULL);
        default:
            //  Let the reader say what is wrong (truncated, bad type byte).
            return mpr_skip (r, NULL, NULL) == 0? mpr_fail (r, "invalid value"): -1;
    }
}


int
sq_json_from_msgpack (const void *data, size_t size, bool want_map, char **json,
                      sq_errbuf_t *err)
{
    *json = NULL;
    mpr_t r;
    s_text_t text = { NULL, 0, 0, false, false };
    mpr_init (&r, data, size);
    if (want_map && mpr_peek (&r) != MPR_MAP)
        mpr_fail (&r, "expected a map");
    else
        s_json_value (&r, &text, 0);
    mpr_end (&r);
    if (!mpr_ok (&r)) {
        free (text.data);
        if (err)
            snprintf (err->text, sizeof err->text, "%s", r.error? r.error: "invalid value");
        return -1;
    }
    if (text.too_large) {
        free (text.data);
        if (err)
            snprintf (err->text, sizeof err->text, "the JSON text would be over %u bytes",
                      S_JSON_MAX);
        return -1;
    }
    if (text.failed || !text.data) {
        free (text.data);
        if (err)
            snprintf (err->text, sizeof err->text, "out of memory");
        return -2;
    }
    *json = text.data;
    return 0;
}
