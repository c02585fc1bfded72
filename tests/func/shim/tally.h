/* tally.h - what shim_harness and inject_attach count of the events they drain from a ring:
 * the weight of every code object anywhere in an event's stack, and the net bytes of the
 * sampled blocks still live (an ALLOC's weight stays on its code objects until its FREE).
 * Header-only (static functions on a tally_t the caller owns), as each program is one
 * executable. */
#ifndef SHIM_TEST_TALLY_H
#define SHIM_TEST_TALLY_H

#include "ring_consumer.h"

#include <stdint.h>
#include <stdlib.h>

#define TALLY_NCODES (1u << 16)
#define TALLY_NLIVE  (1u << 16)

typedef struct tally_code {
    uint64_t code;
    int64_t w[4][2]; /* [kind][origin]; kind 0 (no ring kind): net, allocated minus freed */
} tally_code_t;

typedef struct tally_live {
    uint64_t addr; /* 0 empty, 1 deleted */
    uint64_t weight;
    uint32_t ncodes;
    uint64_t codes[SCRY_RING_MAX_FRAMES];
} tally_live_t;

typedef struct tally {
    tally_code_t *codes; /* TALLY_NCODES, open addressing */
    tally_live_t *lives; /* TALLY_NLIVE */
    int64_t net_origin[2];
} tally_t;

/* Allocates T's tables. Returns 0, or -1 (out of memory; tally_free still fine). */
__attribute__((unused)) static int tally_init(tally_t *t)
{
    t->codes = calloc(TALLY_NCODES, sizeof *t->codes);
    t->lives = calloc(TALLY_NLIVE, sizeof *t->lives);
    t->net_origin[0] = t->net_origin[1] = 0;
    return t->codes && t->lives ? 0 : -1;
}

__attribute__((unused)) static void tally_free(tally_t *t)
{
    free(t->codes);
    free(t->lives);
    t->codes = NULL;
    t->lives = NULL;
}

static void tally_add_code(tally_t *t, uint64_t code, int kind, int origin, int64_t w)
{
    uint32_t i = (uint32_t)((code >> 3) * 0x9e3779b97f4a7c15ull >> 48);
    for (unsigned p = 0; p < TALLY_NCODES; p++, i = (i + 1) & (TALLY_NCODES - 1)) {
        if (t->codes[i].code == code || t->codes[i].code == 0) {
            t->codes[i].code = code;
            t->codes[i].w[kind][origin] += w;
            return;
        }
    }
}

static tally_live_t *tally_live_find(tally_t *t, uint64_t addr, int insert)
{
    uint32_t i = (uint32_t)((addr >> 4) * 0x9e3779b97f4a7c15ull >> 48);
    tally_live_t *tomb = NULL;
    for (unsigned p = 0; p < TALLY_NLIVE; p++, i = (i + 1) & (TALLY_NLIVE - 1)) {
        if (t->lives[i].addr == addr)
            return &t->lives[i];
        if (t->lives[i].addr == 1 && !tomb)
            tomb = &t->lives[i];
        if (t->lives[i].addr == 0)
            return insert ? (tomb ? tomb : &t->lives[i]) : NULL;
    }
    return insert ? tomb : NULL;
}

/* The net part of E: an ALLOC's block remembered with its distinct code objects, which
 * get its weight; a FREE of a remembered block takes that weight back. */
static void tally_net(tally_t *t, const ringc_event_t *e)
{
    int o = e->origin;
    if (e->kind == SCRY_RING_ALLOC) {
        tally_live_t *l = tally_live_find(t, e->addr, 1);
        if (!l)
            return;
        l->addr = e->addr;
        l->weight = e->weight;
        l->ncodes = 0;
        for (uint32_t i = 0; i < e->nframes; i++) {
            int dup = 0;
            for (uint32_t j = 0; j < l->ncodes; j++)
                dup |= l->codes[j] == e->frames[i].code;
            if (!dup)
                l->codes[l->ncodes++] = e->frames[i].code;
        }
        for (uint32_t j = 0; j < l->ncodes; j++)
            tally_add_code(t, l->codes[j], 0, o, (int64_t)e->weight);
        t->net_origin[o] += (int64_t)e->weight;
    } else if (e->kind == SCRY_RING_FREE) {
        tally_live_t *l = tally_live_find(t, e->addr, 0);
        if (!l)
            return;
        for (uint32_t j = 0; j < l->ncodes; j++)
            tally_add_code(t, l->codes[j], 0, o, -(int64_t)l->weight);
        t->net_origin[o] -= (int64_t)l->weight;
        l->addr = 1;
    }
}

/* Counts E: its weight on each distinct code object of its stack (under its kind and
 * origin), and its net part (tally_net). */
__attribute__((unused)) static void tally_event(tally_t *t, const ringc_event_t *e)
{
    tally_net(t, e);
    for (uint32_t i = 0; i < e->nframes; i++) {
        int dup = 0;
        for (uint32_t j = 0; j < i; j++)
            dup |= e->frames[j].code == e->frames[i].code;
        if (!dup)
            tally_add_code(t, e->frames[i].code, e->kind, e->origin, (int64_t)e->weight);
    }
}

/* Polls R into BUF (CAP events) and hands each event to FN, until the ring is empty (at
 * most 1000 rounds). */
__attribute__((unused)) static void tally_drain(ringc_t *r, ringc_event_t *buf, size_t cap,
                                                void (*fn)(const ringc_event_t *))
{
    for (int rounds = 0; rounds < 1000; rounds++) {
        size_t n = 0;
        if (ringc_poll(r, buf, cap, &n) != 0 || n == 0)
            return;
        for (size_t i = 0; i < n; i++)
            fn(&buf[i]);
    }
}

#endif
