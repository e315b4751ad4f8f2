/* cpu_model.c -- this machine's CPU model name (the CPU devices' name in messages and
 * in the tuning keys). */
#include "cpu_isa.h"
#include "internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

void cg__clean_text(char *dst, size_t cap, const char *src) {
    size_t n = 0;
    int space = 1; /* drop leading spaces */
    for (const char *s = src; *s && n + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == ';' || c == '=' || c == '|' || c < 0x20 || c == 0x7f || isspace(c)) c = ' ';
        if (c == ' ') {
            if (space) continue;
            space = 1;
        } else {
            space = 0;
        }
        dst[n++] = (char)c;
    }
    while (n > 0 && dst[n - 1] == ' ') n--;
    dst[n] = '\0';
}

static char g_cpu_model[128];
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void read_cpu_model(void) {
    char line[512], found[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        /* x86: "model name"; arm64: "CPU implementer"/"CPU part" as a fallback. */
        char impl[64] = "", part[64] = "";
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            *colon = '\0';
            const char *val = colon + 1;
            if (!strncmp(line, "model name", 10) && !found[0]) snprintf(found, sizeof found, "%s", val);
            else if (!strncmp(line, "CPU implementer", 15) && !impl[0]) snprintf(impl, sizeof impl, "%s", val);
            else if (!strncmp(line, "CPU part", 8) && !part[0]) snprintf(part, sizeof part, "%s", val);
        }
        fclose(f);
        if (!found[0] && impl[0]) snprintf(found, sizeof found, "cpu implementer %s part %s", impl, part);
    }
    if (!found[0]) {
        struct utsname u;
        snprintf(found, sizeof found, "%s", uname(&u) == 0 ? u.machine : "unknown cpu");
    }
    cg__clean_text(g_cpu_model, sizeof g_cpu_model, found);
    if (!g_cpu_model[0]) snprintf(g_cpu_model, sizeof g_cpu_model, "unknown cpu");
}

const char *cg__cpu_model(void) {
    pthread_once(&g_cpu_once, read_cpu_model);
    return g_cpu_model;
}
