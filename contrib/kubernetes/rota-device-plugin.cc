// rota-device-plugin.cc - the kubelet's Device Plugin API (v1beta1, grpc++) over rota: registration, one service
// per priority class, health from rotad, re-registration when the kubelet restarts.
#include "contrib/kubernetes/kdp.h"

#include "api.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Threads: main (signals; the kubelet's sockets: start the services, register, and again whenever the kubelet
 * restarts, which it shows by a new kubelet.sock and by removing the plugins' sockets), the rotad watcher (an
 * observer connection: while it is open the node's GPUs are healthy; when rotad's end closes they are not,
 * until it is back), and grpc++'s own threads serving the kubelet's calls. The state the watcher publishes is
 * one struct under one mutex; every ListAndWatch stream waits on its condition variable for a new generation.
 */

namespace kdp {
namespace {

void logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void logf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rota-device-plugin: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

constexpr int MAX_SERVER_THREADS = 32; // the kubelet's calls in flight (each ListAndWatch holds one)
constexpr auto REGISTER_TIMEOUT = std::chrono::seconds(5);
constexpr char API_VERSION[] = "v1beta1";

struct State {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t gen = 1;
    std::vector<kdp_gpu_t> gpus; // every GPU rotad listed since this plugin started, in order of discovery
    std::vector<bool> served;    // listed by the rotad that serves now
    std::vector<int> numa;       // each GPU's NUMA node (-1: none known), for the kubelet's topology manager
    bool up = false;
    bool stopping = false;
};

class Plugin final : public v1beta1::DevicePlugin::Service {
  public:
    Plugin(const Config &cfg, State &st, unsigned prio)
        : cfg_(cfg), st_(st), prio_(prio), resource_(cfg.resource_prefix + "-" + kdp_prio_name(prio))
    {
    }
    const std::string &resource() const { return resource_; }

    grpc::Status GetDevicePluginOptions(grpc::ServerContext *, const v1beta1::Empty *,
                                        v1beta1::DevicePluginOptions *o) override
    {
        o->set_pre_start_required(false);
        o->set_get_preferred_allocation_available(true);
        return grpc::Status::OK;
    }

    grpc::Status ListAndWatch(grpc::ServerContext *ctx, const v1beta1::Empty *,
                              grpc::ServerWriter<v1beta1::ListAndWatchResponse> *w) override
    {
        uint64_t sent = 0;
        std::unique_lock<std::mutex> lk(st_.mu);
        while (!st_.stopping && !ctx->IsCancelled()) {
            if (sent == st_.gen) {
                st_.cv.wait_for(lk, std::chrono::milliseconds(250));
                continue;
            }
            v1beta1::ListAndWatchResponse r;
            unsigned healthy = 0;
            for (size_t i = 0; i < st_.gpus.size(); i++) {
                bool ok = st_.up && st_.served[i];
                for (unsigned k = 0; k < units_of(st_.gpus[i], cfg_.unit); k++) {
                    v1beta1::Device *d = r.add_devices();
                    d->set_id(unit_id(st_.gpus[i], k));
                    d->set_health(ok ? "Healthy" : "Unhealthy");
                    if (st_.numa[i] >= 0) d->mutable_topology()->add_nodes()->set_id(st_.numa[i]);
                    healthy += ok;
                }
            }
            sent = st_.gen;
            lk.unlock();
            if (cfg_.debug)
                logf("%s: ListAndWatch: %d devices, %u healthy", resource_.c_str(), r.devices_size(), healthy);
            if (!w->Write(r)) {
                logf("%s: the kubelet closed ListAndWatch", resource_.c_str());
                return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream closed");
            }
            lk.lock();
        }
        return grpc::Status::OK;
    }

