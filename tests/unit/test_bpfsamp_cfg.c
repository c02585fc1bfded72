/* test_bpfsamp_cfg.c - the BPF program's layout table from pystate's layouts: every
 * generated layout (3.6-3.13) gets its frame family's offsets, within the program's frame
 * copy; a layout that does not fit, and Python 2, are refused with a reason. Where BPF
 * programs can be loaded, the kernel's verifier accepts the program, also with --native
 * (the stack copy, and the task's user registers where the kernel has bpf_task_pt_regs). */
#include <stdio.h>
#include <string.h>

#include "bpfsamp.h"
#include "check.h"
#include "scry_err.h"

static void one_version(int minor)
{
    const pystate_layout_t *L = pystate_layout_for(3, minor);
    CHECK(L != NULL);
    if (!L)
        return;
    struct bpfsamp_cfg c;
    char why[200] = "";
    CHECK_INT(bpfsamp_cfg_for(L, &c, why, sizeof why), ==, 0);
    CHECK(c.frame_hdr_len > 0 && c.frame_hdr_len <= BPFSAMP_FRAME_HDR_MAX);
    CHECK_INT(c.tstate_frame, ==, L->tstate_frame);
    if (minor <= 10) {
        CHECK_INT(c.iframe_code, ==, L->frame_code);
        CHECK_INT(c.iframe_previous, ==, L->frame_back);
        CHECK_INT(c.iframe_instr, ==, L->frame_lasti);
        CHECK_INT(c.instr_kind, ==, minor == 10 ? BPFSAMP_INSTR_LASTI_UNITS : BPFSAMP_INSTR_LASTI);
        CHECK_INT(c.cframe_current_frame, ==, -1);
        CHECK_UINT(c.owner_cstack, ==, BPFSAMP_NO_OWNER);
        CHECK(c.frame_hdr_len >= (uint32_t)L->frame_lasti + 4);
    } else {
        CHECK_INT(c.iframe_code, ==, L->iframe_code);
        CHECK_INT(c.iframe_previous, ==, L->iframe_previous);
        CHECK_INT(c.iframe_instr, ==, L->iframe_instr);
        CHECK_INT(c.code_adaptive, ==, L->code_adaptive);
        CHECK_INT(c.instr_kind, ==, BPFSAMP_INSTR_POINTER);
        /* 3.11/3.12 go through the cframe; 3.13 holds the frame in the thread state */
        CHECK_INT(c.cframe_current_frame, ==, minor <= 12 ? L->cframe_current_frame : -1);
        CHECK_UINT(c.owner_cstack, ==, minor >= 12 ? 3u : BPFSAMP_NO_OWNER);
        CHECK(c.frame_hdr_len >= (uint32_t)L->iframe_owner + 1);
    }
    /* 3.11's is_entry (--native's merge), within the frame copy; none elsewhere */
    CHECK_INT(c.iframe_is_entry, ==, minor == 11 ? L->iframe_is_entry : -1);
    if (minor == 11)
        CHECK(L->iframe_is_entry >= 0 && c.frame_hdr_len >= (uint32_t)L->iframe_is_entry + 1);
    CHECK_UINT(c.native, ==, 0);
}

int main(void)
{
    for (int minor = 6; minor <= 13; minor++)
        one_version(minor);

    /* a frame field past the program's copy, or misaligned: refused, with the version */
    pystate_layout_t bad = *pystate_layout_for(3, 12);
    bad.iframe_instr = BPFSAMP_FRAME_HDR_MAX;
    struct bpfsamp_cfg c;
    char why[200] = "";
    CHECK_INT(bpfsamp_cfg_for(&bad, &c, why, sizeof why), ==, SCRY_E_UNSUPPORTED);
    CHECK(strstr(why, "3.12") != NULL);
    bad = *pystate_layout_for(3, 12);
    bad.iframe_previous += 4;
    CHECK_INT(bpfsamp_cfg_for(&bad, &c, why, sizeof why), ==, SCRY_E_UNSUPPORTED);
    bad.major = 2;
    CHECK_INT(bpfsamp_cfg_for(&bad, &c, why, sizeof why), ==, SCRY_E_UNSUPPORTED);

    /* the verifier accepts the program (where this scry and this process may load it) */
    CHECK_INT(bpfsamp_cfg_for(pystate_layout_for(3, 12), &c, why, sizeof why), ==, 0);
    bpfsamp_t *b = NULL;
    int err = bpfsamp_open(&c, &b, why, sizeof why);
    if (err == SCRY_E_NOSYS || err == SCRY_E_PERM) {
        printf("program not loaded here: %s\n", why);
    } else {
        CHECK_INT(err, ==, 0);
        CHECK(bpfsamp_prog_fd(b) >= 0);
        pid_t tid = 1;
        uint64_t ts = 0x1000;
        CHECK_INT(bpfsamp_set_threads(b, &tid, &ts, 1), ==, 0);
        CHECK_INT(bpfsamp_set_threads(b, NULL, NULL, 0), ==, 0);
        bpfsamp_free(b);
        c.native = 1; /* the 8 MiB ring, the stack copy's path */
        CHECK_INT(bpfsamp_open(&c, &b, why, sizeof why), ==, 0);
        bpfsamp_free(b);
    }
    return check_summary("test_bpfsamp_cfg");
}
