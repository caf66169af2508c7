/* safetensors: round trips, files built byte by byte from the spec, dtype
 * conversions, parameter stores, every kind of corruption, atomic saves. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include <tfm/tfm.h>

/* --- a temporary folder per test -------------------------------------------- */

static char dir[64];

static void make_dir(void)
{
    strcpy(dir, "/tmp/tfm_io_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Removes the folder with its files and (empty or flat) subfolders. */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *ent;
    char child[512];
    while ((ent = readdir(d))) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
            continue;
        snprintf(child, sizeof child, "%s/%s", path, ent->d_name);
        if (unlink(child) != 0)
            remove_tree(child);
    }
    closedir(d);
    rmdir(path);
}

static void remove_dir(void) { remove_tree(dir); }

/* dir/name, in one of a few rotating buffers. */
static const char *in_dir(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* The folder's entries, sorted, joined by spaces. */
static const char *listing(const char *path)
{
    static char out[1024];
    char names[16][256];
    int n = 0;
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *ent;
    while ((ent = readdir(d)) && n < 16)
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, ".."))
            snprintf(names[n++], sizeof names[0], "%s", ent->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", names[i]);
    return out;
}

/* --- raw files ------------------------------------------------------------- */

static void write_raw(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *read_raw(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)size + 1);
    ck_assert_uint_eq(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return bytes;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A file per the spec: the header's length (u64 LE), the header, the data. */
static void write_st(const char *path, const char *header, size_t header_len,
                     const void *data, size_t data_len)
{
    unsigned char *bytes = malloc(8 + header_len + data_len + 1);
    put_le(bytes, header_len, 8);
    memcpy(bytes + 8, header, header_len);
    if (data_len)
        memcpy(bytes + 8 + header_len, data, data_len);
    write_raw(path, bytes, 8 + header_len + data_len);
    free(bytes);
}

/* Tensors appended one by one, offsets counted here. */
typedef struct builder {
    char header[8192];
    unsigned char data[8192];
    size_t data_len;
} builder;

static void b_init(builder *b) { strcpy(b->header, "{"); b->data_len = 0; }

static void b_add(builder *b, const char *name, const char *dtype, const char *shape,
                  const void *bytes, size_t n)
{
    size_t len = strlen(b->header);
    snprintf(b->header + len, sizeof b->header - len,
             "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
             len > 1 ? "," : "", name, dtype, shape, b->data_len, b->data_len + n);
    memcpy(b->data + b->data_len, bytes, n);
    b->data_len += n;
}

static void b_write(builder *b, const char *path)
{
    strcat(b->header, "}");
    write_st(path, b->header, strlen(b->header), b->data, b->data_len);
}

/* --- assertions ---------------------------------------------------------------- */

static void expect_error(tfm_status want, const char *substring)
{
    ck_assert_msg(tfm_last_status() == want, "status %s, wanted %s (%s)",
                  tfm_status_name(tfm_last_status()), tfm_status_name(want),
                  tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), substring), "message \"%s\" lacks \"%s\"",
                  tfm_last_error(), substring);
}

