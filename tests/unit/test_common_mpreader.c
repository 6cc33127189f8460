/*  Unit test of common/mpreader: every type, format boundaries, wrong types,
    truncation at every offset, trailing bytes, hostile counts and nesting. */
#include "mpreader.h"
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        s_failures++; \
    } \
} while (0)

typedef struct {
    msgpack_sbuffer buf;
    msgpack_packer pk;
} s_out_t;

static void
s_out_init (s_out_t *o)
{
    msgpack_sbuffer_init (&o->buf);
    msgpack_packer_init (&o->pk, &o->buf, msgpack_sbuffer_write);
}

static void
s_out_free (s_out_t *o)
{
    msgpack_sbuffer_destroy (&o->buf);
}

//  Unsigned integers at every width boundary, as uint and as int.
static void
s_test_uints (void)
{
    const uint64_t values [] = {
        0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffffull,
        0x100000000ull, UINT64_MAX
    };
    const size_t sizes [] = { 1, 1, 1, 2, 2, 3, 3, 5, 5, 9, 9 };
    for (size_t i = 0; i < sizeof values / sizeof values [0]; i++) {
        s_out_t o;
        s_out_init (&o);
        msgpack_pack_uint64 (&o.pk, values [i]);
        CHECK (o.buf.size == sizes [i]);
        mpr_t r;
        uint64_t u = 12345;
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_peek (&r) == MPR_UINT);
        CHECK (mpr_uint (&r, &u) == 0 && u == values [i]);
        CHECK (mpr_end (&r) == 0);

        uint32_t u32;
        mpr_init (&r, o.buf.data, o.buf.size);
        if (values [i] <= UINT32_MAX)
            CHECK (mpr_u32 (&r, &u32) == 0 && u32 == values [i]);
        else
            CHECK (mpr_u32 (&r, &u32) == -1 && strstr (r.error, "32-bit"));

        int64_t s;
        mpr_init (&r, o.buf.data, o.buf.size);
        if (values [i] <= INT64_MAX)
            CHECK (mpr_int (&r, &s) == 0 && (uint64_t) s == values [i]);
        else
            CHECK (mpr_int (&r, &s) == -1);

        double d;
        mpr_init (&r, o.buf.data, o.buf.size);
        if (values [i] <= INT64_MAX)
            CHECK (mpr_double (&r, &d) == 0 && d == (double) values [i]);
        s_out_free (&o);
    }
    //  Explicit wide encodings of small values are accepted too
    const uint8_t u16_small [] = { 0xcd, 0x00, 0x05 };
    const uint8_t u64_small [] = { 0xcf, 0, 0, 0, 0, 0, 0, 0, 0x05 };
    mpr_t r;
    uint64_t u;
    mpr_init (&r, u16_small, sizeof u16_small);
    CHECK (mpr_uint (&r, &u) == 0 && u == 5 && mpr_end (&r) == 0);
    mpr_init (&r, u64_small, sizeof u64_small);
    CHECK (mpr_uint (&r, &u) == 0 && u == 5 && mpr_end (&r) == 0);
}

static void
s_test_ints (void)
{
    const int64_t values [] = {
        -1, -32, -33, -128, -129, -32768, -32769, INT32_MIN, (int64_t) INT32_MIN - 1,
        INT64_MIN, 5, INT64_MAX
    };
    for (size_t i = 0; i < sizeof values / sizeof values [0]; i++) {
        s_out_t o;
        s_out_init (&o);
        msgpack_pack_int64 (&o.pk, values [i]);
        mpr_t r;
        int64_t v = 0;
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_int (&r, &v) == 0 && v == values [i]);
        CHECK (mpr_end (&r) == 0);
        uint64_t u;
        mpr_init (&r, o.buf.data, o.buf.size);
        if (values [i] < 0)
            CHECK (mpr_uint (&r, &u) == -1 && strstr (r.error, "non-negative"));
        else
            CHECK (mpr_uint (&r, &u) == 0 && (int64_t) u == values [i]);
        s_out_free (&o);
    }
    //  Signed encodings of non-negative values read as uints
    const uint8_t i8_pos [] = { 0xd0, 0x05 };
    const uint8_t i64_pos [] = { 0xd3, 0, 0, 0, 0, 0, 0, 0x01, 0x00 };
    mpr_t r;
    uint64_t u;
    mpr_init (&r, i8_pos, sizeof i8_pos);
    CHECK (mpr_peek (&r) == MPR_INT);
    CHECK (mpr_uint (&r, &u) == 0 && u == 5);
    mpr_init (&r, i64_pos, sizeof i64_pos);
    CHECK (mpr_uint (&r, &u) == 0 && u == 256);
    //  Negative fixint boundary
    const uint8_t neg32 [] = { 0xe0 };
    int64_t v;
    mpr_init (&r, neg32, 1);
    CHECK (mpr_int (&r, &v) == 0 && v == -32);
}

