/* dlhost.h — the whole dlhost plugin ABI in one include. */
#ifndef DLHOST_H
#define DLHOST_H

#include "dlhost/dlhost_abi.h"
#include "dlhost/dlhost_backend.h"
#include "dlhost/dlhost_comm.h"
#include "dlhost/dlhost_graph.h"
#include "dlhost/dlhost_network.h"

#endif /* DLHOST_H */