static void expect_open_error(const char *path, tfm_status want, const char *substring)
{
    tfm_clear_error();
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_ptr_null(f);
    expect_error(want, substring);
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* --- round trips ------------------------------------------------------------------ */

START_TEST(round_trip_bit_identical)
{
    const float special[6] = {-0.0f, INFINITY, bits_float(0x7fc01234u) /* NaN payload */,
                              bits_float(1u) /* smallest subnormal */, 3.4028235e38f, -1.5f};
    const int32_t ints[4] = {INT32_MIN, -1, 0, INT32_MAX};
    tfm_rng *rng = tfm_rng_create(7);
    float big[10 * 20 * 50]; /* over the writer's 16 KB chunk */
    for (size_t i = 0; i < sizeof big / 4; i++)
        big[i] = bits_float((uint32_t)tfm_rng_next_u64(rng));
    tfm_rng_free(rng);
    tfm_tensor *t[3] = {
        tfm_tensor_from_f32(4, (const int64_t[]){1, 2, 3, 1}, special),
        tfm_tensor_from_i32(2, (const int64_t[]){2, 2}, ints),
        tfm_tensor_from_f32(3, (const int64_t[]){10, 20, 50}, big),
    };
    const char *names[3] = {"z.special", "ids", "a\"quoted\\name\n\xc3\xa9"};
    const char *path = in_dir("round.safetensors");
    ck_assert_int_eq(tfm_safetensors_write(path, 3, names, (const tfm_tensor *const *)t),
                     TFM_OK);

    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(tfm_safetensors_count(f), 3);
    /* names come back sorted */
    ck_assert_str_eq(tfm_safetensors_name(f, 0), names[2]);
    ck_assert_str_eq(tfm_safetensors_name(f, 1), "ids");
    ck_assert_str_eq(tfm_safetensors_name(f, 2), "z.special");
    for (int k = 0; k < 3; k++) {
        tfm_tensor *back = tfm_safetensors_get(f, names[k]);
        ck_assert_ptr_nonnull(back);
        ck_assert_int_eq(tfm_tensor_dtype(back), tfm_tensor_dtype(t[k]));
        ck_assert_int_eq(tfm_tensor_ndim(back), tfm_tensor_ndim(t[k]));
        int64_t s1[4], s2[4];
        tfm_tensor_shape(back, s1);
        tfm_tensor_shape(t[k], s2);
        ck_assert_mem_eq(s1, s2, (size_t)tfm_tensor_ndim(t[k]) * sizeof s1[0]);
        int64_t n = tfm_tensor_numel(t[k]);
        const void *a = tfm_tensor_dtype(t[k]) == TFM_F32 ? (void *)tfm_tensor_data_f32(t[k])
                                                          : (void *)tfm_tensor_data_i32(t[k]);
        const void *b = tfm_tensor_dtype(back) == TFM_F32 ? (void *)tfm_tensor_data_f32(back)
                                                          : (void *)tfm_tensor_data_i32(back);
        ck_assert_int_eq(memcmp(a, b, (size_t)n * 4), 0);
        tfm_tensor_free(back);
    }
    tfm_safetensors_close(f);
    for (int k = 0; k < 3; k++)
        tfm_tensor_free(t[k]);
    ck_assert_str_eq(listing(dir), "round.safetensors");
}
END_TEST

/* The exact bytes: sorted compact header, space padding to 8, data in name
 * order, little-endian. */
START_TEST(written_bytes_follow_the_spec)
{
    tfm_tensor *b = tfm_tensor_from_f32(1, (const int64_t[]){2}, (const float[]){1.0f, -2.0f});
    tfm_tensor *a = tfm_tensor_from_i32(2, (const int64_t[]){1, 1}, (const int32_t[]){258});
    const char *names[2] = {"b", "a"};
    const tfm_tensor *tensors[2] = {b, a};
    const char *path = in_dir("spec.safetensors");
    ck_assert_int_eq(tfm_safetensors_write(path, 2, names, tensors), TFM_OK);
    static const char header[] =
        "{\"a\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    size_t header_len = sizeof header - 1;         /* 110 */
    size_t padded = (header_len + 7) / 8 * 8;      /* 112 */
    static const unsigned char data[12] = {0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3f,
                                           0x00, 0x00, 0x00, 0xc0};
    size_t n;
    unsigned char *bytes = read_raw(path, &n);
    ck_assert_uint_eq(n, 8 + padded + 12);
    unsigned char prefix[8];
    put_le(prefix, padded, 8);
    ck_assert_mem_eq(bytes, prefix, 8);
    ck_assert_mem_eq(bytes + 8, header, header_len);
    for (size_t i = header_len; i < padded; i++)
        ck_assert_int_eq(bytes[8 + i], ' ');
    ck_assert_mem_eq(bytes + 8 + padded, data, 12);
    free(bytes);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

START_TEST(empty_file_round_trip)
{
    const char *path = in_dir("empty.safetensors");
    ck_assert_int_eq(tfm_safetensors_write(path, 0, NULL, NULL), TFM_OK);
    size_t n;
    unsigned char *bytes = read_raw(path, &n);
    ck_assert_uint_eq(n, 16);
    ck_assert_mem_eq(bytes, "\x08\0\0\0\0\0\0\0{}      ", 16);
    free(bytes);
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(tfm_safetensors_count(f), 0);
    tfm_safetensors_close(f);
}
END_TEST

/* --- files written by hand from the spec -------------------------------------------- */

/* What Hugging Face's writer makes: __metadata__ first, escapes, a 0-d
 * scalar, space padding to 8 bytes. 238 bytes of JSON + 2 spaces = 0xf0. */
static const char reference_header[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\\u00e9 \\\"q\\\"\"},"
    "\"w\\u00e9ight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"ids\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[16,28]},"
    "\"scale\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[28,32]}}  ";
static const unsigned char reference_file_head[8] = {0xf0, 0, 0, 0, 0, 0, 0, 0};
static const unsigned char reference_data[32] = {
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0, /* 1.0, -2.5 */
    0x00, 0x00, 0x00, 0x3f, 0x01, 0x00, 0x00, 0x00, /* 0.5, 2^-149 */
    0xff, 0xff, 0xff, 0xff, 0x02, 0x01, 0x00, 0x00, /* -1, 258 */
    0xff, 0xff, 0xff, 0x7f, 0x00, 0x00, 0x80, 0x3e, /* INT32_MAX; 0.25 */
};

static size_t reference_file(unsigned char *out)
{
    ck_assert_uint_eq(sizeof reference_header - 1, 0xf0);
    memcpy(out, reference_file_head, 8);
    memcpy(out + 8, reference_header, 0xf0);
    memcpy(out + 8 + 0xf0, reference_data, 32);
    return 8 + 0xf0 + 32;
}

START_TEST(reads_a_reference_file)
{
    unsigned char bytes[512];
    size_t n = reference_file(bytes);
    const char *path = in_dir("ref.safetensors");
    write_raw(path, bytes, n);
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_msg(f != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_safetensors_count(f), 3);
    ck_assert_str_eq(tfm_safetensors_name(f, 0), "ids");
    ck_assert_str_eq(tfm_safetensors_name(f, 1), "scale");
    ck_assert_str_eq(tfm_safetensors_name(f, 2), "w\xc3\xa9ight");

    tfm_tensor *w = tfm_safetensors_get(f, "w\xc3\xa9ight");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(tfm_tensor_ndim(w), 2);
    ck_assert_int_eq(tfm_tensor_dim(w, 0), 2);
    ck_assert_int_eq(tfm_tensor_dim(w, 1), 2);
    const float *wv = tfm_tensor_data_f32(w);
    ck_assert_float_eq(wv[0], 1.0f);
    ck_assert_float_eq(wv[1], -2.5f);
    ck_assert_float_eq(wv[2], 0.5f);
    ck_assert_uint_eq(float_bits(wv[3]), 1u);

    tfm_tensor *ids = tfm_safetensors_get(f, "ids");
    ck_assert_int_eq(tfm_tensor_dtype(ids), TFM_I32);
    const int32_t *iv = tfm_tensor_data_i32(ids);
    ck_assert_int_eq(iv[0], -1);
    ck_assert_int_eq(iv[1], 258);
    ck_assert_int_eq(iv[2], INT32_MAX);

    tfm_tensor *scale = tfm_safetensors_get(f, "scale"); /* 0-d: read as [1] */
    ck_assert_int_eq(tfm_tensor_ndim(scale), 1);
    ck_assert_int_eq(tfm_tensor_dim(scale, 0), 1);
    float value;
    ck_assert_int_eq(tfm_tensor_item(scale, &value), TFM_OK);
    ck_assert_float_eq(value, 0.25f);

    tfm_tensor_free(w);
    tfm_tensor_free(ids);
    tfm_tensor_free(scale);
    tfm_safetensors_close(f);
}
END_TEST

/* Whitespace anywhere JSON allows it, any header length (data unaligned),
 * unaligned offsets, a surrogate pair, zero-sized tensors, escapes. */
START_TEST(reads_unusual_but_valid_files)
{
    static const char header[] =
        " \t\r\n{ \"u8\" : { \"shape\" : [ 3 ] , \"data_offsets\":[0,3], \"dtype\":\"U8\" } ,"
        "\"f\\ud83d\\ude00\\/\\t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[3,7]},"
        "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[7,7]},"
        "\"__metadata__\":{}}\n";
    static const unsigned char data[7] = {7, 0, 255, 0x00, 0x00, 0xc0, 0x3f};
    const char *path = in_dir("odd.safetensors");
    write_st(path, header, sizeof header - 1, data, sizeof data);
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_msg(f != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_safetensors_count(f), 3);
    tfm_tensor *u8 = tfm_safetensors_get(f, "u8");
    ck_assert_int_eq(tfm_tensor_data_i32(u8)[0], 7);
    ck_assert_int_eq(tfm_tensor_data_i32(u8)[2], 255);
    tfm_tensor *emoji = tfm_safetensors_get(f, "f\xf0\x9f\x98\x80/\t");
    ck_assert_msg(emoji != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_ndim(emoji), 4);
    ck_assert_float_eq(tfm_tensor_data_f32(emoji)[0], 1.5f);
    /* valid in the file, but libtfm tensors have no empty axes */
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_get(f, "empty"));
    expect_error(TFM_ERR_SHAPE, "[0,3]");
    tfm_tensor_free(u8);
    tfm_tensor_free(emoji);
    tfm_safetensors_close(f);
}
END_TEST

/* --- dtype conversions ------------------------------------------------------------ */

/* Independent decoding of IEEE half precision, in double. */
static double half_reference(uint16_t h)
{
    int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v = exponent == 0    ? ldexp(mantissa, -24)
               : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                : ldexp(1024 + mantissa, exponent - 25);
    return sign ? -v : v;
}

START_TEST(converts_other_dtypes)
{
    builder b;
    b_init(&b);
    const double f64[5] = {0.1, -1e300, 1e-50, 123456789.123, -0.0};
    unsigned char raw[64];
    for (int i = 0; i < 5; i++) {
        uint64_t u;
        memcpy(&u, &f64[i], 8);
        put_le(raw + 8 * i, u, 8);
    }
    b_add(&b, "f64", "F64", "5", raw, 40);
    const uint16_t f16[10] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x8000,
                              0x7c00, 0xfc00, 0x3555, 0x0400};
    for (int i = 0; i < 10; i++)
        put_le(raw + 2 * i, f16[i], 2);
    b_add(&b, "f16", "F16", "2,5", raw, 20);
    const uint16_t bf16[6] = {0x3f80, 0xc049, 0x0001, 0x7f80, 0xff80, 0x8000};
    for (int i = 0; i < 6; i++)
        put_le(raw + 2 * i, bf16[i], 2);
    b_add(&b, "bf16", "BF16", "6", raw, 12);
    const int64_t i64[4] = {-5, INT32_MAX, INT32_MIN, 0};
    for (int i = 0; i < 4; i++)
        put_le(raw + 8 * i, (uint64_t)i64[i], 8);
    b_add(&b, "i64", "I64", "4", raw, 32);
    put_le(raw, (uint64_t)(int64_t)-32768, 2);
    put_le(raw + 2, 32767, 2);
    b_add(&b, "i16", "I16", "2", raw, 4);
    raw[0] = 0x80;
    raw[1] = 0x7f;
    b_add(&b, "i8", "I8", "2", raw, 2);
    raw[0] = 0xff;
    raw[1] = 0x00;
    b_add(&b, "u8", "U8", "2", raw, 2);
    put_le(raw, 65535, 2);
    b_add(&b, "u16", "U16", "1", raw, 2);
    put_le(raw, 7, 4);
    b_add(&b, "u32", "U32", "1", raw, 4);
    put_le(raw, 9, 8);
    b_add(&b, "u64", "U64", "1", raw, 8);
    raw[0] = 0;
    raw[1] = 1;
    raw[2] = 2;
    b_add(&b, "bool", "BOOL", "3", raw, 3);
    const char *path = in_dir("dtypes.safetensors");
    b_write(&b, path);

    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_msg(f != NULL, "%s", tfm_last_error());
    tfm_tensor *t = tfm_safetensors_get(f, "f64");
    ck_assert_int_eq(tfm_tensor_dtype(t), TFM_F32);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(float_bits(tfm_tensor_data_f32(t)[i]), float_bits((float)f64[i]));
    ck_assert(isinf(tfm_tensor_data_f32(t)[1]));
    tfm_tensor_free(t);

    t = tfm_safetensors_get(f, "f16");
    ck_assert_int_eq(tfm_tensor_dim(t, 0), 2);
    ck_assert_int_eq(tfm_tensor_dim(t, 1), 5);
    const float f16_known[10] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f,
                                 6.0975551605224609e-5f, -0.0f, INFINITY, -INFINITY,
                                 0.333251953125f, 6.103515625e-5f};
    for (int i = 0; i < 10; i++) {
        float got = tfm_tensor_data_f32(t)[i];
        ck_assert_uint_eq(float_bits(got), float_bits(f16_known[i]));
        ck_assert_uint_eq(float_bits(got), float_bits((float)half_reference(f16[i])));
    }
    tfm_tensor_free(t);

    t = tfm_safetensors_get(f, "bf16");
    const float bf16_known[6] = {1.0f, -3.140625f, 0x1p-133f, INFINITY, -INFINITY, -0.0f};
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(float_bits(tfm_tensor_data_f32(t)[i]), float_bits(bf16_known[i]));
    tfm_tensor_free(t);

    static const struct { const char *name; int n; int32_t want[4]; } ints[] = {
        {"i64", 4, {-5, INT32_MAX, INT32_MIN, 0}}, {"i16", 2, {-32768, 32767}},
        {"i8", 2, {-128, 127}}, {"u8", 2, {255, 0}}, {"u16", 1, {65535}},
        {"u32", 1, {7}}, {"u64", 1, {9}}, {"bool", 3, {0, 1, 1}},
    };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        t = tfm_safetensors_get(f, ints[k].name);
        ck_assert_msg(t != NULL, "%s: %s", ints[k].name, tfm_last_error());
        ck_assert_int_eq(tfm_tensor_dtype(t), TFM_I32);
        ck_assert_int_eq(tfm_tensor_numel(t), ints[k].n);
        ck_assert_mem_eq(tfm_tensor_data_i32(t), ints[k].want, (size_t)ints[k].n * 4);
        tfm_tensor_free(t);
    }
    tfm_safetensors_close(f);
}
END_TEST