static void
s_test_floats_bools_nil (void)
{
    s_out_t o;
    s_out_init (&o);
    msgpack_pack_float (&o.pk, 1.5f);
    msgpack_pack_double (&o.pk, -2.25);
    msgpack_pack_true (&o.pk);
    msgpack_pack_false (&o.pk);
    msgpack_pack_nil (&o.pk);
    msgpack_pack_nil (&o.pk);
    mpr_t r;
    double d;
    bool b;
    mpr_init (&r, o.buf.data, o.buf.size);
    CHECK (mpr_peek (&r) == MPR_FLOAT);
    CHECK (mpr_double (&r, &d) == 0 && d == 1.5);
    CHECK (mpr_double (&r, &d) == 0 && d == -2.25);
    CHECK (mpr_peek (&r) == MPR_BOOL);
    CHECK (mpr_bool (&r, &b) == 0 && b);
    CHECK (mpr_bool (&r, &b) == 0 && !b);
    CHECK (mpr_peek (&r) == MPR_NIL);
    CHECK (mpr_try_nil (&r));
    CHECK (mpr_nil (&r) == 0);
    CHECK (!mpr_try_nil (&r));          //  at the end: no nil, no error
    CHECK (mpr_ok (&r));
    CHECK (mpr_peek (&r) == MPR_INVALID);
    CHECK (mpr_end (&r) == 0);
    s_out_free (&o);
}

//  Strings and bins at every length boundary
static void
s_test_strings (void)
{
    const size_t lengths [] = { 0, 1, 31, 32, 255, 256, 65535, 65536, 100000 };
    char *text = (char *) malloc (100000);
    for (size_t i = 0; i < 100000; i++)
        text [i] = (char) ('a' + i % 26);
    for (size_t i = 0; i < sizeof lengths / sizeof lengths [0]; i++) {
        size_t len = lengths [i];
        s_out_t o;
        s_out_init (&o);
        msgpack_pack_str (&o.pk, len);
        msgpack_pack_str_body (&o.pk, text, len);
        msgpack_pack_bin (&o.pk, len);
        msgpack_pack_bin_body (&o.pk, text, len);
        mpr_t r;
        mpr_str_t s;
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_peek (&r) == MPR_STR);
        CHECK (mpr_str (&r, &s, UINT32_MAX) == 0 && s.len == len
               && (len == 0 || memcmp (s.ptr, text, len) == 0));
        CHECK (mpr_peek (&r) == MPR_BIN);
        CHECK (mpr_bin (&r, &s, UINT32_MAX) == 0 && s.len == len
               && (len == 0 || memcmp (s.ptr, text, len) == 0));
        CHECK (mpr_end (&r) == 0);
        //  Over the caller's limit
        if (len > 0) {
            mpr_init (&r, o.buf.data, o.buf.size);
            CHECK (mpr_str (&r, &s, (uint32_t) len - 1) == -1 && strstr (r.error, "too long"));
        }
        //  A string is not a bin and the other way round
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_bin (&r, &s, UINT32_MAX) == -1);
        s_out_free (&o);
    }
    free (text);
    //  str8 encoding of a short string is valid
    const uint8_t str8 [] = { 0xd9, 0x02, 'h', 'i' };
    mpr_t r;
    mpr_str_t s;
    mpr_init (&r, str8, sizeof str8);
    CHECK (mpr_str (&r, &s, 10) == 0 && mpr_str_eq (s, "hi"));
    CHECK (!mpr_str_eq (s, "h") && !mpr_str_eq (s, "hii"));
    char *copy = mpr_strdup (s);
    CHECK (copy && strcmp (copy, "hi") == 0);
    free (copy);
    //  A str32 header declaring 4 GB in a tiny buffer
    const uint8_t huge [] = { 0xdb, 0xff, 0xff, 0xff, 0xff, 'x' };
    mpr_init (&r, huge, sizeof huge);
    CHECK (mpr_str (&r, &s, UINT32_MAX) == -1 && strstr (r.error, "truncated"));
}

