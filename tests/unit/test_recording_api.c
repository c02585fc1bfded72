/* test_recording_api.c - the recording library's contract (recording.h) against a real
 * interpreter.
 *
 * Known answers: steps called out of order (open without a target, run before open, end
 * before run, write and summary before the end, open twice) return SCRY_E_INVAL with a
 * message and change nothing; a pid that does not exist fails to open with a code and a
 * message naming it; a launched program spinning in spin() for 0.4 s gives a collapsed
 * profile with spin in it, a summary at the rate asked for, and, when freed while it still
 * runs after --duration, is ended with a note in the recording's log (not on stderr).
 */
#include "python_child.h"

#include "recording.h"
#include "scry_err.h"

#include <stdlib.h>
#include <string.h>

static void misuse(void)
{
    recording_opts_t none = {0};
    recording_t *r = recording_new(&none);
    CHECK(r != NULL);
    CHECK_INT(recording_run(r), ==, SCRY_E_INVAL, "run before open");
    CHECK(recording_error(r)[0], "run before open: a message");
    CHECK_INT(recording_open(r), ==, SCRY_E_INVAL, "open without a pid or a command");
    CHECK_INT(recording_end(r), ==, SCRY_E_INVAL, "end before run");
    CHECK_INT(recording_write(r, REPORT_FORMAT_TEXT, stdout, NULL), ==, SCRY_E_INVAL);
    CHECK_INT(recording_summary(r, "-", stdout), ==, SCRY_E_INVAL);
    CHECK(recording_profile(r) == NULL);
    CHECK_INT(recording_pid(r), ==, 0);
    recording_free(r);
    recording_free(NULL);

    recording_opts_t gone = {.pid = 0x3ffffff0, .quiet = 1};
    r = recording_new(&gone);
    int err = recording_open(r);
    CHECK_INT(err, <, 0, "a pid that does not exist");
    CHECK(strstr(recording_error(r), "1073741808") != NULL, "the message names the pid: %s",
          recording_error(r));
    CHECK_INT(recording_open(r), ==, SCRY_E_INVAL, "open twice");
    recording_free(r);
}

static void launched(const char *py)
{
    char dash_c[] = "-c";
    char script[] = "def spin():\n"
                    "    x = 0\n"
                    "    while True:\n"
                    "        x = (x + 1) % 1000003\n"
                    "spin()\n";
    char *argv[] = {(char *)py, dash_c, script, NULL};
    char *logtext = NULL, *text = NULL;
    size_t loglen = 0, len = 0;
    FILE *log = open_memstream(&logtext, &loglen);
    FILE *out = open_memstream(&text, &len);
    recording_opts_t o = {.argv = argv,
                          .duration_s = 0.4,
                          .sampler = {.rate_hz = 200, .backend = "ptrace"},
                          .quiet = 1,
                          .log = log};
    recording_t *r = recording_new(&o);
    CHECK_INT(recording_open(r), ==, 0, "%s", recording_error(r));
    CHECK_INT(recording_pid(r), >, 0);
    CHECK_INT(recording_write(r, REPORT_FORMAT_COLLAPSED, out, NULL), ==, SCRY_E_INVAL,
              "write before the end");
    CHECK_INT(recording_run(r), ==, 0, "%s", recording_error(r));
    CHECK_INT(recording_run(r), ==, SCRY_E_INVAL, "run twice");
    CHECK_INT(recording_end(r), ==, 0);
    CHECK_INT(recording_write(r, REPORT_FORMAT_COLLAPSED, out, NULL), ==, 0);
    CHECK_INT(recording_summary(r, "x.txt", log), ==, 0);
    recording_free(r); /* ends the program: --duration elapsed */
    fclose(out);
    fclose(log);
    CHECK(text && strstr(text, "spin"), "the profile has spin(): %.300s", text ? text : "");
    CHECK(logtext && strstr(logtext, " at 200 Hz ") && strstr(logtext, "wrote x.txt"),
          "the summary: %.600s", logtext ? logtext : "");
    CHECK(logtext && strstr(logtext, "--duration 0.4 s elapsed: ending the launched program"),
          "the program was ended, said in the log: %.600s", logtext ? logtext : "");
    free(text);
    free(logtext);
}

int main(void)
{
    check_child_dies_with_test();
    misuse();
    const char *py = python_child_interp();
    if (!py) {
        printf("SKIP: no interpreter\n");
        return check_summary("recording_api");
    }
    launched(py);
    return check_summary("recording_api");
}