START_TEST(integers_out_of_int32_range)
{
    builder b;
    b_init(&b);
    unsigned char raw[32];
    put_le(raw, 1, 8);
    put_le(raw + 8, (uint64_t)INT32_MAX + 1, 8);
    b_add(&b, "i64", "I64", "1,2", raw, 16);
    put_le(raw, 0, 8);
    put_le(raw + 8, (uint64_t)INT32_MIN - 1, 8);
    b_add(&b, "low", "I64", "2", raw, 16);
    put_le(raw, 0xffffffffu, 4);
    b_add(&b, "u32", "U32", "1", raw, 4);
    put_le(raw, UINT64_MAX, 8);
    b_add(&b, "u64", "U64", "1", raw, 8);
    const char *path = in_dir("range.safetensors");
    b_write(&b, path);
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_ptr_nonnull(f);
    static const char *const names[4] = {"i64", "low", "u32", "u64"};
    static const char *const messages[4] = {
        "tensor \"i64\" (I64): element [0,1] = 2147483648 does not fit int32",
        "element [1] = -2147483649", "element [0] = 4294967295",
        "element [0] = above 9223372036854775807"};
    for (int k = 0; k < 4; k++) {
        tfm_clear_error();
        ck_assert_ptr_null(tfm_safetensors_get(f, names[k]));
        expect_error(TFM_ERR_RANGE, messages[k]);
    }
    tfm_safetensors_close(f);
}
END_TEST

