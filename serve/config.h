/* config.h - the configuration of scry serve: one table of options read from the config file
 * (INI, /etc/scry/scry.conf) and from the command line (every key is also a --flag).
 *
 * The file has top-level keys and [service NAME] sections. Top-level selectors (match, pid,
 * user, container, cgroup) each add one anonymous rule; a [service NAME] section is one
 * rule whose selectors must all hold and whose matches are grouped under NAME. Rules are
 * tried in order, the first that holds wins. Flags given on the command line are applied
 * after the file, so they win, and are applied again on every reload.
 */
#ifndef SCRY_SERVE_CONFIG_H
#define SCRY_SERVE_CONFIG_H

#include <regex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#define SERVE_CONFIG_DEFAULT_PATH "/etc/scry/scry.conf"
#define SERVE_MAX_RULES           64
#define SERVE_MAX_SELECTORS       16  /* per kind per rule */
#define SERVE_RATE_MIN_HZ         1.0 /* every rate scry serve takes: file, flags, ctl */
#define SERVE_RATE_MAX_HZ         1000.0

/* One selection rule. Within a rule every non-empty kind must hold (AND); within one kind
 * any listed value may hold (OR). */
typedef struct serve_rule {
    char *name; /* service name for its matches; NULL: derived from the command line */
    char *match_src[SERVE_MAX_SELECTORS];
    regex_t match[SERVE_MAX_SELECTORS]; /* on the command line and the executable path */
    size_t n_match;
    pid_t pid[SERVE_MAX_SELECTORS];
    size_t n_pid;
    uid_t uid[SERVE_MAX_SELECTORS];
    size_t n_uid;
    char *container[SERVE_MAX_SELECTORS]; /* container id or a prefix of it (>= 4 chars) */
    size_t n_container;
    char *cgroup[SERVE_MAX_SELECTORS]; /* cgroup path prefix ("/system.slice/web.service") */
    size_t n_cgroup;
    double rate_hz; /* 0: the global rate */
} serve_rule_t;

typedef struct serve_config {
    char *config_path;  /* the file read (NULL: none) */
    int check_only;     /* --check-config */
    char *out_dir;      /* out-dir */
    double interval_s;  /* interval: seconds per window */
    char *socket_path;  /* socket */
    double rate_hz;     /* rate: per-target samples per second */
    double max_cpu_pct; /* max-cpu: share of one core scry serve may use (0: no budget) */
    char *sampler;      /* sampler: "perf", "ptrace", "bpf", "auto" or NULL (auto) */
    double retention_age_s;
    uint64_t retention_bytes;
    int fmt_collapsed, fmt_flamegraph, fmt_pprof; /* formats */
    uint32_t max_stacks;                          /* distinct stacks per window */
    int all_python;     /* every Python process (default when there is no rule) */
    int proc_connector; /* use the kernel's process-events connector when permitted */
    double scan_interval_s;
    char *host;           /* label; default: gethostname() */
    char *pyroscope_url;  /* NULL: no push */
    char *pyroscope_user; /* basic auth */
    char *pyroscope_password_file;
    char *pyroscope_token_file; /* bearer token */
    char *pyroscope_tenant;     /* X-Scope-OrgID */
    double push_timeout_s;
    char *out_group; /* out-group: readers of the window files (NULL: root only) */
    gid_t out_gid;   /* its gid, (gid_t)-1 for none (set by serve_config_finish) */
    char *spool_dir; /* default: OUT_DIR/spool */
    uint64_t spool_max_bytes;
    serve_rule_t rules[SERVE_MAX_RULES];
    size_t n_rules;
} serve_config_t;

/* Returns a configuration holding the defaults, or NULL when out of memory. */
serve_config_t *serve_config_new(void);

/* Frees CFG and everything it owns (rules, regexes, strings). NULL is a no-op. */
void serve_config_free(serve_config_t *cfg);

/* Reads the INI file PATH into CFG (on top of what it holds). Returns 0; SCRY_E_NOTFOUND
 * when the file does not exist; SCRY_E_INVAL with a message naming the line in MSG for
 * an unknown key, a bad value or a syntax error; SCRY_E_IO when it cannot be read. */
int serve_config_load_file(serve_config_t *cfg, const char *path, char *msg, size_t msglen);

/* Sets one option by its key (as in the file, without "--"). SECTION is NULL for the top
 * level or the service name of a [service NAME] section. Returns 0 or SCRY_E_INVAL with a
 * message in MSG. */
int serve_config_set(serve_config_t *cfg, const char *section, const char *key, const char *value,
                     char *msg, size_t msglen);

/* Parses the arguments after "serve" (ARGV[0] is the first option): --config PATH,
 * --check-config, and --KEY VALUE / --KEY=VALUE for every key (flags without a value for
 * booleans). Loads the config file first (the default path only when it exists), then
 * applies the flags, then fills the derived defaults and checks consistency.
 * Returns a new configuration, or NULL after writing a message to MSG. */
serve_config_t *serve_config_from_args(int argc, char **argv, char *msg, size_t msglen);

/* Fills derived defaults (spool dir, host, all-python when there is no rule) and rejects
 * conflicting or incomplete settings. Returns 0 or SCRY_E_INVAL with a message. */
int serve_config_finish(serve_config_t *cfg, char *msg, size_t msglen);

/* Prints the effective configuration as an INI file on F (what --check-config shows). */
void serve_config_print(const serve_config_t *cfg, FILE *f);

/* Prints the option table (key, value kind, meaning) on F, for --help. */
void serve_config_usage(FILE *f);

#endif