    grpc::Status GetPreferredAllocation(grpc::ServerContext *, const v1beta1::PreferredAllocationRequest *req,
                                        v1beta1::PreferredAllocationResponse *resp) override
    {
        std::vector<kdp_gpu_t> gpus = served_gpus();
        for (const auto &c : req->container_requests()) {
            std::vector<std::string> avail(c.available_deviceids().begin(), c.available_deviceids().end());
            std::vector<std::string> must(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
            std::vector<std::string> pick =
                units_prefer(gpus, cfg_.unit, avail, must, c.allocation_size(), &Plugin::place, this);
            auto *o = resp->add_container_responses();
            for (const std::string &id : pick) o->add_deviceids(id);
        }
        return grpc::Status::OK;
    }

    grpc::Status Allocate(grpc::ServerContext *, const v1beta1::AllocateRequest *req,
                          v1beta1::AllocateResponse *resp) override
    {
        std::vector<kdp_gpu_t> gpus;
        std::vector<bool> served;
        bool up;
        {
            std::lock_guard<std::mutex> lk(st_.mu);
            gpus = st_.gpus;
            served = st_.served;
            up = st_.up;
        }
        if (!up) return refuse(grpc::StatusCode::UNAVAILABLE, "rotad does not serve this node (" + cfg_.socket + ")");
        for (const auto &c : req->container_requests()) {
            std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
            int g;
            unsigned n;
            std::string why;
            if (units_check(gpus, cfg_.unit, ids, &g, &n, &why)) return refuse(grpc::StatusCode::INVALID_ARGUMENT, why);
            if (!served[g]) return refuse(grpc::StatusCode::UNAVAILABLE, std::string(gpus[g].uuid) + " is not served by rotad");
            Edits e;
            uint64_t limit = (uint64_t)n * cfg_.unit;
            int rc = edits_for(cfg_, gpus[g], prio_, limit, &e, &why);
            // rotad unreachable (or refusing the grant): the container must not start without its limit
            if (rc) return refuse(rc == -EINVAL ? grpc::StatusCode::INTERNAL : grpc::StatusCode::UNAVAILABLE, why);
            auto *o = resp->add_container_responses();
            for (const auto &kv : e.env) (*o->mutable_envs())[kv.first] = kv.second;
            for (const auto &kv : e.annotations) (*o->mutable_annotations())[kv.first] = kv.second;
            for (const Mount &m : e.mounts) {
                auto *x = o->add_mounts();
                x->set_container_path(m.container_path);
                x->set_host_path(m.host_path);
                x->set_read_only(m.read_only);
            }
            for (const DevNode &d : e.devices) {
                auto *x = o->add_devices();
                x->set_container_path(d.container_path);
                x->set_host_path(d.host_path);
                x->set_permissions(d.permissions);
            }
            for (const std::string &name : e.cdi_devices) o->add_cdi_devices()->set_name(name);
            logf("%s: allocated %u unit%s on %s: class %s, limit %llu bytes", resource_.c_str(), n, n == 1 ? "" : "s",
                 gpus[g].uuid, kdp_prio_name(prio_), (unsigned long long)limit);
        }
        return grpc::Status::OK;
    }

    grpc::Status PreStartContainer(grpc::ServerContext *, const v1beta1::PreStartContainerRequest *,
                                   v1beta1::PreStartContainerResponse *) override
    {
        return grpc::Status::OK; // not asked for (pre_start_required is false): nothing to prepare
    }

  private:
    const Config &cfg_;
    State &st_;
    unsigned prio_;
    std::string resource_;

    grpc::Status refuse(grpc::StatusCode code, const std::string &why)
    {
        std::string msg = resource_ + ": " + why;
        logf("Allocate refused: %s", msg.c_str());
        return grpc::Status(code, msg);
    }

    std::vector<kdp_gpu_t> served_gpus()
    {
        std::lock_guard<std::mutex> lk(st_.mu);
        std::vector<kdp_gpu_t> out;
        for (size_t i = 0; i < st_.gpus.size(); i++)
            if (st_.up && st_.served[i]) out.push_back(st_.gpus[i]);
        return out;
    }

    static int place(void *arg, const std::vector<kdp_gpu_t> &cand, uint64_t mem, int *pick)
    {
        Plugin *p = static_cast<Plugin *>(arg);
        char err[256];
        int rc = kdp_rotad_place(p->cfg_.socket.c_str(), p->prio_, cand.data(), (unsigned)cand.size(), mem, pick,
                                 err, sizeof err);
        if (rc) logf("%s: GetPreferredAllocation without rotad's placement: %s", p->resource_.c_str(), err);
        return rc ? -1 : 0;
    }
};

// ---- the rotad watcher --------------------------------------------------------------------------------------

void watch_rotad(const Config &cfg, State &st)
{
    bool said_down = false;
    while (true) {
        {
            std::lock_guard<std::mutex> lk(st.mu);
            if (st.stopping) return;
        }
        kdp_rotad_t *r;
        char err[256];
        if (kdp_rotad_open(cfg.socket.c_str(), &r, err, sizeof err)) {
            if (!said_down) logf("rotad does not serve (%s): devices unhealthy until it does", err);
            said_down = true;
            std::unique_lock<std::mutex> lk(st.mu);
            st.cv.wait_for(lk, std::chrono::milliseconds(cfg.poll_ms), [&] { return st.stopping; });
            continue;
        }
        said_down = false;
        kdp_gpu_t g[KDP_MAX_GPUS];
        int n = kdp_rotad_gpus(r, g);
        // The GPUs known so far plus any new ones, in order of discovery; the CDI spec names them all before
        // any is advertised healthy, so a runtime never meets a device it cannot resolve.
        std::vector<kdp_gpu_t> all;
        std::vector<bool> served;
        std::vector<int> numa;
        {
            std::lock_guard<std::mutex> lk(st.mu);
            all = st.gpus;
        }
        bool grew = false;
        served.assign(all.size(), false);
        for (int i = 0; i < n; i++) {
            size_t j = 0;
            while (j < all.size() && strcmp(all[j].uuid, g[i].uuid)) j++;
            if (j == all.size()) {
                all.push_back(g[i]);
                served.push_back(false);
                grew = true;
            }
            all[j] = g[i]; // a restarted rotad's word on its memory
            served[j] = true;
        }
        for (const kdp_gpu_t &x : all) numa.push_back(node_gpu(cfg, x.uuid).numa);
        if (grew && !cfg.cdi_dir.empty()) {
            std::string why;
            if (cdi_write(cfg, all, &why)) logf("CDI spec: %s", why.c_str());
            else logf("wrote the CDI spec %s", cdi_spec_path(cfg).c_str());
        }
        {
            std::lock_guard<std::mutex> lk(st.mu);
            st.gpus = all;
            st.served = served;
            st.numa = numa;
            st.up = true;
            st.gen++;
        }
        st.cv.notify_all();
        if (n == 0) logf("rotad serves, but lists no GPU it probed (rotad --no-probe?): nothing to advertise");
        else logf("rotad serves %d GPU%s: devices healthy", n, n == 1 ? "" : "s");
        for (int i = 0; i < n; i++)
            if (units_of(g[i], cfg.unit) == 0 || g[i].total_mem / cfg.unit > MAX_UNITS)
                logf("%s: %llu bytes in units of %llu: %u units advertised", g[i].uuid,
                     (unsigned long long)g[i].total_mem, (unsigned long long)cfg.unit, units_of(g[i], cfg.unit));
        while (kdp_rotad_wait_alive(r, (int)cfg.poll_ms)) {
            std::lock_guard<std::mutex> lk(st.mu);
            if (st.stopping) break;
        }
        kdp_rotad_close(r);
        {
            std::lock_guard<std::mutex> lk(st.mu);
            st.up = false;
            st.gen++;
            if (st.stopping) return;
        }
        st.cv.notify_all();
        logf("rotad stopped serving: devices unhealthy");
    }
}

// ---- the kubelet's side: our sockets, registration ----------------------------------------------------------

struct Endpoint {
    std::unique_ptr<Plugin> svc;
    std::unique_ptr<grpc::Server> server;
    std::string name, path; // socket name (the RegisterRequest's endpoint) and its path
    ino_t ino = 0;
    bool registered = false;
    std::string last_error; // the kubelet's last refusal, logged once until it changes
};

bool same_socket(const std::string &path, ino_t ino)
{
    struct stat s;
    return stat(path.c_str(), &s) == 0 && S_ISSOCK(s.st_mode) && s.st_ino == ino;
}

void ep_stop(Endpoint &ep)
{
    if (!ep.server) return;
    ep.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    ep.server.reset();
    if (same_socket(ep.path, ep.ino)) unlink(ep.path.c_str()); // never a socket someone else made since
    ep.registered = false;
}

int ep_start(Endpoint &ep)
{
    unlink(ep.path.c_str());
    grpc::ServerBuilder b;
    grpc::ResourceQuota q("rota-device-plugin");
    q.SetMaxThreads(MAX_SERVER_THREADS);
    b.SetResourceQuota(q);
    b.AddListeningPort("unix://" + ep.path, grpc::InsecureServerCredentials());
    b.RegisterService(ep.svc.get());
    ep.server = b.BuildAndStart();
    struct stat s;
    if (!ep.server || stat(ep.path.c_str(), &s)) {
        logf("fatal: unable to serve %s on %s", ep.svc->resource().c_str(), ep.path.c_str());
        ep.server.reset();
        return -1;
    }
    ep.ino = s.st_ino;
    return 0;
}

bool ep_register(const Config &cfg, Endpoint &ep, std::string *why)
{
    auto ch = grpc::CreateChannel("unix://" + cfg.kubelet_dir + "/kubelet.sock", grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + REGISTER_TIMEOUT);
    v1beta1::RegisterRequest req;
    req.set_version(API_VERSION);
    req.set_endpoint(ep.name);
    req.set_resource_name(ep.svc->resource());
    req.mutable_options()->set_pre_start_required(false);
    req.mutable_options()->set_get_preferred_allocation_available(true);
    v1beta1::Empty resp;
    grpc::Status s = stub->Register(&ctx, req, &resp);
    if (!s.ok()) *why = s.error_message().empty() ? "code " + std::to_string(s.error_code()) : s.error_message();
    return s.ok();
}

// The kubelet's socket as (inode, change time): a restarted kubelet makes a new one.
std::pair<ino_t, long long> kubelet_id(const Config &cfg)
{
    struct stat s;
    if (stat((cfg.kubelet_dir + "/kubelet.sock").c_str(), &s) || !S_ISSOCK(s.st_mode)) return {0, 0};
    return {s.st_ino, (long long)s.st_ctim.tv_sec * 1000000000LL + s.st_ctim.tv_nsec};
}

int run(const Config &cfg)
{
    struct stat ds;
    if (stat(cfg.kubelet_dir.c_str(), &ds) || !S_ISDIR(ds.st_mode)) {
        logf("fatal: unable to use --kubelet-dir %s: %s", cfg.kubelet_dir.c_str(),
             errno ? strerror(errno) : "not a directory");
        return 1;
    }
    if (!cfg.cdi_dir.empty() && (stat(cfg.cdi_dir.c_str(), &ds) || !S_ISDIR(ds.st_mode))) {
        logf("fatal: unable to use --cdi-dir %s: %s", cfg.cdi_dir.c_str(), errno ? strerror(errno) : "not a directory");
        return 1;
    }
    // Signals go to sigtimedwait below, in no thread's handler.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);
    umask(077); // our sockets: the kubelet (root) only

    State st;
    std::thread watcher(watch_rotad, std::cref(cfg), std::ref(st));
    std::vector<Endpoint> eps;
    for (unsigned c = 0; c < KDP_PRIO_COUNT; c++) {
        if (!(cfg.classes & (1u << c))) continue;
        Endpoint ep;
        ep.svc = std::make_unique<Plugin>(cfg, st, c);
        ep.name = std::string("rota-") + kdp_prio_name(c) + ".sock";
        ep.path = cfg.kubelet_dir + "/" + ep.name;
        eps.push_back(std::move(ep));
    }
    int rc = 0;
    auto kubelet = kubelet_id(cfg);
    bool said_no_kubelet = false;
    while (true) {
        auto now = kubelet_id(cfg);
        bool restarted = now != kubelet;
        if (restarted && now.first) logf("the kubelet's socket is new (a kubelet restart): registering again");
        kubelet = now;
        for (Endpoint &ep : eps) {
            if (restarted) ep.registered = false;
            if (!ep.server || !same_socket(ep.path, ep.ino)) {
                if (ep.server) logf("%s: %s was removed: serving it again", ep.svc->resource().c_str(), ep.path.c_str());
                ep_stop(ep);
                if (ep_start(ep)) {
                    rc = 1;
                    goto out;
                }
            }
            if (ep.registered || !kubelet.first) continue;
            std::string why;
            if (ep_register(cfg, ep, &why)) {
                ep.registered = true;
                ep.last_error.clear();
                logf("registered %s with the kubelet (endpoint %s)", ep.svc->resource().c_str(), ep.name.c_str());
            } else if (why != ep.last_error) {
                ep.last_error = why;
                logf("unable to register %s with the kubelet: %s (trying again every %u ms)",
                     ep.svc->resource().c_str(), why.c_str(), cfg.poll_ms);
            }
        }
        if (!kubelet.first && !said_no_kubelet) logf("no kubelet.sock in %s yet: waiting", cfg.kubelet_dir.c_str());
        said_no_kubelet = !kubelet.first;
        struct timespec ts = {(time_t)(cfg.poll_ms / 1000), (long)(cfg.poll_ms % 1000) * 1000000L};
        int sig = sigtimedwait(&sigs, nullptr, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            logf("stopping (%s)", strsignal(sig));
            break;
        }
    }
out:
    {
        std::lock_guard<std::mutex> lk(st.mu);
        st.stopping = true;
    }
    st.cv.notify_all();
    for (Endpoint &ep : eps) ep_stop(ep);
    watcher.join();
    return rc;
}

} // namespace
} // namespace kdp

int main(int argc, char **argv)
{
    kdp::Config cfg;
    int rc = kdp::opts_parse(argc, argv, cfg);
    if (rc == 1) return 0;
    if (rc) return 2;
    if (cfg.debug) kdp::opts_print(cfg);
    return kdp::run(cfg);
}
