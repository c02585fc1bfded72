/* log.h - the log of scry serve: one line per event on stderr (the journal adds the time). */
#ifndef SCRY_SERVE_LOG_H
#define SCRY_SERVE_LOG_H

/* Writes "scry serve: " + the formatted message + "\n" to stderr in one write, so lines of
 * several threads never interleave. Newlines inside the message become spaces. */
void serve_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
