/* test_serve_store.c - window files written atomically, the index, retention by age and by
 * total size, leftovers of a crash cleaned. */
#include "scry_err.h"
#include "store.h"
#include "test_serve_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/scry-test-store-XXXXXX";

static int put(serve_store_t *s, const char *svc, const char *cont, int64_t from, size_t bytes,
               int64_t now)
{
    static char data[100000];
    memset(data, 'x', sizeof data);
    serve_store_file_t files[] = {
        {"collapsed", data, bytes}, {"svg", data, bytes}, {"pb.gz", data, bytes}};
    json_object *labels = json_object_new_object();
    json_object_object_add(labels, "samples", json_object_new_int(42));
    serve_window_t w = {svc, cont, from, from + 60, labels, files, 3};
    int rc = serve_store_put(s, &w, now);
    json_object_put(labels);
    return rc;
}

static json_object *index_windows(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/index.json", dir);
    json_object *o = json_object_from_file(path), *w = NULL;
    if (!o || !json_object_object_get_ex(o, "windows", &w)) {
        json_object_put(o);
        return NULL;
    }
    json_object_get(w);
    json_object_put(o);
    return w;
}

static int count_files(const char *sub, const char *needle)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += needle ? strstr(de->d_name, needle) != NULL : de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & 07777 : 0;
}

/* issue 24, items 6 and 7: window files readable by root only (or an opt-in group); an
 * out-dir another user can write to, or reach through their symbolic link, is refused; a
 * link planted where a service directory goes is not followed. */
static void check_safety(void)
{
    char msg[256], path[1100], out[512], victim[512];
    const int64_t t = 1700000000;
    snprintf(out, sizeof out, "%s/safe", dir);
    serve_store_t *s = serve_store_new(out, 0, 0, (gid_t)-1, msg, sizeof msg);
    CHECK(s != NULL, "%s", msg);
    CHECK(s && put(s, "web", NULL, t, 10, t) == 0, "put");
    serve_store_free(s);
    CHECK_INT(mode_of(out), ==, 0700, "mode of %s", out);
    snprintf(path, sizeof path, "%s/web", out);
    CHECK_INT(mode_of(path), ==, 0700, "mode of %s", path);
    snprintf(path, sizeof path, "%s/web/%lld-%lld.svg", out, (long long)t, (long long)t + 60);
    CHECK_INT(mode_of(path), ==, 0600, "mode of %s", path);
    snprintf(path, sizeof path, "%s/index.json", out);
    CHECK_INT(mode_of(path), ==, 0600, "mode of %s", path);
    if (geteuid() != 0)
        return;
    /* a reader group: 0750 and 0640, that group */
    snprintf(out, sizeof out, "%s/grp", dir);
    s = serve_store_new(out, 0, 0, 4, msg, sizeof msg);
    CHECK(s != NULL, "%s", msg);
    CHECK(s && put(s, "web", NULL, t, 10, t) == 0, "put with a group");
    serve_store_free(s);
    struct stat st;
    snprintf(path, sizeof path, "%s/web/%lld-%lld.svg", out, (long long)t, (long long)t + 60);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0640 && st.st_gid == 4,
          "group file mode %o gid %u", st.st_mode & 07777, (unsigned)st.st_gid);
    CHECK_INT(mode_of(out), ==, 0750, "mode of %s", out);
    /* a parent writable by others (not sticky): refused */
    snprintf(path, sizeof path, "%s/open", dir);
    mkdir(path, 0777);
    chmod(path, 0777);
    snprintf(out, sizeof out, "%s/open/out", dir);
    s = serve_store_new(out, 0, 0, (gid_t)-1, msg, sizeof msg);
    CHECK(s == NULL && strstr(msg, "refused"), "out-dir under a 0777 directory: %s", msg);
    serve_store_free(s);
    /* the out-dir itself another user's: refused */
    snprintf(out, sizeof out, "%s/theirs", dir);
    mkdir(out, 0755);
    CHECK(chown(out, 65534, 65534) == 0, "chown");
    s = serve_store_new(out, 0, 0, (gid_t)-1, msg, sizeof msg);
    CHECK(s == NULL && strstr(msg, "refused"), "another user's out-dir: %s", msg);
    serve_store_free(s);
    /* the out-dir named by another user's symbolic link: refused */
    snprintf(victim, sizeof victim, "%s/victim", dir);
    mkdir(victim, 0700);
    snprintf(out, sizeof out, "%s/link", dir);
    CHECK(symlink(victim, out) == 0 && lchown(out, 65534, 65534) == 0, "symlink");
    s = serve_store_new(out, 0, 0, (gid_t)-1, msg, sizeof msg);
    CHECK(s == NULL && strstr(msg, "symbolic link"), "another user's link: %s", msg);
    serve_store_free(s);
    /* root's own link is followed */
    CHECK(lchown(out, 0, 0) == 0, "lchown");
    s = serve_store_new(out, 0, 0, (gid_t)-1, msg, sizeof msg);
    CHECK(s != NULL, "root's link: %s", msg);
    serve_store_free(s);
    /* a link where a service directory goes: nothing written through it */
    snprintf(out, sizeof out, "%s/planted", dir);
    s = serve_store_new(out, 0, 0, (gid_t)-1, msg, sizeof msg);
    snprintf(path, sizeof path, "%s/planted/web", dir);
    CHECK(symlink(victim, path) == 0, "plant");
    CHECK(s && put(s, "web", NULL, t, 10, t) == SCRY_E_IO, "put through a planted link");
    serve_store_free(s);
    int n = 0;
    DIR *d = opendir(victim);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK_INT(n, ==, 0, "files written through the planted link");
}

