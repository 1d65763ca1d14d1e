/*
 * The C API test, compiled with the system C compiler against include/lse/lse.h and liblse, and run
 * by tests/c_api.rs (also under valgrind when it is installed).
 *
 *   test_capi -                                   bad-argument checks that need no model
 *   test_capi OPTIONS TEXT CTX CHUNKS OUT         all checks, and real scoring:
 *       OPTIONS is the engine options JSON ({"model": ..., "threads": ...}). TEXT is read like the
 *       command line's --perplexity FILE (one trailing "\n" removed) and scored with
 *       {"ctx": CTX, "chunks": CHUNKS}; the report is written to OUT for the Rust test to compare with
 *       the command line. A second request (CHUNKS - 1 chunks, at least 1) is scored, then both are
 *       scored again at the same time from two threads, and each concurrent report must equal its
 *       sequential one.
 *
 * Prints one line per check; exits 0 when all pass, 1 otherwise.
 */
#include "lse/lse.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            printf("ok   ");                                                                       \
        } else {                                                                                   \
            printf("FAIL ");                                                                       \
            failures++;                                                                            \
        }                                                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    } while (0)

/* Expects a failed call: non-zero code, a non-empty one-line message containing `want`, and the
 * output pointer left NULL. Frees the message. */
static void expect_error(const char *what, int rc, char *err, const void *out, const char *want) {
    int has = err != NULL && err[0] != '\0';
    int one_line = has && strchr(err, '\n') == NULL;
    int names = has && (want == NULL || strstr(err, want) != NULL);
    CHECK(rc != LSE_OK && has && one_line && names && out == NULL, "%s -> rc %d, err \"%s\" (want \"%s\")", what,
          rc, err ? err : "(null)", want ? want : "");
    lse_string_free(err);
}

static void check_open_error(const char *options, const char *want, int want_rc) {
    lse_engine *e = (lse_engine *)&failures; /* must be overwritten with NULL */
    char *err = (char *)&failures;           /* must be overwritten */
    int rc = lse_engine_open(options, &e, &err);
    char what[256];
    snprintf(what, sizeof what, "open %.200s", options ? options : "(NULL)");
    if (want_rc != 0 && rc != want_rc) {
        CHECK(0, "%s -> rc %d, want %d", what, rc, want_rc);
    }
    expect_error(what, rc, err, e, want);
}

/* Bad arguments that need no model. */
static void no_model_checks(void) {
    check_open_error(NULL, "options_json is NULL", LSE_ERR_ARGUMENT);
    check_open_error("{not json", "not valid JSON", LSE_ERR_ARGUMENT);
    check_open_error("", "not valid JSON", LSE_ERR_ARGUMENT);
    check_open_error("[1,2]", "JSON object", LSE_ERR_ARGUMENT);
    check_open_error("{}", "model", LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": 5}", "model", LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": \"m.gguf\", \"threads\": \"two\"}", "threads", LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": \"m.gguf\", \"threads\": 0}", "threads", LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": \"m.gguf\", \"batch_size\": 4, \"ubatch_size\": 8}", "ubatch_size",
                     LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": \"m.gguf\", \"kv_cache_dtype\": \"q4_0\"}", "kv_cache_dtype", LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": \"m.gguf\", \"flash_prefill_v2\": 1}", "flash_prefill_v2", LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": \"m.gguf\", \"treads\": 2}", "treads", LSE_ERR_ARGUMENT);
    check_open_error("{\"model\": \"/nonexistent/model.gguf\"}", "/nonexistent/model.gguf", LSE_ERR_RUN);
    check_open_error("{\"model\": \"\xff\"}", "UTF-8", LSE_ERR_ARGUMENT);

    /* out == NULL: an error, with the message */
    char *err = NULL;
    int rc = lse_engine_open("{\"model\": \"m.gguf\"}", NULL, &err);
    expect_error("open with out NULL", rc, err, NULL, "out");

    /* err == NULL: still just a status */
    lse_engine *e = NULL;
    rc = lse_engine_open("{", &e, NULL);
    CHECK(rc == LSE_ERR_ARGUMENT && e == NULL, "open with err NULL -> rc %d", rc);

    /* NULL engine */
    char *json = (char *)&failures;
    err = NULL;
    rc = lse_perplexity(NULL, "{\"text\": \"hello\"}", &json, &err);
    expect_error("perplexity on a NULL engine", rc, err, json, "engine is NULL");
    json = (char *)&failures;
    err = NULL;
    rc = lse_engine_info(NULL, &json, &err);
    expect_error("info on a NULL engine", rc, err, json, "engine is NULL");

    /* NULL frees are no-ops */
    lse_string_free(NULL);
    lse_engine_close(NULL);
    CHECK(1, "lse_string_free(NULL), lse_engine_close(NULL)");
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
            }
            buf = b;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

