/* ptxas_log.c -- parse a ptxas -v log (ptxas_log.h). */
#include "ptxas_log.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Number just before `tag` on the line containing it, e.g. "12 bytes spill stores". */
static int64_t num_before(const char *line, const char *end, const char *tag, int *found) {
    size_t tl = strlen(tag);
    for (const char *p = line; p + tl <= end; p++) {
        if (memcmp(p, tag, tl) != 0) continue;
        const char *q = p;
        while (q > line && q[-1] == ' ') q--;
        const char *e = q;
        while (q > line && isdigit((unsigned char)q[-1])) q--;
        if (q == e) return 0;
        *found = 1;
        return strtoll(q, NULL, 10);
    }
    return 0;
}

void cg__ptxas_parse(const char *log, cg_ptxas_info *out) {
    memset(out, 0, sizeof *out);
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        int f = 0;
        /* "ptxas info : Used 40 registers, used 1 barriers, 1024 bytes smem, ..." */
        const char *u = strstr(line, "Used ");
        if (u && u < end) {
            int64_t r = num_before(u, end, " registers", &f);
            if (f) {
                out->found = 1;
                if (r > out->registers) out->registers = (int)r;
            }
            f = 0;
            int64_t s = num_before(u, end, " bytes smem", &f);
            if (f && s > out->smem) out->smem = s;
        }
        /* "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" */
        f = 0;
        int64_t v = num_before(line, end, " bytes spill stores", &f);
        if (f && v > out->spill_stores) out->spill_stores = v;
        f = 0;
        v = num_before(line, end, " bytes spill loads", &f);
        if (f && v > out->spill_loads) out->spill_loads = v;
        f = 0;
        v = num_before(line, end, " bytes stack frame", &f);
        if (f && v > out->stack) out->stack = v;
        line = *end ? end + 1 : end;
    }
}