/* --- parameter stores -------------------------------------------------------------- */

static tfm_params *make_params(int order, float base)
{
    static const char *const names[3] = {"enc.w", "enc.b", "dec.emb"};
    static const int64_t shapes[3][2] = {{3, 4}, {4, 0}, {5, 2}};
    tfm_params *p = tfm_params_create();
    for (int k = 0; k < 3; k++) {
        int i = order ? 2 - k : k;
        ck_assert_ptr_nonnull(tfm_params_add(p, names[i], shapes[i][1] ? 2 : 1, shapes[i]));
    }
    float *v = tfm_params_values(p);
    for (int64_t i = 0; i < tfm_params_numel(p); i++)
        v[i] = base + (float)i * 0.37f - 1e-3f * (float)(i * i);
    return p;
}

static void expect_param_values(tfm_params *p, const float *want)
{
    ck_assert_mem_eq(tfm_params_values(p), want, (size_t)tfm_params_numel(p) * 4);
}

START_TEST(params_round_trip)
{
    tfm_params *src = make_params(0, 1.0f);
    tfm_params_values(src)[3] = bits_float(0x7fa00001u); /* a NaN with payload */
    const char *path = in_dir("params.safetensors");
    ck_assert_int_eq(tfm_params_save(src, path), TFM_OK);
    tfm_params *dst = make_params(1, -7.0f); /* same names, other order */
    ck_assert_int_eq(tfm_params_load(dst, path), TFM_OK);
    for (int64_t i = 0; i < 3; i++) {
        const char *name = tfm_params_name(src, i);
        tfm_tensor *a = tfm_params_find(src, name), *b = tfm_params_find(dst, name);
        ck_assert_int_eq(memcmp(tfm_tensor_data_f32(a), tfm_tensor_data_f32(b),
                                (size_t)tfm_tensor_numel(a) * 4), 0);
    }
    tfm_params_free(src);
    tfm_params_free(dst);
}
END_TEST

START_TEST(params_load_converts_float_dtypes)
{
    tfm_params *p = tfm_params_create();
    tfm_params_add(p, "w", 1, (const int64_t[]){3});
    tfm_params_add(p, "s", 1, (const int64_t[]){1});
    builder b;
    b_init(&b);
    unsigned char raw[32];
    const double w[3] = {0.5, -1.0 / 3.0, 1e10};
    for (int i = 0; i < 3; i++) {
        uint64_t u;
        memcpy(&u, &w[i], 8);
        put_le(raw + 8 * i, u, 8);
    }
    b_add(&b, "w", "F64", "3", raw, 24);
    put_le(raw, 0xbf80, 2); /* BF16 -1, 0-d */
    b_add(&b, "s", "BF16", "", raw, 2);
    const char *path = in_dir("mixed.safetensors");
    b_write(&b, path);
    ck_assert_msg(tfm_params_load(p, path) == TFM_OK, "%s", tfm_last_error());
    const float want[4] = {0.5f, (float)(-1.0 / 3.0), 1e10f, -1.0f};
    expect_param_values(p, want);
    tfm_params_free(p);
}
END_TEST