/* `s` as a JSON string literal (with quotes). */
static char *json_string(const char *s, size_t n) {
    char *out = malloc(n * 6 + 3), *p = out;
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c < 0x20) {
            p += sprintf(p, "\\u%04x", c);
        } else {
            *p++ = (char)c;
        }
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

static char *make_request(const char *text_json, int ctx, int chunks) {
    size_t n = strlen(text_json) + 128;
    char *r = malloc(n);
    snprintf(r, n, "{\"text\": %s, \"ctx\": %d, \"chunks\": %d}", text_json, ctx, chunks);
    return r;
}

/* The text of the top-level "perplexity" number (the first "perplexity" key: the report puts it
 * before "config", "kld" and "windows"), copied into `buf`. */
static int perplexity_text(const char *report, char *buf, size_t size) {
    const char *k = report ? strstr(report, "\"perplexity\":") : NULL;
    if (!k) return 0;
    k += strlen("\"perplexity\":");
    size_t n = strcspn(k, ",}");
    if (n == 0 || n >= size) return 0;
    memcpy(buf, k, n);
    buf[n] = '\0';
    return 1;
}

struct job {
    lse_engine *engine;
    const char *request;
    int rc;
    char *json;
    char *err;
};

static void *run_job(void *arg) {
    struct job *j = arg;
    j->rc = lse_perplexity(j->engine, j->request, &j->json, &j->err);
    return NULL;
}

static void bad_request(lse_engine *e, const char *request, const char *want, int want_rc) {
    char *json = (char *)&failures, *err = NULL;
    int rc = lse_perplexity(e, request, &json, &err);
    char what[256];
    snprintf(what, sizeof what, "perplexity %.200s", request ? request : "(NULL)");
    if (rc != want_rc) CHECK(0, "%s -> rc %d, want %d", what, rc, want_rc);
    expect_error(what, rc, err, json, want);
}

