/* api-graph.c - graphs: create, destroy, nodes, instantiation and replay: each cuGraphLaunch replays the
 * captured work in capture order on the launch stream. */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct CUgraphExec_st {
    CUcontext ctx;
    api_node_array_t nodes;
    bool node_priority;          /* CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY */
    bool mem_nodes;              /* has memory allocation or free nodes */
};

/* ---- graphs ------------------------------------------------------------------------------------------- */
CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *phGraph = api_graph_new(c);
    return *phGraph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The checks of the calls that take a graph or an executable graph: h is a live handle of kind. */
static CUresult check_handle(const void *h, int kind)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    return api_handle_is(h, kind) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    CUresult rc = check_handle(hGraph, API_KIND_GRAPH);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_graph_free(hGraph);
    return CUDA_SUCCESS;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    CUresult rc = check_handle(hGraph, API_KIND_GRAPH);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    size_t n = hGraph->nodes.n;
    if (nodes) {
        for (size_t i = 0; i < *numNodes; i++)
            nodes[i] = i < n ? (CUgraphNode)(void *)&hGraph->nodes.v[i] : NULL;
    }
    *numNodes = n;
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!hNode || !type)
        return CUDA_ERROR_INVALID_VALUE;
    const api_op_t *op = (const api_op_t *)(void *)hNode;
    switch (op->kind) {
    case API_OP_KERNEL: *type = CU_GRAPH_NODE_TYPE_KERNEL; break;
    case API_OP_COPY: *type = CU_GRAPH_NODE_TYPE_MEMCPY; break;
    case API_OP_MEMSET: *type = CU_GRAPH_NODE_TYPE_MEMSET; break;
    case API_OP_HOSTFN: *type = CU_GRAPH_NODE_TYPE_HOST; break;
    case API_OP_MEM_ALLOC: *type = CU_GRAPH_NODE_TYPE_MEM_ALLOC; break;
    case API_OP_MEM_FREE: *type = CU_GRAPH_NODE_TYPE_MEM_FREE; break;
    default: *type = CU_GRAPH_NODE_TYPE_EMPTY; break;
    }
    return CUDA_SUCCESS;
}

#define INSTANTIATE_FLAGS (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
                           CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    CUresult rc = check_handle(hGraph, API_KIND_GRAPH);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phGraphExec || (flags & ~(unsigned long long)INSTANTIATE_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUgraphExec x = api_calloc(1, sizeof(*x));
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->ctx = hGraph->ctx;
    x->node_priority = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY) != 0;
    for (size_t i = 0; i < hGraph->nodes.n; i++) {
        const api_op_t *node = &hGraph->nodes.v[i];
        if (api_graph_push(&x->nodes, node) < 0)
            goto out_free;
        x->mem_nodes |= node->kind == API_OP_MEM_ALLOC || node->kind == API_OP_MEM_FREE;
    }
    if (api_handle_add(x, API_KIND_GRAPHEXEC) < 0)
        goto out_free;
    api_gmem_nodes_ref(x->nodes.v, x->nodes.n);
    *phGraphExec = x;
    return CUDA_SUCCESS;
out_free:
    free(x->nodes.v);
    free(x);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    CUresult rc = api_cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = '\0';
    return rc;
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                            size_t bufferSize)
{
    return api_cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

/* Instantiation with a parameter block (cuda.core's GraphBuilder.complete): the flags of WithFlags, the
 * upload done at once on hUploadStream (simcuda keeps nothing on the device to upload), the result reported. */
static CUresult graph_instantiate_params(CUgraphExec *phGraphExec, CUgraph hGraph,
                                         CUDA_GRAPH_INSTANTIATE_PARAMS *p, bool ptds)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    p->hErrNode_out = NULL;
    if ((p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) && p->hUploadStream) {
        api_stream_t *s;
        CUresult rc = api_ready();
        if (rc == CUDA_SUCCESS)
            rc = api_stream_resolve(p->hUploadStream, ptds, &s);
        if (rc != CUDA_SUCCESS) {
            p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
            return rc;
        }
    }
    CUresult rc = api_cuGraphInstantiateWithFlags(phGraphExec, hGraph, p->flags);
    p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return graph_instantiate_params(phGraphExec, hGraph, instantiateParams, false);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return graph_instantiate_params(phGraphExec, hGraph, instantiateParams, true);
}

/* An upload checks its exec and stream; the graph is already "on the device" once instantiated. */
static CUresult graph_upload(CUgraphExec x, CUstream h, bool ptds)
{
    CUresult rc = check_handle(x, API_KIND_GRAPHEXEC);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_stream_t *s;
    if ((rc = api_stream_resolve(h, ptds, &s)) != CUDA_SUCCESS)
        return rc;
    return s->ctx == x->ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_upload(hGraphExec, hStream, false);
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_upload(hGraphExec, hStream, true);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult rc = check_handle(hGraphExec, API_KIND_GRAPHEXEC);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_handle_del(hGraphExec);
    api_gmem_nodes_unref(hGraphExec->nodes.v, hGraphExec->nodes.n);
    free(hGraphExec->nodes.v);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec x, CUstream h, bool ptds)
{
    CUresult rc = check_handle(x, API_KIND_GRAPHEXEC);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_stream_t *s;
    if ((rc = api_stream_resolve(h, ptds, &s)) != CUDA_SUCCESS)
        return rc;
    if (s->ctx != x->ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = api_ctx_sticky(s->ctx)) != CUDA_SUCCESS)
        return rc;
    if (x->mem_nodes) {
        if (api_stream_capturing(s)) {
            /* CUDA does not allow memory nodes in a child graph */
            api_capture_invalidate_stream(s);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        if ((rc = api_gmem_launch(x->nodes.v, x->nodes.n)) != CUDA_SUCCESS)
            return rc;
    }
    size_t i;
    for (i = 0; i < x->nodes.n && rc == CUDA_SUCCESS; i++) {
        api_op_t *op = api_op_new(API_OP_NOP);
        if (!op) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        *op = x->nodes.v[i];
        op->next = NULL;
        /* Kernels take the launch stream's priority unless the exec honours the captured node priorities. */
        if (op->kind == API_OP_KERNEL && !x->node_priority)
            op->u.k.prio = s->prio;
        api_op_ref(op);
        rc = api_launch_op(s, op, false);   /* a failed free node is freed, which accounts it */
    }
    if (rc != CUDA_SUCCESS && x->mem_nodes) {
        /* Frees that were never queued are done once the part that was queued has run. */
        api_stream_sync(s);
        api_gmem_launch_abort(x->nodes.v, i, x->nodes.n);
    }
    return rc;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, false);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, true);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuGraphCreate); API_ALIAS(cuGraphDestroy); API_ALIAS(cuGraphExecDestroy); API_ALIAS(cuGraphGetNodes);
API_ALIAS(cuGraphInstantiate); API_ALIAS(cuGraphInstantiateWithFlags); API_ALIAS(cuGraphInstantiate_v2);
API_ALIAS(cuGraphInstantiateWithParams); API_ALIAS(cuGraphInstantiateWithParams_ptsz); API_ALIAS(cuGraphUpload);
API_ALIAS(cuGraphUpload_ptsz);
API_ALIAS(cuGraphLaunch); API_ALIAS(cuGraphLaunch_ptsz); API_ALIAS(cuGraphNodeGetType);