int main(void)
{
    char msg[256], path[512];
    if (!mkdtemp(dir))
        return 1;
    char sub[300];
    snprintf(sub, sizeof sub, "%s/out", dir);
    serve_store_t *s = serve_store_new(sub, 0, 0, (gid_t)-1, msg, sizeof msg);
    CHECK(s != NULL, "%s", msg);
    serve_store_free(s);
    snprintf(sub, sizeof sub, "%s", dir);
    s = serve_store_new(sub, 3600, 0, (gid_t)-1, msg, sizeof msg);
    const int64_t t = 1700000000;
    CHECK(put(s, "web", NULL, t, 1000, t + 60) == 0, "put 1");
    const char *cid = "4f3c2b1a00112233445566778899aabbccddeeff00112233445566778899aabb";
    CHECK(put(s, "web", cid, t, 1000, t + 60) == 0, "put container");
    CHECK(put(s, "batch", NULL, t + 60, 1000, t + 120) == 0, "put 2");
    snprintf(path, sizeof path, "%s/web/%lld-%lld.pb.gz", dir, (long long)t, (long long)t + 60);
    CHECK(access(path, R_OK) == 0, "%s", path);
    snprintf(path, sizeof path, "%s/web/%lld-%lld.4f3c2b1a0011.svg", dir, (long long)t,
             (long long)t + 60);
    CHECK(access(path, R_OK) == 0, "%s", path);
    CHECK(count_files("web", NULL) == 8, "web has 2 windows x 4 files: %d",
          count_files("web", NULL));
    CHECK(count_files("web", ".tmp-") == 0, "no temporary files left");
    json_object *w = index_windows();
    CHECK(w && json_object_array_length(w) == 3, "index lists 3 windows");
    if (w && json_object_array_length(w) == 3) {
        json_object *first = json_object_array_get_idx(w, 0), *v, *files;
        CHECK(json_object_object_get_ex(first, "service", &v) &&
                  strcmp(json_object_get_string(v), "web") == 0,
              "service");
        CHECK(json_object_object_get_ex(first, "samples", &v) && json_object_get_int(v) == 42,
              "labels kept");
        CHECK(json_object_object_get_ex(first, "bytes", &v) && json_object_get_int(v) > 3000,
              "bytes");
        CHECK(json_object_object_get_ex(first, "files", &files) &&
                  json_object_object_get_ex(files, "pb.gz", &v) &&
                  strncmp(json_object_get_string(v), "web/", 4) == 0,
              "relative file paths");
    }
    json_object_put(w);

    /* a crash left a temporary file and a window without its description */
    snprintf(path, sizeof path, "%s/web/.tmp-1700000120-1700000180.svg-abcdef", dir);
    test_write_file(path, "partial");
    struct timespec old[2] = {{t, 0}, {t, 0}};
    utimensat(AT_FDCWD, path, old, 0);
    snprintf(path, sizeof path, "%s/web/1700000120-1700000180.svg", dir);
    test_write_file(path, "<svg/>");
    CHECK(serve_store_prune(s, t + 120) == 0, "prune");
    CHECK(count_files("web", ".tmp-") == 0, "stale temporary removed");
    w = index_windows();
    CHECK(w && json_object_array_length(w) == 3, "incomplete window not listed");
    json_object_put(w);

    /* age: everything that ended more than an hour before NOW goes */
    CHECK(put(s, "web", NULL, t + 7200, 1000, t + 7260) == 0, "put late");
    w = index_windows();
    CHECK(w && json_object_array_length(w) == 1, "age pruning: %zu left",
          w ? json_object_array_length(w) : 0);
    json_object_put(w);
    CHECK(serve_store_stats(s)->windows_pruned >= 3, "pruned counted");

    /* size: 3 files of 10 kB per window, a 100 kB limit keeps the 3 newest */
    serve_store_set_limits(s, 0, 100000);
    for (int i = 0; i < 6; i++)
        CHECK(put(s, "size", NULL, t + 10000 + i * 60, 10000, t + 20000) == 0, "put %d", i);
    CHECK(serve_store_stats(s)->bytes_kept <= 100000, "kept %llu",
          (unsigned long long)serve_store_stats(s)->bytes_kept);
    snprintf(path, sizeof path, "%s/size/%lld-%lld.collapsed", dir, (long long)t + 10000 + 5 * 60,
             (long long)t + 10000 + 6 * 60);
    CHECK(access(path, R_OK) == 0, "newest kept");
    snprintf(path, sizeof path, "%s/size/%lld-%lld.collapsed", dir, (long long)t + 10000,
             (long long)t + 10060);
    CHECK(access(path, R_OK) != 0, "oldest dropped");

    /* refused */
    CHECK(put(s, "../etc", NULL, t, 10, t) == SCRY_E_INVAL, "path in service name");
    CHECK(put(s, "", NULL, t, 10, t) == SCRY_E_INVAL, "empty service name");
    serve_store_file_t bad = {"sh", "x", 1};
    serve_window_t bw = {"web", NULL, t, t + 1, NULL, &bad, 1};
    CHECK(serve_store_put(s, &bw, t) == SCRY_E_INVAL, "unknown extension");
    serve_store_free(s);
    check_safety();

    check_rmtree(dir);
    return test_summary("test_serve_store");
}
