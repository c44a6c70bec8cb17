/* api-graph.c - stream capture into graphs, instantiation and replay: each cuGraphLaunch replays the captured
 * work in capture order on the launch stream. */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

pthread_mutex_t api_capture_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct node_array {
    api_op_t *v;
    size_t n, cap;
} node_array_t;

struct CUgraph_st {
    CUcontext ctx;
    node_array_t nodes;
};

struct CUgraphExec_st {
    CUcontext ctx;
    node_array_t nodes;
    bool node_priority;          /* CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY */
    bool mem_nodes;              /* has memory allocation or free nodes */
};

struct api_capture {
    CUgraph graph;
    api_stream_t *origin;
    CUstreamCaptureMode mode;
    bool invalid;
    pthread_t thread;
    unsigned long long id;
    api_stream_t **members;      /* forked-in streams (not the origin) */
    size_t nmembers;
    CUevent *events;             /* recorded in this capture; each holds a reference */
    size_t nevents;
    api_capture_t *next;         /* in the list of active captures */
};

static api_capture_t *active;    /* api_capture_lock */
static _Atomic unsigned nactive;
static unsigned long long capture_next_id = 1;

static int nodes_push(node_array_t *a, const api_op_t *op)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        api_op_t *v = api_calloc(cap, sizeof(*v));
        if (!v)
            return -ENOMEM;
        if (a->n)
            memcpy(v, a->v, a->n * sizeof(*v));
        free(a->v);
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n] = *op;
    a->v[a->n].next = NULL;
    a->n++;
    return 0;
}

/* NULL when out of host memory. */
static CUgraph graph_new(CUcontext ctx)
{
    CUgraph g = api_calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->ctx = ctx;
    if (api_handle_add(g, API_KIND_GRAPH) < 0) {
        free(g);
        return NULL;
    }
    return g;
}

static void graph_free(CUgraph g)
{
    api_handle_del(g);
    api_gmem_nodes_unref(g->nodes.v, g->nodes.n);
    free(g->nodes.v);
    free(g);
}

void api_capture_reset(void)
{
    /* After fork: the parent's captures are abandoned with its streams. */
    active = NULL;
    nactive = 0;
}

bool api_stream_capturing(api_stream_t *s)
{
    if (nactive == 0)
        return false;
    pthread_mutex_lock(&api_capture_lock);
    bool cap = s->cap != NULL;
    pthread_mutex_unlock(&api_capture_lock);
    return cap;
}

void api_capture_invalidate_stream(api_stream_t *s)
{
    pthread_mutex_lock(&api_capture_lock);
    if (s->cap)
        s->cap->invalid = true;
    pthread_mutex_unlock(&api_capture_lock);
}

CUresult api_capture_record(api_stream_t *s, api_op_t *op, bool *taken)
{
    *taken = false;
    if (nactive == 0)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&api_capture_lock);
    api_capture_t *cap = s->cap;
    CUresult rc = CUDA_SUCCESS;
    if (cap && cap->invalid) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (cap) {
        if (op->kind == API_OP_COPY && op->u.copy.staged) {
            /* staged before the capture began (a racing cuStreamBeginCapture): a graph node reads its source
             * at replay time, like any captured copy */
            free(op->u.copy.staged);
            op->u.copy.staged = NULL;
        }
        if (nodes_push(&cap->graph->nodes, op) < 0) {
            cap->invalid = true;  /* the graph would miss this work */
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            s->cap_nodes++;
            s->cap_tail_unjoined = s != cap->origin;
            free(op);            /* captured ops hold no references: the graph keeps the copy */
            *taken = true;
        }
    }
    pthread_mutex_unlock(&api_capture_lock);
    return rc;
}

CUresult api_capture_check_legacy(CUcontext ctx)
{
    if (nactive == 0)
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&ctx->lock);
    pthread_mutex_lock(&api_capture_lock);
    for (api_stream_t *s = ctx->streams; s; s = s->next) {
        if (s->cap && !(s->flags & CU_STREAM_NON_BLOCKING)) {
            s->cap->invalid = true;
            rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    }
    pthread_mutex_unlock(&api_capture_lock);
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

/* The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode), GLOBAL by default. */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* As documented for cuThreadExchangeStreamCaptureMode: a thread in GLOBAL mode may not make potentially
 * unsafe calls while it has a non-relaxed capture of its own or another thread has a GLOBAL capture; in
 * THREAD_LOCAL mode only its own non-relaxed captures count; RELAXED never prohibits. */
CUresult api_capture_check_unsafe(void)
{
    if (nactive == 0 || thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&api_capture_lock);
    for (api_capture_t *c = active; c; c = c->next) {
        bool mine = pthread_equal(c->thread, self);
        if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
            c->invalid = true;   /* the conflicting capture is invalidated */
        }
    }
    pthread_mutex_unlock(&api_capture_lock);
    return rc;
}

