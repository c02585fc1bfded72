/* diff.c - 'scry diff BASE.json NEW.json': what changed between two recordings. The JSON
 * reports are read (bounded, regular files only) and handed to report/ (report_diff_*). */
#include "commands.h"

#include "report.h"
#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads the regular file PATH, at most REPORT_DIFF_MAX_BYTES, into *DATA (malloc'd) and
 * *LEN. Returns 0 or a negative code after printing why. */
static int read_report(const char *path, char **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "scry: cannot read %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return SCRY_E_IO;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)REPORT_DIFF_MAX_BYTES) {
        fprintf(stderr, "scry: %s: %s\n", path,
                S_ISREG(st.st_mode) ? "larger than 256 MB" : "not a regular file");
        close(fd);
        return SCRY_E_INVAL;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : SCRY_E_NOMEM;
    while (buf) {
        if (n == cap - 1) { /* the file grew while read: stop at the limit */
            if (cap > REPORT_DIFF_MAX_BYTES) {
                rc = SCRY_E_TOOBIG;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = SCRY_E_NOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = SCRY_E_IO;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (rc < 0) {
        fprintf(stderr, "scry: cannot read %s: %s\n", path, scry_strerror(rc));
        free(buf);
        return rc;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

int cmd_diff(const scry_config_t *cfg)
{
    report_diff_t *d = report_diff_new();
    int rc = 1;
    FILE *out = NULL;
    if (!d) {
        fprintf(stderr, "scry: out of memory\n");
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        char *data = NULL, msg[256];
        size_t len = 0;
        if (read_report(cfg->diff_files[i], &data, &len) < 0)
            goto out;
        int err = report_diff_load(d, i, data, len, msg, sizeof msg);
        free(data);
        if (err < 0) {
            fprintf(stderr, "scry: %s: %s\n", cfg->diff_files[i],
                    msg[0] ? msg : scry_strerror(err));
            goto out;
        }
    }
    const char *path = cfg->output ? cfg->output : "-";
    out = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!out) {
        fprintf(stderr, "scry: cannot write %s: %s\n", path, strerror(errno));
        goto out;
    }
    report_options_t ropt = {.color = out == stdout && isatty(1), .metric = -1};
    int werr = report_diff_write(d, (enum report_format)cfg->format_id, out, &ropt);
    if (out != stdout && fclose(out) != 0 && !werr)
        werr = SCRY_E_IO;
    if (werr) {
        fprintf(stderr, "scry: writing %s failed: %s\n", path, scry_strerror(werr));
        goto out;
    }
    rc = 0;
out:
    report_diff_free(d);
    return rc;
}
