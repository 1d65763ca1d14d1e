/*
 * score.c - score a text file with a GGUF model through the LSE C API and print the JSON report,
 * like `lse-server --model MODEL --perplexity TEXT --perplexity-ctx CTX [--perplexity-chunks N]`.
 *
 * Build (from the repository root):
 *     cargo build --release -p lse-capi
 *     cc -O2 -I include examples/score.c -L target/release -llse -Wl,-rpath,"$PWD/target/release" -o score
 * Run:
 *     ./score models/SmolLM2-135M-Instruct.Q4_1.gguf data/wiki.test.raw 512 10
 */
#include "lse/lse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads a whole file; NULL on failure. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, (cap *= 2) + 1);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Appends `s[0..n)` to `out` as a JSON string literal; returns the end. `out` needs 6n + 3 bytes. */
static char *put_json_string(char *out, const char *s, size_t n) {
    *out++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *out++ = '\\';
            *out++ = (char)c;
        } else if (c < 0x20) {
            out += sprintf(out, "\\u%04x", c);
        } else {
            *out++ = (char)c;
        }
    }
    *out++ = '"';
    *out = '\0';
    return out;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: %s MODEL.gguf TEXT_FILE [CTX (512)] [CHUNKS (all)]\n", argv[0]);
        return 2;
    }
    int ctx = argc > 3 ? atoi(argv[3]) : 512;
    int chunks = argc > 4 ? atoi(argv[4]) : 0;

    size_t len = 0;
    char *text = read_file(argv[2], &len);
    if (!text) {
        fprintf(stderr, "score: cannot read %s\n", argv[2]);
        return 1;
    }
    if (len > 0 && text[len - 1] == '\n') len--; /* like --perplexity FILE: one trailing newline removed */

    /* engine options: {"model": "..."}; every other option keeps its default */
    size_t mlen = strlen(argv[1]);
    char *options = malloc(mlen * 6 + 32), *p = options;
    p += sprintf(p, "{\"model\": ");
    p = put_json_string(p, argv[1], mlen);
    strcpy(p, "}");

    /* request: {"text": "...", "ctx": CTX[, "chunks": N]} */
    char *request = malloc(len * 6 + 128);
    p = request;
    p += sprintf(p, "{\"text\": ");
    p = put_json_string(p, text, len);
    p += sprintf(p, ", \"ctx\": %d", ctx);
    if (chunks > 0) p += sprintf(p, ", \"chunks\": %d", chunks);
    strcpy(p, "}");
    free(text);

    lse_engine *engine = NULL;
    char *err = NULL;
    int status = 1;
    if (lse_engine_open(options, &engine, &err) != LSE_OK) {
        fprintf(stderr, "score: %s\n", err);
        lse_string_free(err);
    } else {
        char *report = NULL;
        if (lse_perplexity(engine, request, &report, &err) != LSE_OK) {
            fprintf(stderr, "score: %s\n", err);
            lse_string_free(err);
        } else {
            printf("%s\n", report);
            lse_string_free(report);
            status = 0;
        }
        lse_engine_close(engine);
    }
    free(options);
    free(request);
    return status;
}
