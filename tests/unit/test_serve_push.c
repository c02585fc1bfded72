/* test_serve_push.c - the Pyroscope push against a real HTTP receiver on the loopback
 * (tests/func/serve/pyroscope_receiver.py, which checks every request against Pyroscope's
 * ingest contract and decodes the profile with `go tool pprof` when go is installed):
 * delivery with labels and credentials, the spool while the server is down (kept across a
 * restart of the daemon, delivered once and in order when it is back), the spool limit,
 * rejected windows, retries after 503s, basic auth. */
#include "push.h"
#include "scry_err.h"
#include "test_serve_util.h"

#include <json-c/json.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECEIVER SCRY_TEST_DATA "/../func/serve/pyroscope_receiver.py"
#define FIXTURE  SCRY_TEST_DATA "/serve/window.pb.gz"

static char dir[] = "/tmp/scry-test-push-XXXXXX";
static char logpath[256], portfile[256];
static int port;
static char *pprof;
static size_t pprof_len;

static pid_t receiver_start(const char *extra1, const char *extra2)
{
    char portarg[16];
    snprintf(portarg, sizeof portarg, "%d", port);
    unlink(portfile);
    pid_t pid = fork();
    if (pid == 0) {
        check_child_dies_with_test();
        const char *argv[16] = {
            "/usr/bin/python3", RECEIVER, "--log", logpath,           "--port-file",
            portfile,           "--port", portarg, "--expect-labels", "host,pid,python_version"};
        int n = 10;
        if (extra1)
            argv[n++] = extra1;
        if (extra2)
            argv[n++] = extra2;
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200 && access(portfile, R_OK) != 0; i++)
        usleep(25000);
    FILE *f = fopen(portfile, "r");
    if (f) {
        if (fscanf(f, "%d", &port) != 1)
            port = 0;
        fclose(f);
    }
    return pid;
}

static void receiver_stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Reads the receiver's log: every record with status 200 and no problems appends its
 * "from" to FROMS; returns the number of records with problems. */
static int read_log(int64_t *froms, int *n, int max, int *statuses_4xx)
{
    FILE *f = fopen(logpath, "r");
    char line[8192];
    int bad = 0;
    *n = 0;
    if (statuses_4xx)
        *statuses_4xx = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_object *o = json_tokener_parse(line), *v;
        if (!o)
            continue;
        int status = json_object_object_get_ex(o, "status", &v) ? json_object_get_int(v) : 0;
        json_object *probs = NULL;
        json_object_object_get_ex(o, "problems", &probs);
        if (status >= 400 && status < 500 && statuses_4xx)
            (*statuses_4xx)++;
        if (status == 200 && probs && json_object_array_length(probs) == 0) {
            json_object_object_get_ex(o, "from", &v);
            if (*n < max)
                froms[(*n)++] = json_object_get_int64(v);
        } else if (probs && json_object_array_length(probs) > 0 && status == 400) {
            bad++;
            fprintf(stderr, "receiver: %s", line);
        }
        json_object_put(o);
    }
    if (f)
        fclose(f);
    return bad;
}

static int enqueue(serve_push_t *p, int64_t from)
{
    serve_push_label_t labels[] = {{"host", "test-host"},
                                   {"pid", "1234"},
                                   {"python_version", "3.11"},
                                   {"container", "a,b{c}=d"}};
    return serve_push_enqueue(p, "web.app", labels, 4, from, from + 60, 19, pprof, pprof_len);
}

