/* json_in.h - reading untrusted JSON text (scry diff's reports, scry serve's control
 * requests): one strict, depth-bounded json-c parse shared by every reader. */
#ifndef SCRY_REPORT_JSON_IN_H
#define SCRY_REPORT_JSON_IN_H

#include <stddef.h>

#include <json-c/json.h>

/* Parses the LEN bytes of TEXT (untrusted, not necessarily NUL-terminated; LEN at most
 * INT32_MAX) as one JSON document with json-c in strict mode, nested at most DEPTH deep.
 * Returns 0 with *OUT the document (the caller json_object_put()s it) or NULL when the text
 * is not one, *JERR json-c's verdict and *USED the bytes the parser consumed (whatever
 * follows the document is the caller's to judge); or SCRY_E_NOMEM, *OUT NULL. */
int report_json_parse(const char *text, size_t len, int depth, json_object **out,
                      enum json_tokener_error *jerr, size_t *used);

#endif