/* Each bad file fails with its reason and changes no parameter. */
START_TEST(params_load_is_strict_and_all_or_nothing)
{
    tfm_params *target = make_params(0, 2.0f);
    int64_t numel = tfm_params_numel(target);
    float before[64];
    memcpy(before, tfm_params_values(target), (size_t)numel * 4);

    /* a store like the target but for one change */
    static const struct { const char *extra; int drop; int64_t emb_rows; int as_int;
                          tfm_status status; const char *message; } cases[] = {
        {NULL, 1, 5, 0, TFM_ERR_FORMAT, "holds no tensor \"dec.emb\" for parameter 2"},
        {"enc.extra", 0, 5, 0, TFM_ERR_FORMAT, "holds tensor \"enc.extra\", which is no parameter"},
        {NULL, 0, 6, 0, TFM_ERR_SHAPE, "tensor \"dec.emb\" has shape [6,2]; the parameter \"dec.emb\" has [5,2]"},
        {NULL, 0, 5, 1, TFM_ERR_DTYPE, "tensor \"enc.b\" is I32"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *names[4] = {"enc.w", "enc.b", "dec.emb", cases[c].extra};
        float zeros[64] = {0};
        int32_t izeros[4] = {0};
        tfm_tensor *t[4] = {
            tfm_tensor_from_f32(2, (const int64_t[]){3, 4}, zeros),
            cases[c].as_int ? tfm_tensor_from_i32(1, (const int64_t[]){4}, izeros)
                            : tfm_tensor_from_f32(1, (const int64_t[]){4}, zeros),
            tfm_tensor_from_f32(2, (const int64_t[]){cases[c].emb_rows, 2}, zeros),
            tfm_tensor_from_f32(1, (const int64_t[]){2}, zeros),
        };
        int count = cases[c].drop ? 2 : cases[c].extra ? 4 : 3;
        const char *path = in_dir("bad_params.safetensors");
        ck_assert_int_eq(tfm_safetensors_write(path, count, names,
                                               (const tfm_tensor *const *)t), TFM_OK);
        tfm_clear_error();
        ck_assert_int_eq(tfm_params_load(target, path), cases[c].status);
        expect_error(cases[c].status, cases[c].message);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_params_load"));
        expect_param_values(target, before);
        for (int k = 0; k < 4; k++)
            tfm_tensor_free(t[k]);
    }
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_load(target, in_dir("absent.safetensors")), TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "No such file");
    expect_param_values(target, before);
    tfm_params_free(target);
}
END_TEST

/* --- corruption ---------------------------------------------------------------------- */

/* Opens path; on success every tensor must be readable or fail cleanly. */
static int open_survives(const char *path)
{
    tfm_clear_error();
    tfm_safetensors *f = tfm_safetensors_open(path);
    if (!f) {
        tfm_status s = tfm_last_status();
        ck_assert_msg(s == TFM_ERR_FORMAT || s == TFM_ERR_IO, "status %s: %s",
                      tfm_status_name(s), tfm_last_error());
        ck_assert_str_ne(tfm_last_error(), "");
        return 0;
    }
    for (int64_t i = 0; i < tfm_safetensors_count(f); i++) {
        tfm_tensor *t = tfm_safetensors_get(f, tfm_safetensors_name(f, i));
        if (!t)
            ck_assert_msg(tfm_last_status() == TFM_ERR_RANGE ||
                              tfm_last_status() == TFM_ERR_SHAPE, "%s", tfm_last_error());
        tfm_tensor_free(t);
    }
    tfm_safetensors_close(f);
    return 1;
}

START_TEST(truncated_files_fail_cleanly)
{
    unsigned char bytes[512];
    size_t n = reference_file(bytes);
    const char *path = in_dir("cut.safetensors");
    int tried = 0;
    for (size_t len = 0; len < n; len += 7, tried++) {
        write_raw(path, bytes, len);
        ck_assert_msg(!open_survives(path), "a file cut to %zu of %zu bytes opened", len, n);
    }
    ck_assert_int_gt(tried, 30);
    write_raw(path, bytes, n - 1);
    expect_open_error(path, TFM_ERR_FORMAT,
                      "tensor \"scale\": data_offsets [28, 32] run past the 31-byte data");
    write_raw(path, bytes, 100);
    expect_open_error(path, TFM_ERR_FORMAT, "header length 240 exceeds the 92 bytes after it");
    write_raw(path, bytes, 5);
    expect_open_error(path, TFM_ERR_FORMAT, "the file has 5 bytes, fewer than the 8-byte");
}
END_TEST

