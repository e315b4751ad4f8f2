/* sweep_sample.c -- the covering sample of a sweep's configs (see sweep_sample.h). */
#include "sweep_sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cg_sweep_full(void) {
    const char *e = getenv("CHUNKGEN_TEST_SWEEP");
    return e && strcmp(e, "full") == 0;
}

static int env_stride(void) {
    const char *e = getenv("CHUNKGEN_TEST_CONFIG_STRIDE");
    return e && atoi(e) > 0 ? atoi(e) : 0;
}

/* ------------------------------------------------------------- facts */

/* The facts a sample must cover, interned: each config lists the ids of its facts. */
typedef struct facts {
    char **text; /* a plain list, searched linearly per insert (a few hundred facts) */
    int n, cap;
} facts;

static int fact_id(facts *f, const char *t) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->text[i], t) == 0) return i;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 256;
        char **nt = realloc(f->text, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        f->text = nt;
        f->cap = cap;
    }
    f->text[f->n] = strdup(t);
    return f->text[f->n] ? f->n++ : -1;
}

typedef struct idlist {
    int *id;
    int n, cap;
} idlist;

static void push(idlist *l, int id) {
    if (id < 0) return;
    for (int i = 0; i < l->n; i++)
        if (l->id[i] == id) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        int *ni = realloc(l->id, (size_t)cap * sizeof *ni);
        if (!ni) return;
        l->id = ni;
        l->cap = cap;
    }
    l->id[l->n++] = id;
}

static int is_int(const char *s) {
    if (*s == '-') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

int cg_sweep_same_cfg(const cg_cfg *a, const cg_cfg *b) {
    if (a->n != b->n) return 0;
    for (int j = 0; j < a->n; j++)
        if (strcmp(a->kv[j].key, b->kv[j].key) || strcmp(a->kv[j].val, b->kv[j].val)) return 0;
    return 1;
}

int cg_sweep_cfg_in(const cg_cfg *list, int n, const cg_cfg *c) {
    for (int i = 0; i < n; i++)
        if (cg_sweep_same_cfg(&list[i], c)) return 1;
    return 0;
}

int cg_sweep_union(cg_cfg *const *space, const int *nspace, int ns, const char *prec, const cg_cfg ***cfgs,
                   int **pick_of) {
    int cap = 0;
    for (int i = 0; i < ns; i++) cap += nspace[i];
    *cfgs = calloc((size_t)cap + 1, sizeof **cfgs);
    *pick_of = calloc((size_t)cap + 1, sizeof **pick_of);
    if (!*cfgs || !*pick_of) {
        free(*cfgs);
        free(*pick_of);
        *cfgs = NULL;
        *pick_of = NULL;
        return 0;
    }
    int total = 0, rot = 0;
    for (int i = 0; i < ns; i++) {
        for (int j = 0; j < nspace[i]; j++) {
            const cg_cfg *cf = &space[i][j];
            if (prec && strcmp(cg__cfg_str(cf, "precision", ""), prec)) continue;
            int seen = 0;
            for (int a = 0; a < i && !seen; a++) seen = cg_sweep_cfg_in(space[a], nspace[a], cf);
            if (seen) continue;
            int pick = -1;
            for (int t = 0; t < ns && pick < 0; t++) {
                const int cand = (rot + t) % ns;
                if (cg_sweep_cfg_in(space[cand], nspace[cand], cf)) pick = cand;
            }
            if (pick < 0) continue; /* cannot happen: space i holds it */
            rot = (pick + 1) % ns;
            (*cfgs)[total] = cf;
            (*pick_of)[total++] = pick;
        }
    }
    return total;
}

static int in_union(const cg_cfg *const *cfgs, int n, const cg_cfg *c) {
    for (int i = 0; i < n; i++)
        if (cg_sweep_same_cfg(cfgs[i], c)) return 1;
    return 0;
}

/* The integer value of key j next to c's in direction dir (+1 larger, -1 smaller) among
 * the values the union gives that key; 0 when c's is the last one that way. */
static int next_value(const cg_cfg *const *cfgs, int n, const char *key, long long v, int dir, long long *out) {
    int found = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cfgs[i]->n; j++) {
            if (strcmp(cfgs[i]->kv[j].key, key) || !is_int(cfgs[i]->kv[j].val)) continue;
            long long w = atoll(cfgs[i]->kv[j].val);
            if (dir > 0 ? w > v && (!found || w < *out) : w < v && (!found || w > *out)) {
                *out = w;
                found = 1;
            }
        }
    return found;
}

/* Greedy cover of the facts of kind `which` (0 boundary, 1 pairs): add to keep the config
 * with the most uncovered facts of that kind (ties: most uncovered of the other kind,
 * then the earlier config) until none is left. covered: the facts of the kept configs. */