static void
s_test_containers (void)
{
    const uint32_t counts [] = { 0, 1, 15, 16, 65535, 65536 };
    for (size_t i = 0; i < sizeof counts / sizeof counts [0]; i++) {
        uint32_t n = counts [i];
        s_out_t o;
        s_out_init (&o);
        msgpack_pack_array (&o.pk, n);
        for (uint32_t j = 0; j < n; j++)
            msgpack_pack_uint32 (&o.pk, j & 0x7f);
        msgpack_pack_map (&o.pk, n);
        for (uint32_t j = 0; j < n; j++) {
            msgpack_pack_uint32 (&o.pk, j & 0x7f);
            msgpack_pack_nil (&o.pk);
        }
        mpr_t r;
        uint32_t count = 999;
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_peek (&r) == MPR_ARRAY);
        CHECK (mpr_array (&r, &count) == 0 && count == n);
        for (uint32_t j = 0; j < n; j++) {
            uint64_t u;
            CHECK (mpr_uint (&r, &u) == 0 && u == (j & 0x7f));
        }
        CHECK (mpr_peek (&r) == MPR_MAP);
        CHECK (mpr_map (&r, &count) == 0 && count == n);
        for (uint32_t j = 0; j < n; j++) {
            uint64_t u;
            CHECK (mpr_uint (&r, &u) == 0 && mpr_nil (&r) == 0);
        }
        CHECK (mpr_end (&r) == 0);
        //  mpr_array_exact
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_array_exact (&r, n) == 0);
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_array_exact (&r, n + 1) == -1 && strstr (r.error, "number of fields"));
        //  A map is not an array
        mpr_init (&r, o.buf.data, o.buf.size);
        mpr_skip (&r, NULL, NULL);
        CHECK (mpr_array (&r, &count) == -1 && strstr (r.error, "expected an array"));
        //  skip returns the raw bytes of each value
        const uint8_t *raw;
        size_t raw_size;
        mpr_init (&r, o.buf.data, o.buf.size);
        CHECK (mpr_skip (&r, &raw, &raw_size) == 0 && raw == (const uint8_t *) o.buf.data);
        CHECK (mpr_skip (&r, &raw, &raw_size) == 0 && raw + raw_size == (const uint8_t *) o.buf.data + o.buf.size);
        CHECK (mpr_end (&r) == 0);
        s_out_free (&o);
    }
    //  Array of 0xffffffff declared in a 6-byte buffer: refused at once
    const uint8_t bomb [] = { 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01 };
    mpr_t r;
    uint32_t count = 7;
    mpr_init (&r, bomb, sizeof bomb);
    CHECK (mpr_array (&r, &count) == -1 && strstr (r.error, "exceeds"));
    CHECK (count == 7);
    mpr_init (&r, bomb, sizeof bomb);
    CHECK (mpr_skip (&r, NULL, NULL) == -1);
    const uint8_t map_bomb [] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0x01 };
    mpr_init (&r, map_bomb, sizeof map_bomb);
    CHECK (mpr_map (&r, &count) == -1 && strstr (r.error, "exceeds"));
    //  A map of n entries needs 2n bytes: one entry short
    const uint8_t map_short [] = { 0x82, 0x01, 0x02, 0x03 };
    mpr_init (&r, map_short, sizeof map_short);
    CHECK (mpr_map (&r, &count) == -1);
}

static void
s_test_ext (void)
{
    //  fixext 1/2/4/8/16 and ext 8/16/32 are skipped whole
    const uint8_t ext [] = {
        0xd4, 0x01, 0xaa,
        0xd5, 0x01, 0xaa, 0xbb,
        0xd6, 0x01, 1, 2, 3, 4,
        0xd7, 0x01, 1, 2, 3, 4, 5, 6, 7, 8,
        0xd8, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
        0xc7, 0x02, 0x01, 0xaa, 0xbb,
        0xc8, 0x00, 0x01, 0x01, 0xaa,
        0xc9, 0x00, 0x00, 0x00, 0x00, 0x01
    };
    mpr_t r;
    mpr_init (&r, ext, sizeof ext);
    for (int i = 0; i < 8; i++) {
        CHECK (mpr_peek (&r) == MPR_EXT);
        CHECK (mpr_skip (&r, NULL, NULL) == 0);
    }
    CHECK (mpr_end (&r) == 0);
    //  Every truncation of the ext sequence fails cleanly
    for (size_t cut = 0; cut < sizeof ext; cut++) {
        mpr_init (&r, ext, cut);
        int rc = 0;
        for (int i = 0; i < 8 && rc == 0; i++)
            rc = mpr_skip (&r, NULL, NULL);
        CHECK (rc == -1 || mpr_end (&r) == 0);
    }
    //  0xc1 is never valid
    const uint8_t never [] = { 0xc1 };
    mpr_init (&r, never, 1);
    CHECK (mpr_peek (&r) == MPR_INVALID);
    CHECK (mpr_skip (&r, NULL, NULL) == -1 && strstr (r.error, "invalid"));
}