START_TEST(bit_flips_fail_cleanly_or_load)
{
    unsigned char good[512], bytes[512];
    size_t n = reference_file(good);
    const char *path = in_dir("flip.safetensors");
    uint64_t state = 12345;
    int opened = 0, failed = 0;
    for (int k = 0; k < 400; k++) {
        memcpy(bytes, good, n);
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        size_t bit = (size_t)(state >> 33) % ((8 + 0xf0) * 8);
        bytes[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        write_raw(path, bytes, n);
        if (open_survives(path))
            opened++;
        else
            failed++;
    }
    /* most flips break the JSON; some land in names or the padding */
    ck_assert_int_gt(failed, 200);
    ck_assert_int_gt(opened, 5);
}
END_TEST

START_TEST(absurd_header_lengths)
{
    unsigned char bytes[64] = {0};
    const char *path = in_dir("absurd.safetensors");
    put_le(bytes, (uint64_t)1 << 63, 8);
    memcpy(bytes + 8, "{}", 2);
    write_raw(path, bytes, 10);
    expect_open_error(path, TFM_ERR_FORMAT, "header length 9223372036854775808 is absurd");
    put_le(bytes, UINT64_MAX, 8);
    write_raw(path, bytes, 10);
    expect_open_error(path, TFM_ERR_FORMAT, "is absurd");
    put_le(bytes, 100000001, 8);
    write_raw(path, bytes, 10);
    expect_open_error(path, TFM_ERR_FORMAT, "is absurd");
    put_le(bytes, 3, 8);
    write_raw(path, bytes, 10);
    expect_open_error(path, TFM_ERR_FORMAT, "header length 3 exceeds the 2 bytes after it");
}
END_TEST

static const struct {
    const char *header;
    size_t data_len;
    const char *message;
} corrupt[] = {
    /* layout of the data */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
     "tensor \"b\" (data_offsets [4, 12]) overlaps tensor \"a\" (data_offsets [0, 8])"},
    {"{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "overlaps tensor"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20,
     "data bytes [8, 12) before tensor \"b\" belong to no tensor"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
     "data bytes [0, 4) before tensor \"a\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12,
     "data bytes [8, 12) after the last tensor belong to no tensor"},
    {"{\"__metadata__\":{}}", 4, "the 4 data bytes belong to no tensor"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
     "tensor \"a\": data_offsets [0, 8] run past the 4-byte data section"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", 16,
     "tensor \"a\": shape [2,3] of F32 needs 24 bytes but data_offsets [0, 16] hold 16"},
    {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4000000000,4000000000,4000000000],"
     "\"data_offsets\":[0,8]}}", 8, "needs over 2^63 bytes"},
    /* names */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
     "invalid JSON at byte 54: the key \"a\" appears twice in one object"},
    {"{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "a tensor has an empty name (header byte 4)"},
    {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "invalid JSON at byte 3: \\u0000 (a NUL character) in a string"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0,
     "at byte 19: the key \"__metadata__\" appears twice in one object"},
    {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "the key \"k\" appears twice"},
    {"{\"__metadata__\":{\"k\":\"marian\\u0000x\"}}", 0, "\\u0000 (a NUL character)"},
    /* a repeated key anywhere, however deep */
    {"{\"__metadata__\":{},\"z\":[{\"y\":1,\"x\":2,\"y\":3}]}", 0,
     "at byte 37: the key \"y\" appears twice"},
    {"{\"__metadata__\":5}", 0, "\"__metadata__\" (header byte 16) is not an object"},
    {"{\"__metadata__\":{\"k\":\"v\",\"n\":1}}", 0,
     "\"__metadata__\" value \"n\" (header byte 29) is not a string"},
    /* fields */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
     "tensor \"a\" has 5 dimensions; libtfm tensors have at most 4"},
    {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     "tensor \"a\": dtype (header byte 14) is not one of"},
    {"{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "U64 BOOL: f32"},
    {"{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "is not one of"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor \"a\" (header byte 5) has no \"dtype\""},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "has no \"shape\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "has no \"data_offsets\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
     "tensor \"a\" has an unknown field \"x\""},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "the key \"dtype\" appears twice in one object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
     "shape (header byte 28) is not an array of non-negative integers"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, "shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,4]}}", 4, "shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
     "data_offsets (header byte 47) is not [begin, end] with 0 <= begin <= end"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, "data_offsets"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]}}", 4,
     "data_offsets"},
    {"{\"a\":[]}", 0, "tensor \"a\" (header byte 5) is not an object"},
    {"[]", 0, "the header is not a JSON object"},
    /* the JSON itself */
    {"", 0, "invalid JSON at byte 0: expected a value, found the end of the input"},
    {"{\"a\":1,}", 0, "invalid JSON at byte 7: expected a string key, found '}'"},
    {"{\"a\" 1}", 0, "at byte 5: expected ':' after an object key, found '1'"},
    {"{\"a\":[1 2]}", 0, "at byte 8: expected ',' or ']', found '2'"},
    {"{\"a\":1} x", 0, "at byte 8: expected nothing after the top-level value"},
    {"{\"a", 0, "at byte 1: unterminated string"},
    {"{\"\\x\":1}", 0, "at byte 2: unknown escape \\x"},
    {"{\"\\u12g4\":1}", 0, "expected a hex digit in a \\u escape, found 'g'"},
    {"{\"\\udc00\":1}", 0, "lone low surrogate \\udc00"},
    {"{\"\\ud800x\":1}", 0, "high surrogate \\ud800 without a low one"},
    {"{\"\\ud800\\u0041\":1}", 0, "high surrogate \\ud800 followed by \\u0041"},
    {"{\"\xff\":1}", 0, "at byte 2: invalid UTF-8 in a string"},
    {"{\"\xc0\xaf\":1}", 0, "invalid UTF-8"},         /* overlong '/' */
    {"{\"\xed\xa0\x80\":1}", 0, "invalid UTF-8"},     /* encoded surrogate */
    {"{\"\xf4\x90\x80\x80\":1}", 0, "invalid UTF-8"}, /* above U+10FFFF */
    {"{\"a\nb\":1}", 0, "at byte 3: control character 0x0a in a string"},
    {"{\"a\":[01]}", 0, "at byte 6: a number has a leading zero"},
    {"{\"a\":[-]}", 0, "expected a digit, found ']'"},
    {"{\"a\":[1.]}", 0, "expected a digit after the decimal point"},
    {"{\"a\":[1e+]}", 0, "expected a digit in the exponent"},
    {"{\"a\":tru}", 0, "at byte 5: expected a value, found 't'"},
    {"{\"a\":+1}", 0, "expected a value, found '+'"},
    {"{'a':1}", 0, "expected a string key, found '''"},
    {"{\"a\":1", 0, "expected ',' or '}', found the end of the input"},
    {"{\x01}", 0, "expected a string key, found byte 0x01"},
};