void api_capture_event_record(api_stream_t *s, CUevent e)
{
    pthread_mutex_lock(&api_capture_lock);
    api_capture_t *cap = s->cap;
    if (cap) {
        if (e->cap != cap) {
            CUevent *v = realloc(cap->events, (cap->nevents + 1) * sizeof(*v));
            if (v) {
                cap->events = v;
                cap->events[cap->nevents++] = e;
                api_event_ref(e);
            }
        }
        e->cap = cap;
        e->cap_stream = s;
        e->cap_mark = s->cap_nodes;
    }
    pthread_mutex_unlock(&api_capture_lock);
}

CUresult api_capture_wait_event(api_stream_t *s, CUevent e, bool *handled)
{
    *handled = false;
    if (nactive == 0)
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&api_capture_lock);
    api_capture_t *cap = e->cap;
    if (!cap && !s->cap)
        goto out;
    *handled = true;
    if (!cap) {
        /* A capturing stream may not depend on work outside its capture. */
        s->cap->invalid = true;
        rc = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        goto out;
    }
    if (s->cap && s->cap != cap) {
        s->cap->invalid = true;
        cap->invalid = true;
        rc = CUDA_ERROR_STREAM_CAPTURE_MERGE;
        goto out;
    }
    if (cap->invalid) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        goto out;
    }
    if (!s->cap) {
        /* Fork: the waiting stream joins the capture. */
        api_stream_t **m = realloc(cap->members, (cap->nmembers + 1) * sizeof(*m));
        if (!m) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        cap->members = m;
        cap->members[cap->nmembers++] = s;
        s->cap = cap;
        s->cap_nodes = 0;
        s->cap_tail_unjoined = false;
    }
    /* Join: the recording stream's work up to the record is now a dependency of s. */
    api_stream_t *x = e->cap_stream;
    if (x && x != s && e->cap_mark == x->cap_nodes)
        x->cap_tail_unjoined = false;
out:
    pthread_mutex_unlock(&api_capture_lock);
    return rc;
}

/* With api_capture_lock held: detaches every stream and event, unlinks the capture and frees it (not the
 * graph). */
static void capture_end_locked(api_capture_t *cap)
{
    if (cap->origin)
        cap->origin->cap = NULL;
    for (size_t i = 0; i < cap->nmembers; i++)
        cap->members[i]->cap = NULL;
    for (api_capture_t **pp = &active; *pp; pp = &(*pp)->next) {
        if (*pp == cap) {
            *pp = cap->next;
            break;
        }
    }
    nactive--;
    free(cap->members);
}

static void capture_release_events(CUevent *ev, size_t n, api_capture_t *cap)
{
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&api_capture_lock);
        if (ev[i]->cap == cap) {
            ev[i]->cap = NULL;
            ev[i]->cap_stream = NULL;
        }
        pthread_mutex_unlock(&api_capture_lock);
        api_event_unref(ev[i]);
    }
    free(ev);
}

void api_capture_stream_gone(api_stream_t *s)
{
    if (nactive == 0)
        return;
    pthread_mutex_lock(&api_capture_lock);
    api_capture_t *cap = s->cap;
    if (!cap) {
        pthread_mutex_unlock(&api_capture_lock);
        return;
    }
    cap->invalid = true;
    if (s != cap->origin) {
        for (size_t i = 0; i < cap->nmembers; i++) {
            if (cap->members[i] == s) {
                cap->members[i] = cap->members[--cap->nmembers];
                break;
            }
        }
        s->cap = NULL;
        pthread_mutex_unlock(&api_capture_lock);
        return;
    }
    /* The origin is gone: nobody can end this capture any more. */
    capture_end_locked(cap);
    CUevent *ev = cap->events;
    size_t nev = cap->nevents;
    pthread_mutex_unlock(&api_capture_lock);
    capture_release_events(ev, nev, cap);
    graph_free(cap->graph);
    free(cap);
}