static int model_checks(const char *options, const char *text_path, int ctx, int chunks, const char *out_path) {
    size_t len = 0;
    char *text = read_file(text_path, &len);
    if (!text) {
        CHECK(0, "read %s", text_path);
        return 1;
    }
    if (len > 0 && text[len - 1] == '\n') len--; /* as the command line's --perplexity FILE */
    char *text_json = json_string(text, len);
    free(text);

    lse_engine *e = NULL;
    char *err = NULL;
    int rc = lse_engine_open(options, &e, &err);
    CHECK(rc == LSE_OK && e != NULL && err == NULL, "open %s -> rc %d %s", options, rc, err ? err : "");
    lse_string_free(err);
    if (rc != LSE_OK) {
        free(text_json);
        return 1;
    }

    /* what the engine is */
    {
        char *info = NULL, *err2 = NULL;
        rc = lse_engine_info(e, &info, &err2);
        CHECK(rc == LSE_OK && err2 == NULL && info != NULL && strstr(info, "\"object\":\"lse.engine\"") && strstr(info, "\"load_notes\":[]"),
              "lse_engine_info -> rc %d %s", rc, info ? info : (err2 ? err2 : ""));
        lse_string_free(info);
        lse_string_free(err2);
    }

    /* bad requests on a good engine */
    bad_request(e, NULL, "request_json is NULL", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": ", "not valid JSON", LSE_ERR_ARGUMENT);
    bad_request(e, "\"text\"", "object", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": 5}", "text", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": \"a b c\", \"ctx\": \"128\"}", "ctx", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": \"a b c\", \"chunks\": -3}", "chunks", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": \"a b c\", \"include_windows\": 1}", "include_windows", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": \"a b c\", \"method\": 7}", "method", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"tokens\": [1, \"x\"]}", "tokens", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": \"a b c\", \"kld_base\": false}", "kld_base", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"txt\": \"a b c\"}", "txt", LSE_ERR_ARGUMENT);
    bad_request(e, "{}", "text", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": \"a b c\", \"ctx\": 64}", "token", LSE_ERR_RUN); /* too short */
    /* checks shared with the command line name the request's fields, not its flags */
    bad_request(e, "{\"text\": \"a b c\", \"stride\": 3}", "stride applies to method sliding only (chunks use stride = ctx = 512), got 3", LSE_ERR_ARGUMENT);
    bad_request(e, "{\"text\": \"a b c\", \"ctx\": 1}", "ctx must be at least 2, got 1", LSE_ERR_ARGUMENT);
    {
        char *err2 = NULL;
        rc = lse_perplexity(e, "{\"text\": \"a b c\"}", NULL, &err2);
        expect_error("perplexity with json_out NULL", rc, err2, NULL, "json_out");
    }

    /* the command line's request */
    char *req1 = make_request(text_json, ctx, chunks);
    int chunks2 = chunks > 1 ? chunks - 1 : 1;
    char *req2 = make_request(text_json, ctx, chunks2);
    free(text_json);
    char *rep1 = NULL, *rep2 = NULL;
    err = NULL;
    rc = lse_perplexity(e, req1, &rep1, &err);
    CHECK(rc == LSE_OK && rep1 != NULL && err == NULL, "score ctx %d chunks %d -> rc %d %s", ctx, chunks, rc,
          err ? err : "");
    lse_string_free(err);
    err = NULL;
    rc = lse_perplexity(e, req2, &rep2, &err);
    CHECK(rc == LSE_OK && rep2 != NULL && err == NULL, "score ctx %d chunks %d -> rc %d %s", ctx, chunks2, rc,
          err ? err : "");
    lse_string_free(err);

    char p1[64] = "", p2[64] = "";
    CHECK(perplexity_text(rep1, p1, sizeof p1), "report 1 has perplexity %s", p1);
    CHECK(perplexity_text(rep2, p2, sizeof p2), "report 2 has perplexity %s", p2);
    CHECK(rep1 && strncmp(rep1, "{\"object\":\"lse.perplexity\"", 26) == 0, "report 1 starts with object");
    if (rep1) {
        FILE *f = fopen(out_path, "wb");
        CHECK(f && fputs(rep1, f) >= 0 && fclose(f) == 0, "report 1 written to %s", out_path);
    }

    /* the same two requests at once from two threads; each must equal its sequential result */
    struct job jobs[2] = {{e, req1, -1, NULL, NULL}, {e, req2, -1, NULL, NULL}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, run_job, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    const char *want[2] = {p1, p2};
    for (int i = 0; i < 2; i++) {
        char p[64] = "";
        int got = jobs[i].rc == LSE_OK && perplexity_text(jobs[i].json, p, sizeof p);
        CHECK(got && strcmp(p, want[i]) == 0 && jobs[i].err == NULL, "thread %d -> rc %d perplexity %s (want %s) %s",
              i, jobs[i].rc, p, want[i], jobs[i].err ? jobs[i].err : "");
        lse_string_free(jobs[i].json);
        lse_string_free(jobs[i].err);
    }

    lse_string_free(rep1);
    lse_string_free(rep2);
    free(req1);
    free(req2);
    lse_engine_close(e);
    return 0;
}

int main(int argc, char **argv) {
    no_model_checks();
    if (argc == 6) {
        model_checks(argv[1], argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
    } else if (!(argc == 2 && strcmp(argv[1], "-") == 0)) {
        fprintf(stderr, "usage: %s - | OPTIONS_JSON TEXT CTX CHUNKS OUT\n", argv[0]);
        return 2;
    }
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