START_TEST(corrupt_headers_are_rejected)
{
    const char *path = in_dir("corrupt.safetensors");
    unsigned char zeros[64] = {0};
    for (size_t c = 0; c < sizeof corrupt / sizeof corrupt[0]; c++) {
        write_st(path, corrupt[c].header, strlen(corrupt[c].header), zeros,
                 corrupt[c].data_len);
        tfm_clear_error();
        tfm_safetensors *f = tfm_safetensors_open(path);
        ck_assert_msg(f == NULL, "case %zu opened", c);
        ck_assert_msg(tfm_last_status() == TFM_ERR_FORMAT, "case %zu: %s", c,
                      tfm_last_error());
        ck_assert_msg(strstr(tfm_last_error(), corrupt[c].message),
                      "case %zu: \"%s\" lacks \"%s\"", c, tfm_last_error(),
                      corrupt[c].message);
        ck_assert_msg(strstr(tfm_last_error(), "tfm_safetensors_open: \"") &&
                          strstr(tfm_last_error(), "corrupt.safetensors"),
                      "case %zu: %s", c, tfm_last_error());
    }
}
END_TEST

START_TEST(nesting_depth_is_bounded)
{
    char header[1200];
    const char *path = in_dir("deep.safetensors");
    for (int depth = 63; depth <= 200; depth += 137) {
        /* {"x":[[[...]]]} is no valid file either way, but only the deeper
         * one stops the parser, at the 64th '['; trailing spaces keep it
         * under the reader's limit of one value per 5 header bytes */
        int n = snprintf(header, sizeof header, "{\"x\":");
        for (int i = 0; i < depth; i++)
            header[n++] = '[';
        for (int i = 0; i < depth; i++)
            header[n++] = ']';
        header[n++] = '}';
        while (n < 5 * (depth + 2))
            header[n++] = ' ';
        write_st(path, header, (size_t)n, NULL, 0);
        if (depth == 63)
            expect_open_error(path, TFM_ERR_FORMAT, "tensor \"x\" (header byte 5) is not an object");
        else
            expect_open_error(path, TFM_ERR_FORMAT,
                              "invalid JSON at byte 68: nested deeper than 64 levels");
    }
}
END_TEST

START_TEST(files_that_cannot_be_read)
{
    expect_open_error(in_dir("absent.safetensors"), TFM_ERR_IO,
                      "cannot open: No such file or directory");
    expect_open_error(dir, TFM_ERR_IO, "not a regular file");
}
END_TEST

/* --- atomic writes ----------------------------------------------------------------- */

START_TEST(failed_saves_leave_the_previous_file)
{
    float va[3] = {1, 2, 3}, vb[2] = {4, 5};
    tfm_tensor *a = tfm_tensor_from_f32(1, (const int64_t[]){3}, va);
    tfm_tensor *b = tfm_tensor_from_f32(1, (const int64_t[]){2}, vb);
    const char *path = in_dir("model.safetensors");
    const char *one[1] = {"a"};
    ck_assert_int_eq(tfm_safetensors_write(path, 1, one, (const tfm_tensor *[]){a}), TFM_OK);
    size_t n_before;
    unsigned char *before = read_raw(path, &n_before);

    /* the usual permissions, after the umask */
    mode_t mask = umask(022);
    umask(mask);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0666 & ~mask);

    tfm_clear_error();
    ck_assert_int_eq(tfm_safetensors_write(in_dir("missing/model.safetensors"), 1, one,
                                           (const tfm_tensor *[]){b}), TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "No such file or directory");

    const char *twice[2] = {"a", "a"};
    tfm_clear_error();
    ck_assert_int_eq(tfm_safetensors_write(path, 2, twice, (const tfm_tensor *[]){a, b}),
                     TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "\"a\" is given twice (names[0] and names[1])");

    /* a folder at the path is refused before anything is written */
    const char *folder = in_dir("folder");
    ck_assert_int_eq(mkdir(folder, 0755), 0);
    tfm_clear_error();
    ck_assert_int_eq(tfm_safetensors_write(folder, 1, one, (const tfm_tensor *[]){b}),
                     TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "is a directory; a save replaces only a regular file");

    tfm_params *p = make_params(0, 0.0f);
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_save(p, in_dir("missing/p.safetensors")), TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "tfm_params_save: cannot create");
    tfm_params_free(p);

    size_t n_after;
    unsigned char *after = read_raw(path, &n_after);
    ck_assert_uint_eq(n_after, n_before);
    ck_assert_mem_eq(after, before, n_before);
    ck_assert_str_eq(listing(dir), "folder model.safetensors");
    ck_assert_str_eq(listing(folder), "");
    free(after);

    /* a successful save replaces the file and leaves nothing else */
    ck_assert_int_eq(tfm_safetensors_write(path, 1, (const char *[]){"b"},
                                           (const tfm_tensor *[]){b}), TFM_OK);
    ck_assert_str_eq(listing(dir), "folder model.safetensors");
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_int_eq(tfm_safetensors_count(f), 1);
    ck_assert_str_eq(tfm_safetensors_name(f, 0), "b");
    tfm_safetensors_close(f);
    free(before);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