//  Every reader refuses every other type
static void
s_test_wrong_types (void)
{
    const uint8_t samples [][2] = {
        { 0xc0 },               //  nil
        { 0xc3 },               //  true
        { 0x05 },               //  uint
        { 0xff },               //  -1
        { 0xa1, 'x' },          //  str
        { 0xc4, 0x00 },         //  bin (empty)
        { 0x91, 0x00 },         //  array [0]
        { 0x80 },               //  map {}
    };
    const size_t sizes [] = { 1, 1, 1, 1, 2, 2, 2, 1 };
    const mpr_type_t types [] = {
        MPR_NIL, MPR_BOOL, MPR_UINT, MPR_INT, MPR_STR, MPR_BIN, MPR_ARRAY, MPR_MAP
    };
    for (size_t i = 0; i < 8; i++) {
        mpr_t r;
        const uint8_t *b = samples [i];
        size_t n = sizes [i];
        mpr_type_t t = types [i];
        mpr_init (&r, b, n);
        CHECK (mpr_peek (&r) == t);
        uint64_t u; int64_t s; double d; bool bo; mpr_str_t str; uint32_t c;
        mpr_init (&r, b, n);
        CHECK ((mpr_nil (&r) == 0) == (t == MPR_NIL));
        mpr_init (&r, b, n);
        CHECK ((mpr_bool (&r, &bo) == 0) == (t == MPR_BOOL));
        mpr_init (&r, b, n);
        CHECK ((mpr_uint (&r, &u) == 0) == (t == MPR_UINT));
        mpr_init (&r, b, n);
        CHECK ((mpr_int (&r, &s) == 0) == (t == MPR_UINT || t == MPR_INT));
        mpr_init (&r, b, n);
        CHECK ((mpr_double (&r, &d) == 0) == (t == MPR_UINT || t == MPR_INT));
        mpr_init (&r, b, n);
        CHECK ((mpr_str (&r, &str, 100) == 0) == (t == MPR_STR));
        mpr_init (&r, b, n);
        CHECK ((mpr_bin (&r, &str, 100) == 0) == (t == MPR_BIN));
        mpr_init (&r, b, n);
        CHECK ((mpr_array (&r, &c) == 0) == (t == MPR_ARRAY));
        mpr_init (&r, b, n);
        CHECK ((mpr_map (&r, &c) == 0) == (t == MPR_MAP));
        mpr_init (&r, b, n);
        CHECK (mpr_skip (&r, NULL, NULL) == 0 && mpr_end (&r) == 0);
    }
}

//  A failed reader stays failed and keeps its first error and field
static void
s_test_sticky_errors (void)
{
    const uint8_t data [] = { 0xa1, 'x', 0x01 };
    mpr_t r;
    uint64_t u;
    mpr_init (&r, data, sizeof data);
    mpr_field (&r, "first");
    CHECK (mpr_uint (&r, &u) == -1);
    const char *error = r.error;
    mpr_field (&r, "second");
    CHECK (strcmp (r.field, "first") == 0);
    mpr_str_t s;
    CHECK (mpr_str (&r, &s, 10) == -1);
    CHECK (r.error == error);
    CHECK (!mpr_ok (&r));
    CHECK (mpr_end (&r) == -1);
    CHECK (mpr_peek (&r) == MPR_INVALID);
    CHECK (mpr_fail (&r, "other") == -1 && r.error == error);
}

