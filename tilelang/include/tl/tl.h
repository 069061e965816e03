// tl/tl.h -- the whole TileLang device header; generated kernels include this.
//
// Every piece is header-only, inline and free of host headers so NVRTC
// compiles it in well under a second.  Architecture-specific pieces (TMA,
// wgmma, setmaxnreg, stmatrix) are templates whose arch check fires only
// when a kernel actually calls them, so this include works for every target.
#pragma once

#include "common.h"
#include "sync.h"
#include "reduce.h"
#include "atomic.h"
#include "mma.h"
#include "ldmatrix.h"
#include "mma_frag.h"
#include "cp_async.h"
#include "mbarrier.h"
#include "tma.h"
#include "wgmma.h"
#include "thread.h"
#include "random.h"
