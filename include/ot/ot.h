// ops-transformer umbrella header.
#ifndef OT_OT_H
#define OT_OT_H
#include "ot/core.h"
#include "ot/ops.h"
#include "ot/attn.h"
#include "ot/quant.h"
#include "ot/io.h"
#include "ot/data.h"
#include "ot/model.h"
#include "ot/dist.h"
#include "ot/train.h"
#include "ot/plan.h"
#include "ot/infer.h"
#include "ot/serve.h"
#endif