//  A message using every type, then every truncation of it and trailing bytes
static void
s_test_truncation (void)
{
    s_out_t o;
    s_out_init (&o);
    msgpack_pack_array (&o.pk, 9);
    msgpack_pack_uint32 (&o.pk, 70000);
    msgpack_pack_int64 (&o.pk, -70000);
    msgpack_pack_double (&o.pk, 0.125);
    msgpack_pack_str (&o.pk, 40);
    msgpack_pack_str_body (&o.pk, "0123456789012345678901234567890123456789", 40);
    msgpack_pack_bin (&o.pk, 3);
    msgpack_pack_bin_body (&o.pk, "abc", 3);
    msgpack_pack_nil (&o.pk);
    msgpack_pack_true (&o.pk);
    msgpack_pack_map (&o.pk, 1);
    msgpack_pack_str (&o.pk, 1);
    msgpack_pack_str_body (&o.pk, "k", 1);
    msgpack_pack_array (&o.pk, 2);
    msgpack_pack_uint64 (&o.pk, UINT64_MAX);
    msgpack_pack_int8 (&o.pk, -5);
    msgpack_pack_array (&o.pk, 0);

    for (size_t cut = 0; cut <= o.buf.size; cut++) {
        mpr_t r;
        uint64_t u; int64_t s; double d; mpr_str_t str; bool b; uint32_t n;
        mpr_init (&r, o.buf.data, cut);
        mpr_array_exact (&r, 9);
        mpr_uint (&r, &u);
        mpr_int (&r, &s);
        mpr_double (&r, &d);
        mpr_str (&r, &str, 100);
        mpr_bin (&r, &str, 100);
        mpr_nil (&r);
        mpr_bool (&r, &b);
        mpr_map (&r, &n);
        mpr_str (&r, &str, 100);
        mpr_array_exact (&r, 2);
        mpr_uint (&r, &u);
        mpr_int (&r, &s);
        mpr_array_exact (&r, 0);
        int rc = mpr_end (&r);
        if (cut == o.buf.size) {
            CHECK (rc == 0);
            CHECK (u == 0 || s == -5);
        }
        else
            CHECK (rc == -1 && r.error
                   && (strstr (r.error, "truncated") || strstr (r.error, "exceeds")));
        //  mpr_skip over the truncated whole value fails too
        mpr_init (&r, o.buf.data, cut);
        rc = mpr_skip (&r, NULL, NULL);
        CHECK ((rc == 0) == (cut == o.buf.size));
    }
    //  Trailing bytes
    char *longer = (char *) malloc (o.buf.size + 1);
    memcpy (longer, o.buf.data, o.buf.size);
    longer [o.buf.size] = 0x00;
    mpr_t r;
    mpr_init (&r, longer, o.buf.size + 1);
    CHECK (mpr_skip (&r, NULL, NULL) == 0);
    CHECK (mpr_end (&r) == -1 && strstr (r.error, "trailing"));
    free (longer);
    s_out_free (&o);
}

//  Nesting bombs: deep arrays and maps are refused by mpr_skip without
//  recursing without bound.
static void
s_test_depth (void)
{
    size_t depth = 100000;
    uint8_t *deep = (uint8_t *) malloc (depth + 1);
    memset (deep, 0x91, depth);         //  [[[[...
    deep [depth] = 0x00;
    mpr_t r;
    mpr_init (&r, deep, depth + 1);
    CHECK (mpr_skip (&r, NULL, NULL) == -1 && strstr (r.error, "deeply"));
    memset (deep, 0x81, depth);         //  {{{{... as keys
    mpr_init (&r, deep, depth + 1);
    CHECK (mpr_skip (&r, NULL, NULL) == -1);
    free (deep);
    //  A modest depth is fine
    uint8_t shallow [11];
    memset (shallow, 0x91, 10);
    shallow [10] = 0xc0;
    mpr_init (&r, shallow, sizeof shallow);
    CHECK (mpr_skip (&r, NULL, NULL) == 0 && mpr_end (&r) == 0);
    //  Wide but shallow: one array with many elements, each a small array
    s_out_t o;
    s_out_init (&o);
    msgpack_pack_array (&o.pk, 100000);
    for (int i = 0; i < 100000; i++) {
        msgpack_pack_array (&o.pk, 1);
        msgpack_pack_nil (&o.pk);
    }
    mpr_init (&r, o.buf.data, o.buf.size);
    CHECK (mpr_skip (&r, NULL, NULL) == 0 && mpr_end (&r) == 0);
    s_out_free (&o);
}

static void
s_test_empty (void)
{
    mpr_t r;
    uint64_t u;
    mpr_init (&r, NULL, 0);
    CHECK (mpr_peek (&r) == MPR_INVALID);
    CHECK (mpr_end (&r) == 0);
    CHECK (mpr_uint (&r, &u) == -1 && strstr (r.error, "truncated"));
    mpr_init (&r, NULL, 0);
    CHECK (mpr_skip (&r, NULL, NULL) == -1);
}

int
main (void)
{
    s_test_uints ();
    s_test_ints ();
    s_test_floats_bools_nil ();
    s_test_strings ();
    s_test_containers ();
    s_test_ext ();
    s_test_wrong_types ();
    s_test_sticky_errors ();
    s_test_truncation ();
    s_test_depth ();
    s_test_empty ();
    if (s_failures) {
        fprintf (stderr, "test_common_mpreader: %d check(s) failed\n", s_failures);
        return 1;
    }
    printf ("test_common_mpreader: OK\n");
    return 0;
}