static void cover(const idlist *const lists[2], int n, unsigned char *keep, unsigned char *covered, int which) {
    for (;;) {
        int best = -1, bmain = 0, bother = 0;
        for (int i = 0; i < n; i++) {
            if (keep[i]) continue;
            int m = 0, o = 0;
            for (int f = 0; f < lists[which][i].n; f++) m += !covered[lists[which][i].id[f]];
            for (int f = 0; f < lists[!which][i].n; f++) o += !covered[lists[!which][i].id[f]];
            if (m > bmain || (m == bmain && m > 0 && o > bother)) best = i, bmain = m, bother = o;
        }
        if (best < 0) return;
        keep[best] = 1;
        for (int w = 0; w < 2; w++)
            for (int f = 0; f < lists[w][best].n; f++) covered[lists[w][best].id[f]] = 1;
    }
}

static void sample(const cg_cfg *const *cfgs, int n, cg_sweep_strength st, unsigned char *keep) {
    if (n <= 0) return;
    facts fs = {0};
    idlist *pairs = calloc((size_t)n + 1, sizeof *pairs), *bound = calloc((size_t)n + 1, sizeof *bound);
    if (!pairs || !bound) { /* no memory: run everything rather than less */
        memset(keep, 1, (size_t)n);
        free(pairs);
        free(bound);
        return;
    }
    char t[160];
    for (int i = 0; i < n; i++) {
        const cg_cfg *c = cfgs[i];
        for (int a = 0; a < c->n; a++) {
            snprintf(t, sizeof t, "%s=%s", c->kv[a].key, c->kv[a].val);
            push(&pairs[i], fact_id(&fs, t)); /* single values (a one-key space has no pairs) */
            for (int b = a + 1; st == CG_SWEEP_PAIRS && b < c->n; b++) {
                snprintf(t, sizeof t, "%s=%s|%s=%s", c->kv[a].key, c->kv[a].val, c->kv[b].key, c->kv[b].val);
                push(&pairs[i], fact_id(&fs, t));
            }
            if (!is_int(c->kv[a].val)) continue;
            long long v = atoll(c->kv[a].val), w = 0;
            for (int dir = -1; dir <= 1; dir += 2) {
                if (!next_value(cfgs, n, c->kv[a].key, v, dir, &w)) continue;
                cg_cfg nb = *c;
                snprintf(nb.kv[a].val, sizeof nb.kv[a].val, "%lld", w);
                if (in_union(cfgs, n, &nb)) continue;
                snprintf(t, sizeof t, "edge%+d:%s=%s", dir, c->kv[a].key, c->kv[a].val);
                push(&bound[i], fact_id(&fs, t));
            }
        }
    }
    unsigned char *covered = calloc((size_t)fs.n + 1, 1);
    if (!covered) {
        memset(keep, 1, (size_t)n);
    } else {
        const idlist *lists[2] = {bound, pairs};
        cover(lists, n, keep, covered, 0);
        cover(lists, n, keep, covered, 1);
    }
    free(covered);
    for (int i = 0; i < n; i++) {
        free(pairs[i].id);
        free(bound[i].id);
    }
    free(pairs);
    free(bound);
    for (int i = 0; i < fs.n; i++) free(fs.text[i]);
    free(fs.text);
}

/* ------------------------------------------------------------- selection */

void cg_sweep_select(const cg_cfg *const *cfgs, int n, cg_sweep_strength st, cg_sweep_sel *out) {
    memset(out, 0, sizeof *out);
    out->n = n < 0 ? 0 : n;
    out->keep = calloc((size_t)out->n + 1, 1);
    if (!out->keep) return;
    const int stride = env_stride();
    if (cg_sweep_full()) {
        out->mode = "full";
        memset(out->keep, 1, (size_t)out->n);
    } else if (stride) {
        out->mode = "stride";
        out->stride = stride;
        for (int i = 0; i < out->n; i += stride) out->keep[i] = 1;
    } else {
        out->mode = st == CG_SWEEP_PAIRS ? "pairs" : "values";
        sample(cfgs, out->n, st, out->keep);
    }
    for (int i = 0; i < out->n; i++) out->nkept += out->keep[i];
}

void cg_sweep_select_array(const cg_cfg *cfgs, int n, cg_sweep_strength st, cg_sweep_sel *out) {
    const cg_cfg **p = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *p);
    for (int i = 0; p && i < n; i++) p[i] = &cfgs[i];
    if (p) cg_sweep_select(p, n, st, out);
    else memset(out, 0, sizeof *out);
    free(p);
}

void cg_sweep_sel_free(cg_sweep_sel *s) {
    free(s->keep);
    memset(s, 0, sizeof *s);
}

int cg_sweep_keeps(const cg_sweep_sel *s, int i) { return s->keep && i >= 0 && i < s->n && s->keep[i]; }

const char *cg_sweep_describe(const cg_sweep_sel *s, char *buf, size_t cap) {
    if (s->mode && strcmp(s->mode, "stride") == 0)
        snprintf(buf, cap, "%d of %d configs (every %d-th)", s->nkept, s->n, s->stride);
    else
        snprintf(buf, cap, "%d of %d configs (%s)", s->nkept, s->n, s->mode ? s->mode : "none");
    return buf;
}