START_TEST(relative_paths)
{
    char cwd[512];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(dir), 0);
    tfm_tensor *a = tfm_tensor_ones(1, (const int64_t[]){2});
    tfm_status s = tfm_safetensors_write("rel.safetensors", 1, (const char *[]){"a"},
                                         (const tfm_tensor *[]){a});
    tfm_safetensors *f = tfm_safetensors_open("rel.safetensors");
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_int_eq(s, TFM_OK);
    ck_assert_ptr_nonnull(f);
    tfm_safetensors_close(f);
    tfm_tensor_free(a);
    ck_assert_str_eq(listing(dir), "rel.safetensors");
}
END_TEST

/* --- argument errors ---------------------------------------------------------------- */

START_TEST(argument_errors)
{
    tfm_tensor *a = tfm_tensor_ones(1, (const int64_t[]){2});
    const tfm_tensor *ts[1] = {a};
    const char *path = in_dir("args.safetensors");

    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_open(NULL));
    expect_error(TFM_ERR_NULL, "tfm_safetensors_open: path is NULL");
    tfm_clear_error();
    ck_assert_int_eq(tfm_safetensors_count(NULL), -1);
    expect_error(TFM_ERR_NULL, "tfm_safetensors_count: file is NULL");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_name(NULL, 0));
    expect_error(TFM_ERR_NULL, "tfm_safetensors_name: file is NULL");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_get(NULL, "a"));
    expect_error(TFM_ERR_NULL, "tfm_safetensors_get: file is NULL");
    tfm_safetensors_close(NULL);

    struct { const char *path; int64_t count; const char *const *names;
             const tfm_tensor *const *tensors; tfm_status status; const char *message; }
        bad[] = {
        {NULL, 1, (const char *[]){"a"}, ts, TFM_ERR_NULL, "tfm_safetensors_write: path is NULL"},
        {path, -1, (const char *[]){"a"}, ts, TFM_ERR_ARG, "count -1 is negative"},
        {path, 1, NULL, ts, TFM_ERR_NULL, "names is NULL"},
        {path, 1, (const char *[]){"a"}, NULL, TFM_ERR_NULL, "tensors is NULL"},
        {path, 1, (const char *[]){NULL}, ts, TFM_ERR_NULL, "names[0] is NULL"},
        {path, 1, (const char *[]){"a"}, (const tfm_tensor *[]){NULL}, TFM_ERR_NULL,
         "tensors[0] is NULL"},
        {path, 1, (const char *[]){""}, ts, TFM_ERR_ARG, "names[0] is empty"},
        {path, 1, (const char *[]){"__metadata__"}, ts, TFM_ERR_ARG, "reserves"},
        {path, 1, (const char *[]){"a\xff"}, ts, TFM_ERR_ARG, "names[0] is not valid UTF-8"},
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        tfm_clear_error();
        ck_assert_int_eq(tfm_safetensors_write(bad[c].path, bad[c].count, bad[c].names,
                                               bad[c].tensors), bad[c].status);
        expect_error(bad[c].status, bad[c].message);
    }
    ck_assert_str_eq(listing(dir), "");

    ck_assert_int_eq(tfm_safetensors_write(path, 1, (const char *[]){"a"}, ts), TFM_OK);
    tfm_safetensors *f = tfm_safetensors_open(path);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_get(f, NULL));
    expect_error(TFM_ERR_NULL, "tfm_safetensors_get: name is NULL");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_get(f, "b"));
    expect_error(TFM_ERR_ARG, "tfm_safetensors_get: the file holds no tensor \"b\"");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_name(f, 1));
    expect_error(TFM_ERR_RANGE, "index 1 is outside [0, 1)");
    ck_assert_ptr_null(tfm_safetensors_name(f, -1));
    tfm_safetensors_close(f);

    tfm_params *p = tfm_params_create();
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_save(NULL, path), TFM_ERR_NULL);
    expect_error(TFM_ERR_NULL, "tfm_params_save: params is NULL");
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_save(p, NULL), TFM_ERR_NULL);
    expect_error(TFM_ERR_NULL, "tfm_params_save: path is NULL");
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_load(NULL, path), TFM_ERR_NULL);
    expect_error(TFM_ERR_NULL, "tfm_params_load: params is NULL");
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_load(p, NULL), TFM_ERR_NULL);
    expect_error(TFM_ERR_NULL, "tfm_params_load: path is NULL");
    /* an empty store saves and loads as an empty file */
    ck_assert_int_eq(tfm_params_save(p, path), TFM_OK);
    ck_assert_int_eq(tfm_params_load(p, path), TFM_OK);
    tfm_params_free(p);
    tfm_tensor_free(a);
}
END_TEST

static Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, make_dir, remove_dir);
    tcase_add_test(tc, round_trip_bit_identical);
    tcase_add_test(tc, written_bytes_follow_the_spec);
    tcase_add_test(tc, empty_file_round_trip);
    tcase_add_test(tc, reads_a_reference_file);
    tcase_add_test(tc, reads_unusual_but_valid_files);
    tcase_add_test(tc, converts_other_dtypes);
    tcase_add_test(tc, integers_out_of_int32_range);
    tcase_add_test(tc, params_round_trip);
    tcase_add_test(tc, params_load_converts_float_dtypes);
    tcase_add_test(tc, params_load_is_strict_and_all_or_nothing);
    tcase_add_test(tc, truncated_files_fail_cleanly);
    tcase_add_test(tc, bit_flips_fail_cleanly_or_load);
    tcase_add_test(tc, absurd_header_lengths);
    tcase_add_test(tc, corrupt_headers_are_rejected);
    tcase_add_test(tc, nesting_depth_is_bounded);
    tcase_add_test(tc, files_that_cannot_be_read);
    tcase_add_test(tc, failed_saves_leave_the_previous_file);
    tcase_add_test(tc, relative_paths);
    tcase_add_test(tc, argument_errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(io_suite)
