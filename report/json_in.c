/* json_in.c - the strict, depth-bounded parse of untrusted JSON text (json_in.h). */
#include "json_in.h"

#include "scry_err.h"

int report_json_parse(const char *text, size_t len, int depth, json_object **out,
                      enum json_tokener_error *jerr, size_t *used)
{
    *out = NULL;
    *jerr = json_tokener_success;
    *used = 0;
    json_tokener *tok = json_tokener_new_ex(depth);
    if (!tok)
        return SCRY_E_NOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    *out = json_tokener_parse_ex(tok, text, (int)len);
    *jerr = json_tokener_get_error(tok);
    *used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    return 0;
}
