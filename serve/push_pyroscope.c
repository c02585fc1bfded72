/* push_pyroscope.c - the push's Pyroscope backend (push_backend.h): Pyroscope's HTTP
 * ingest API.
 *
 * A window is posted as
 *   POST URL/ingest?name=SERVICE{k=v,...}&from=F&until=U&format=pprof&sampleRate=HZ
 *        &spyName=scry
 * with the pprof profile as the multipart/form-data field "profile"; the query is what the
 * spool keeps as the window's metadata. A 2xx answer delivers it; a 4xx answer (except 408
 * and 429) rejects it for good; anything else is retried. The tenant goes in
 * X-Scope-OrgID. */
#include "push_backend.h"
#include "scry_err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int key_ok(const char *k)
{
    if (!k || !(isalpha((unsigned char)k[0]) || k[0] == '_'))
        return 0;
    for (const char *c = k; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_')
            return 0;
    return strlen(k) <= 64;
}

int serve_push_app_name(const char *service, const serve_push_label_t *labels, size_t n, char *out,
                        size_t outlen)
{
    size_t sl = strlen(service);
    if (sl == 0 || sl > 64)
        return SCRY_E_INVAL;
    for (size_t i = 0; i < sl; i++)
        if (!isalnum((unsigned char)service[i]) && !strchr("._-", service[i]))
            return SCRY_E_INVAL;
    size_t o = 0;
    int w = snprintf(out, outlen, "%s{", service);
    if (w < 0 || (size_t)w >= outlen)
        return SCRY_E_TRUNC;
    o = (size_t)w;
    for (size_t i = 0; i < n; i++) {
        if (!key_ok(labels[i].key))
            return SCRY_E_INVAL;
        w = snprintf(out + o, outlen - o, "%s%s=", i ? "," : "", labels[i].key);
        if (w < 0 || (size_t)w >= outlen - o)
            return SCRY_E_TRUNC;
        o += (size_t)w;
        const char *v = labels[i].value ? labels[i].value : "";
        for (size_t k = 0; v[k] && k < 256; k++) {
            if (o + 2 >= outlen)
                return SCRY_E_TRUNC;
            unsigned char ch = (unsigned char)v[k];
            out[o++] = (ch < 0x20 || ch == 0x7f || strchr(",{}=\"", ch)) ? '_' : (char)ch;
        }
    }
    if (o + 2 > outlen)
        return SCRY_E_TRUNC;
    out[o++] = '}';
    out[o] = '\0';
    return 0;
}

/* The query of the ingest request: the application name (escaped), the window's times,
 * its rate. */
static int pyroscope_encode(const serve_push_window_t *win, char *out, size_t outlen)
{
    char name[2048];
    int err = serve_push_app_name(win->service, win->labels, win->n_labels, name, sizeof name);
    if (err)
        return err;
    CURL *c = curl_easy_init();
    if (!c)
        return SCRY_E_NOMEM;
    char *esc = curl_easy_escape(c, name, 0);
    curl_easy_cleanup(c);
    if (!esc)
        return SCRY_E_NOMEM;
    int q = snprintf(out, outlen,
                     "name=%s&from=%lld&until=%lld&format=pprof&sampleRate=%d&spyName=scry", esc,
                     (long long)win->from, (long long)win->until, (int)(win->rate_hz + 0.5));
    curl_free(esc);
    if (q < 0 || (size_t)q >= outlen)
        return SCRY_E_TRUNC;
    return q;
}

static int pyroscope_prepare(serve_push_request_t *r, const char *base_url, const char *meta,
                             const void *body, size_t len)
{
    char url[8192];
    size_t ul = strlen(base_url);
    while (ul > 0 && base_url[ul - 1] == '/')
        ul--;
    snprintf(url, sizeof url, "%.*s/ingest?%s", (int)ul, base_url, meta);
    curl_easy_setopt(r->curl, CURLOPT_URL, url);
    r->mime = curl_mime_init(r->curl);
    curl_mimepart *part = curl_mime_addpart(r->mime);
    curl_mime_name(part, "profile");
    if (curl_mime_data(part, (const char *)body, len) != CURLE_OK)
        return SCRY_E_NOMEM;
    curl_mime_filename(part, "profile.pprof");
    curl_mime_type(part, "application/octet-stream");
    curl_easy_setopt(r->curl, CURLOPT_MIMEPOST, r->mime);
    return 0;
}

static enum serve_push_verdict pyroscope_classify(long status)
{
    if (status >= 200 && status < 300)
        return SERVE_PUSH_DONE;
    if (status >= 400 && status < 500 && status != 408 && status != 429)
        return SERVE_PUSH_REJECT;
    return SERVE_PUSH_RETRY;
}

const serve_push_backend_t serve_push_pyroscope = {.name = "pyroscope",
                                                   .tenant_header = "X-Scope-OrgID",
                                                   .encode = pyroscope_encode,
                                                   .prepare = pyroscope_prepare,
                                                   .classify = pyroscope_classify};