/* ---- capture API -------------------------------------------------------------------------------------- */
static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->kind == API_STREAM_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    api_capture_t *cap = api_calloc(1, sizeof(*cap));
    if (!cap)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!(cap->graph = graph_new(s->ctx))) {
        free(cap);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&api_capture_lock);
    if (s->cap) {
        pthread_mutex_unlock(&api_capture_lock);
        graph_free(cap->graph);
        free(cap);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    cap->origin = s;
    cap->mode = mode;
    cap->thread = pthread_self();
    cap->id = capture_next_id++;
    cap->next = active;
    active = cap;
    nactive++;
    s->cap = cap;
    s->cap_nodes = 0;
    s->cap_tail_unjoined = false;
    pthread_mutex_unlock(&api_capture_lock);
    return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, false);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, true);
}

CUresult cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&api_capture_lock);
    api_capture_t *cap = s->cap;
    if (!cap) {
        pthread_mutex_unlock(&api_capture_lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    if (cap->origin != s) {
        cap->invalid = true;
        pthread_mutex_unlock(&api_capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(cap->thread, pthread_self())) {
        pthread_mutex_unlock(&api_capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (!cap->invalid) {
        for (size_t i = 0; i < cap->nmembers; i++)
            if (cap->members[i]->cap_tail_unjoined)
                rc = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    } else {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    capture_end_locked(cap);
    CUevent *ev = cap->events;
    size_t nev = cap->nevents;
    pthread_mutex_unlock(&api_capture_lock);
    capture_release_events(ev, nev, cap);
    if (rc != CUDA_SUCCESS) {
        graph_free(cap->graph);
        *phGraph = NULL;
    } else {
        *phGraph = cap->graph;
    }
    free(cap);
    return rc;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, false);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, true);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *status, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&api_capture_lock);
    if (s->kind == API_STREAM_LEGACY) {
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
        for (api_capture_t *c = active; c; c = c->next)
            if (c->origin && c->origin->ctx == s->ctx && !(c->origin->flags & CU_STREAM_NON_BLOCKING))
                rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (!s->cap) {
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
    } else {
        *status = s->cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    }
    pthread_mutex_unlock(&api_capture_lock);
    return rc;
}

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->kind == API_STREAM_LEGACY)
        return is_capturing(h, status, ptds);
    pthread_mutex_lock(&api_capture_lock);
    api_capture_t *cap = s->cap;
    *status = !cap ? CU_STREAM_CAPTURE_STATUS_NONE
                   : cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (cap && id)
        *id = cap->id;
    if (graph)
        *graph = cap && !cap->invalid ? cap->graph : NULL;
    pthread_mutex_unlock(&api_capture_lock);
    /* Captured work replays in capture order; the dependency set is not exposed as nodes. */
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (ndeps)
        *ndeps = 0;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
                                   CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                        numDependencies_out, false);
}

CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                        numDependencies_out, true);
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
                                   CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                   size_t *numDependencies_out)
{
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out,
                        false);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out)
{
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out,
                        true);
}

CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
    return capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, false);
}

CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
    return capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, true);
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus, false);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus, true);
}

/* ---- graphs ------------------------------------------------------------------------------------------- */
CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *phGraph = graph_new(c);
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
    graph_free(hGraph);
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
        if (nodes_push(&x->nodes, node) < 0)
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
API_ALIAS(cuStreamBeginCapture); API_ALIAS(cuStreamBeginCapture_ptsz); API_ALIAS(cuStreamBeginCapture_v2);
API_ALIAS(cuStreamBeginCapture_v2_ptsz); API_ALIAS(cuStreamEndCapture); API_ALIAS(cuStreamEndCapture_ptsz);
API_ALIAS(cuStreamGetCaptureInfo); API_ALIAS(cuStreamGetCaptureInfo_ptsz); API_ALIAS(cuStreamGetCaptureInfo_v2);
API_ALIAS(cuStreamGetCaptureInfo_v2_ptsz); API_ALIAS(cuStreamGetCaptureInfo_v3);
API_ALIAS(cuStreamGetCaptureInfo_v3_ptsz); API_ALIAS(cuStreamIsCapturing); API_ALIAS(cuStreamIsCapturing_ptsz);
API_ALIAS(cuThreadExchangeStreamCaptureMode);
