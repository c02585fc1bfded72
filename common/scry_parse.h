/* scry_parse.h - the one validator per kind of value a user hands scry: numbers with a
 * range, integers, durations, sizes, booleans, names and enum words.
 *
 * The command line (daemon/options.c), scry serve's configuration file and flags
 * (serve/config.c) and control-socket requests (serve/ctl.c, daemon/ctl_client.c) all parse
 * through these, so the same text means the same thing everywhere and is refused the same
 * way. Every parser takes the whole string: no leading or trailing blanks, no NaN or
 * infinity, no hexadecimal, nothing after the number but one of the listed units; a value
 * outside [LO, HI] (after the unit's multiplier) is refused. On refusal OUT is untouched.
 */
#ifndef SCRY_PARSE_H
#define SCRY_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* A unit suffix and what it multiplies by; tables end with {NULL, 0}. Suffixes are matched
 * case-insensitively against everything after the number. */
typedef struct scry_unit {
    const char *suffix;
    double mul;
} scry_unit_t;

extern const scry_unit_t scry_units_seconds[]; /* "", s, ms, m, h, d */
extern const scry_unit_t scry_units_bytes[];   /* "", b, k/kb/kib ... t/tb/tib (powers of 1024) */
extern const scry_unit_t scry_units_percent[]; /* "", % */

/* Parses S as a finite decimal number followed by one of UNITS' suffixes (UNITS NULL: no
 * suffix), multiplies, and checks LO <= value <= HI. Returns 0 with the value in OUT, or
 * SCRY_E_INVAL. */
int scry_parse_quantity(const char *s, const scry_unit_t *units, double lo, double hi, double *out);

/* scry_parse_quantity without units. */
int scry_parse_number(const char *s, double lo, double hi, double *out);

/* A duration ("90", "1.5s", "250ms", "10m", "2h", "7d") in seconds, in [LO, HI]. */
int scry_parse_seconds(const char *s, double lo, double hi, double *out);

/* A size ("4096", "512k", "1M", "2GiB") in bytes, in [LO, HI] (HI at most 2^53). */
int scry_parse_bytes(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* A decimal integer (optional '-', digits only) in [LO, HI]. Returns 0 or SCRY_E_INVAL. */
int scry_parse_int(const char *s, long long lo, long long hi, long long *out);

/* A boolean: yes/no, true/false, on/off, 1/0 (any case). Returns 0 or SCRY_E_INVAL. */
int scry_parse_bool(const char *s, int *out);

/* The words scry_parse_bool accepts, for help texts. */
#define SCRY_PARSE_BOOL_WORDS "yes/no, true/false, on/off, 1/0"

/* Finds the LEN bytes at S (a NUL among them never matches) among the N WORDS. Returns the
 * index, or SCRY_E_INVAL. */
int scry_parse_word(const char *s, size_t len, const char *const *words, size_t n);

/* Checks that the LEN bytes at S are a name: 1 to MAXLEN ASCII letters, digits, '.', '_'
 * or '-', not starting with '.' or '-' (so never "..", a hidden file or an option). A NUL
 * among the LEN bytes is refused. Returns 0 or SCRY_E_INVAL. */
int scry_parse_name(const char *s, size_t len, size_t maxlen);

/* Returns 1 when D is finite and LO <= D <= HI, else 0 (for numbers that arrive already
 * parsed, as in JSON). */
int scry_in_range(double d, double lo, double hi);

#endif
