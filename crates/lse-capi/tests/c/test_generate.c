/* lse_generate from C: bad requests are refused with a message (never an abort), and a good one
 * writes the generation object to the file named on the command line.
 * usage: test_generate OPTIONS_JSON REQUEST_JSON OUT_PATH */
#include <lse/lse.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect_error(lse_engine *e, const char *req, int want, const char *phrase) {
    char *out = (char *)1, *err = NULL;
    int rc = lse_generate(e, req, &out, &err);
    if (rc != want || out != NULL || err == NULL || strstr(err, phrase) == NULL) {
        printf("FAIL %s -> rc %d (want %d), err %s\n", req, rc, want, err ? err : "(null)");
        failures++;
    }
    lse_string_free(err);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s OPTIONS_JSON REQUEST_JSON OUT_PATH\n", argv[0]);
        return 2;
    }
    lse_engine *e = NULL;
    char *err = NULL;
    if (lse_engine_open(argv[1], &e, &err) != LSE_OK) {
        printf("FAIL open: %s\n", err);
        lse_string_free(err);
        return 1;
    }
    expect_error(NULL, "{\"prompt\": \"hi\"}", LSE_ERR_ARGUMENT, "engine is NULL");
    expect_error(e, "{\"prompt\": \"\"}", LSE_ERR_ARGUMENT, "empty");
    expect_error(e, "{\"prompt\": []}", LSE_ERR_ARGUMENT, "no tokens");
    expect_error(e, "{\"prompt\": \"hi\", \"max_tokens\": -1}", LSE_ERR_ARGUMENT, "max tokens");
    expect_error(e, "{\"prompt\": \"hi\", \"temperature\": -0.5}", LSE_ERR_ARGUMENT, "temperature");
    expect_error(e, "{\"prompt\": \"hi\", \"top_p\": 0}", LSE_ERR_ARGUMENT, "top-p");
    expect_error(e, "{\"prompt\": \"hi\", \"top_p\": 1.5}", LSE_ERR_ARGUMENT, "top-p");
    expect_error(e, "{\"prompt\": \"hi\", \"top_k\": -1}", LSE_ERR_ARGUMENT, "top-k");
    expect_error(e, "{\"prompt\": \"hi\", \"bogus\": 1}", LSE_ERR_ARGUMENT, "bogus");
    expect_error(e, "{\"prompt\": [1, 99999999]}", LSE_ERR_RUN, "outside the vocabulary");
    expect_error(e, "not json", LSE_ERR_ARGUMENT, "generation request");

    char *out = NULL;
    int rc = lse_generate(e, argv[2], &out, &err);
    if (rc != LSE_OK) {
        printf("FAIL generate: %s\n", err);
        lse_string_free(err);
        failures++;
    } else {
        FILE *f = fopen(argv[3], "w");
        if (!f || fputs(out, f) < 0 || fclose(f) != 0) {
            printf("FAIL cannot write %s\n", argv[3]);
            failures++;
        }
        lse_string_free(out);
    }
    lse_engine_close(e);
    if (failures == 0) printf("PASSED\n");
    return failures == 0 ? 0 : 1;
}
