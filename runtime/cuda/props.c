/* props.c -- a device's clocks, memory and driver version, read through the process's
 * driver (loader.c), for reports such as `chunkgen bench`'s device block. */
#include "cg_cuda.h"

#include <string.h>

/* CUdevice_attribute values (cuda.h): kHz, kHz, bits. */
#define CU_DEVICE_ATTRIBUTE_CLOCK_RATE 13
#define CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE 36
#define CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH 37

cg_status cg__cuda_props(int ordinal, cg_cuda_props *p) {
    memset(p, 0, sizeof *p);
    const cg_cu_api *cu = cg__cu_api(NULL);
    CUdevice dev = 0;
    if (!cu || cu->cuInit(0) != CUDA_SUCCESS || cu->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return CG_ENODEV;
    int v = 0;
    if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) == CUDA_SUCCESS) p->clock_mhz = v * 1e-3;
    if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) == CUDA_SUCCESS)
        p->mem_clock_mhz = v * 1e-3;
    if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev) == CUDA_SUCCESS) p->bus_bits = v;
    size_t bytes = 0;
    if (cu->cuDeviceTotalMem && cu->cuDeviceTotalMem(&bytes, dev) == CUDA_SUCCESS)
        p->mem_gb = (double)bytes / (1024.0 * 1024 * 1024);
    if (cu->cuDriverGetVersion(&v) == CUDA_SUCCESS) p->driver = v;
    return CG_OK;
}