static serve_push_t *open_push(const char *spool, uint64_t max_bytes, int basic)
{
    char url[64], msg[256], tok[300], pw[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    snprintf(tok, sizeof tok, "%s/token", dir);
    snprintf(pw, sizeof pw, "%s/password", dir);
    serve_push_opts_t o = {.url = url,
                           .tenant = "team-a",
                           .token_file = basic ? NULL : tok,
                           .user = basic ? "scry" : NULL,
                           .password_file = basic ? pw : NULL,
                           .timeout_s = 5,
                           .spool_dir = spool,
                           .spool_max_bytes = max_bytes,
                           .backoff_max_s = 0.5};
    serve_push_t *p = serve_push_new(&o, msg, sizeof msg);
    CHECK(p != NULL, "%s", msg);
    return p;
}

static int same(const int64_t *a, int na, const int64_t *b, int nb)
{
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(dir))
        return 1;
    FILE *f = fopen(FIXTURE, "rb");
    if (!f) {
        printf("SKIP: no %s\n", FIXTURE);
        return 0;
    }
    pprof = malloc(1 << 20);
    pprof_len = fread(pprof, 1, 1 << 20, f);
    fclose(f);
    snprintf(logpath, sizeof logpath, "%s/received.jsonl", dir);
    snprintf(portfile, sizeof portfile, "%s/port", dir);
    char path[300], spool[300];
    snprintf(path, sizeof path, "%s/token", dir);
    test_write_file(path, "sekrit\n");
    snprintf(path, sizeof path, "%s/password", dir);
    test_write_file(path, "pa55\n");
    snprintf(spool, sizeof spool, "%s/spool", dir);

    char name[256];
    serve_push_label_t l[] = {{"host", "h"}, {"bad key", "v"}};
    CHECK(serve_push_app_name("svc", l, 1, name, sizeof name) == 0 &&
              strcmp(name, "svc{host=h}") == 0,
          "%s", name);
    CHECK(serve_push_app_name("svc", l, 2, name, sizeof name) == SCRY_E_INVAL, "bad key");
    CHECK(serve_push_app_name("a/b", l, 1, name, sizeof name) == SCRY_E_INVAL, "bad service");

    /* 1. delivered, checked by the receiver (go tool pprof too) */
    pid_t rcv = receiver_start("--go-check", "--bearer=sekrit");
    CHECK(port > 0, "receiver port");
    serve_push_t *p = open_push(spool, 0, 0);
    const int64_t t = 1700000000;
    for (int i = 0; i < 3; i++)
        CHECK(enqueue(p, t + 60 * i) == 0, "enqueue %d", i);
    CHECK(serve_push_drain(p, 60) == 0, "delivered");
    int64_t got[64], want[64];
    int n = 0;
    CHECK(read_log(got, &n, 64, NULL) == 0, "no contract violations");
    for (int i = 0; i < 3; i++)
        want[i] = t + 60 * i;
    CHECK(same(got, n, want, 3), "3 windows in order, got %d", n);
    serve_push_stats_t st;
    serve_push_stats(p, &st);
    CHECK(st.pushed == 3 && st.spooled == 0, "pushed %llu spooled %llu",
          (unsigned long long)st.pushed, (unsigned long long)st.spooled);

    /* 2. the server goes away; windows are spooled, kept across a restart of the daemon,
     * and delivered once each, in order, when it is back */
    receiver_stop(rcv);
    for (int i = 3; i < 7; i++)
        CHECK(enqueue(p, t + 60 * i) == 0, "enqueue %d", i);
    usleep(1500 * 1000);
    serve_push_stats(p, &st);
    CHECK(st.failures >= 1 && st.spooled == 4, "failures %llu spooled %llu",
          (unsigned long long)st.failures, (unsigned long long)st.spooled);
    serve_push_free(p);
    p = open_push(spool, 0, 0);
    CHECK(enqueue(p, t + 60 * 7) == 0, "enqueue 7");
    usleep(700 * 1000);
    rcv = receiver_start("--bearer=sekrit", NULL);
    CHECK(serve_push_drain(p, 30) == 0, "spool delivered after the outage");
    CHECK(read_log(got, &n, 64, NULL) == 0, "no contract violations");
    for (int i = 0; i < 8; i++)
        want[i] = t + 60 * i;
    CHECK(same(got, n, want, 8), "every window exactly once, in order (%d)", n);
    for (int i = 0; i < n; i++)
        if (i >= 8 || got[i] != want[i])
            fprintf(stderr, "  got[%d] = %lld\n", i, (long long)got[i]);

    /* 3. the spool limit drops the oldest, counted */
    receiver_stop(rcv);
    serve_push_free(p);
    uint64_t one = pprof_len + 300;
    p = open_push(spool, 3 * one, 0);
    for (int i = 8; i < 14; i++)
        CHECK(enqueue(p, t + 60 * i) == 0, "enqueue %d", i);
    serve_push_stats(p, &st);
    CHECK(st.dropped == 3 && st.spooled == 3, "dropped %llu spooled %llu",
          (unsigned long long)st.dropped, (unsigned long long)st.spooled);
    rcv = receiver_start("--bearer=sekrit", NULL);
    CHECK(serve_push_drain(p, 30) == 0, "rest delivered");
    read_log(got, &n, 64, NULL);
    CHECK(n == 11 && got[8] == t + 60 * 11 && got[10] == t + 60 * 13, "the newest 3 (%d)", n);
    receiver_stop(rcv);
    serve_push_free(p);

    /* 4. a server that refuses the credentials: rejected, counted, not retried forever */
    rcv = receiver_start("--bearer=other", NULL);
    p = open_push(spool, 0, 0);
    CHECK(enqueue(p, t + 60 * 20) == 0, "enqueue");
    CHECK(serve_push_drain(p, 30) == 0, "spool emptied");
    serve_push_stats(p, &st);
    CHECK(st.rejected == 1, "rejected %llu", (unsigned long long)st.rejected);
    receiver_stop(rcv);
    serve_push_free(p);

    /* 5. 503 twice, then accepted; basic auth */
    rcv = receiver_start("--fail-first=2", "--basic=scry:pa55");
    p = open_push(spool, 0, 1);
    CHECK(enqueue(p, t + 60 * 30) == 0, "enqueue");
    CHECK(serve_push_drain(p, 30) == 0, "delivered after retries");
    serve_push_stats(p, &st);
    CHECK(st.pushed == 1 && st.failures == 2, "pushed %llu failures %llu",
          (unsigned long long)st.pushed, (unsigned long long)st.failures);
    int rej = 0;
    CHECK(read_log(got, &n, 64, &rej) == 0 && got[n - 1] == t + 60 * 30, "basic auth ok");
    receiver_stop(rcv);
    serve_push_free(p);

    check_rmtree(dir);
    free(pprof);
    return test_summary("test_serve_push");
}
