/* curl_dl.h - libcurl loaded on first use (dlopen), not at every scry start.
 *
 * libcurl brings ~30 libraries (TLS, Kerberos, LDAP...) whose loading and relocation cost
 * ~35 ms of CPU at every start of the scry binary (issue 12: `scry dump` answers in 30 ms);
 * only the Pyroscope push needs it. push.c includes this header instead of <curl/curl.h>:
 * the curl_* names below become calls through the loaded table. */
#ifndef SCRY_SERVE_CURL_DL_H
#define SCRY_SERVE_CURL_DL_H

#define CURL_DISABLE_TYPECHECK 1 /* curl_easy_setopt is our pointer, not curl's macro */
#include <curl/curl.h>
#include <stddef.h>

typedef struct serve_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *c);
    void (*easy_reset)(CURL *c);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    CURLcode (*easy_perform)(CURL *c);
    char *(*easy_escape)(CURL *c, const char *s, int len);
    void (*free)(void *p);
    curl_mime *(*mime_init)(CURL *c);
    void (*mime_free)(curl_mime *m);
    curl_mimepart *(*mime_addpart)(curl_mime *m);
    CURLcode (*mime_name)(curl_mimepart *p, const char *name);
    CURLcode (*mime_data)(curl_mimepart *p, const char *data, size_t len);
    CURLcode (*mime_filename)(curl_mimepart *p, const char *name);
    CURLcode (*mime_type)(curl_mimepart *p, const char *type);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
} serve_curl_api_t;

/* The loaded table; every entry is set once serve_curl_load() returned 0. */
extern serve_curl_api_t serve_curl;

/* Loads libcurl (libcurl.so.4, then its gnutls/nss builds) and resolves the functions
 * above, then calls curl_global_init; thread-safe, done once. Returns 0, or
 * SCRY_E_NOSYS with a message in MSG when libcurl or one of its functions is
 * missing (the same message on later calls). */
int serve_curl_load(char *msg, size_t msglen);

#define curl_global_init  serve_curl.global_init
#define curl_easy_init    serve_curl.easy_init
#define curl_easy_cleanup serve_curl.easy_cleanup
#define curl_easy_reset   serve_curl.easy_reset
#undef curl_easy_setopt /* curl.h may define them as macros of themselves */
#undef curl_easy_getinfo
#define curl_easy_setopt    serve_curl.easy_setopt
#define curl_easy_getinfo   serve_curl.easy_getinfo
#define curl_easy_perform   serve_curl.easy_perform
#define curl_easy_escape    serve_curl.easy_escape
#define curl_free           serve_curl.free
#define curl_mime_init      serve_curl.mime_init
#define curl_mime_free      serve_curl.mime_free
#define curl_mime_addpart   serve_curl.mime_addpart
#define curl_mime_name      serve_curl.mime_name
#define curl_mime_data      serve_curl.mime_data
#define curl_mime_filename  serve_curl.mime_filename
#define curl_mime_type      serve_curl.mime_type
#define curl_slist_append   serve_curl.slist_append
#define curl_slist_free_all serve_curl.slist_free_all

#endif
