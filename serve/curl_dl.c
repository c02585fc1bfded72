/* curl_dl.c - libcurl loaded on first use: see curl_dl.h. */
#include "curl_dl.h"
#include "dl_table.h"
#include "scry_err.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

serve_curl_api_t serve_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_err;
static char load_msg[256];

static void load(void)
{
    static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl-nss.so.4"};
    const scry_dl_fn_t fns[] = {
        {"curl_global_init", &serve_curl.global_init},
        {"curl_easy_init", &serve_curl.easy_init},
        {"curl_easy_cleanup", &serve_curl.easy_cleanup},
        {"curl_easy_reset", &serve_curl.easy_reset},
        {"curl_easy_setopt", &serve_curl.easy_setopt},
        {"curl_easy_getinfo", &serve_curl.easy_getinfo},
        {"curl_easy_perform", &serve_curl.easy_perform},
        {"curl_easy_escape", &serve_curl.easy_escape},
        {"curl_free", &serve_curl.free},
        {"curl_mime_init", &serve_curl.mime_init},
        {"curl_mime_free", &serve_curl.mime_free},
        {"curl_mime_addpart", &serve_curl.mime_addpart},
        {"curl_mime_name", &serve_curl.mime_name},
        {"curl_mime_data", &serve_curl.mime_data},
        {"curl_mime_filename", &serve_curl.mime_filename},
        {"curl_mime_type", &serve_curl.mime_type},
        {"curl_slist_append", &serve_curl.slist_append},
        {"curl_slist_free_all", &serve_curl.slist_free_all},
    };
    if (scry_dl_load(names, sizeof names / sizeof names[0], fns, sizeof fns / sizeof fns[0],
                     load_msg, sizeof load_msg) != 0) {
        load_err = SCRY_E_NOSYS;
        return;
    }
    if (serve_curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_msg, sizeof load_msg, "curl_global_init failed");
        load_err = SCRY_E_NOSYS;
    }
}

int serve_curl_load(char *msg, size_t msglen)
{
    pthread_once(&load_once, load);
    if (load_err && msg && msglen)
        snprintf(msg, msglen, "push: %s", load_msg);
    return load_err;
}
