// ops-transformer I/O: safetensors (validated reader, atomic writer).
#ifndef OT_IO_H
#define OT_IO_H
#include "ot/core.h"
#ifdef __cplusplus
extern "C" {
#endif
// (filled in by the io work: see src/io/)
#ifdef __cplusplus
}
#endif
#endif
