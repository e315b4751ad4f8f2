/* elf_section.h -- one section of an ELF64 little-endian image (a CUBIN), for the tests:
 * the mock driver (tests/cuda_mock) and test_cuda.c read CUBINs with it. Header-only
 * (the mock is its own shared library). */
#ifndef CG_TEST_ELF_SECTION_H
#define CG_TEST_ELF_SECTION_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Section `name`: 1 with its size and, for sections with contents, *data (NULL for
 * SHT_NOBITS); 0 when absent or the image is malformed. */
static inline int cg_test_elf_find(const unsigned char *img, size_t len, const char *name, const unsigned char **data,
                                   size_t *size) {
    if (len < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 /* ELFCLASS64 */) return 0;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&shentsize, img + 0x3A, 2);
    memcpy(&shnum, img + 0x3C, 2);
    memcpy(&shstrndx, img + 0x3E, 2);
    if (shentsize < 64 || shstrndx >= shnum || shoff > len || (uint64_t)shnum * shentsize > len - shoff) return 0;
    const unsigned char *sh = img + shoff;
    uint64_t stroff, strsize;
    memcpy(&stroff, sh + (size_t)shstrndx * shentsize + 24, 8);
    memcpy(&strsize, sh + (size_t)shstrndx * shentsize + 32, 8);
    if (stroff > len || strsize > len - stroff) return 0;
    for (unsigned i = 0; i < shnum; i++) {
        const unsigned char *h = sh + (size_t)i * shentsize;
        uint32_t nm, type;
        uint64_t off, sz;
        memcpy(&nm, h, 4);
        memcpy(&type, h + 4, 4);
        memcpy(&off, h + 24, 8);
        memcpy(&sz, h + 32, 8);
        if (nm >= strsize || strnlen((const char *)img + stroff + nm, strsize - nm) == strsize - nm) continue;
        if (strcmp((const char *)img + stroff + nm, name) != 0) continue;
        *size = (size_t)sz;
        *data = NULL;
        if (type != 8 /* SHT_NOBITS */) {
            if (off > len || sz > len - off) return 0;
            *data = img + off;
        }
        return 1;
    }
    return 0;
}

#endif
