// kdp-edits.cc - what a container is given for its units: librota, class, limit, rotad's socket, its GPU; or CDI.
#include "contrib/kubernetes/kdp.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace kdp {

namespace {

std::string dir_of(const std::string &p) { return p.substr(0, p.rfind('/')); }

bool is_chardev(const std::string &p)
{
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

// The device nodes of GPU g: its own nvidiaN (every nvidiaN where the driver's files do not say which) and the
// driver's shared ones; those that exist under --dev-dir, named by their host path (--host-dev-dir).
std::vector<DevNode> gpu_nodes(const Config &cfg, const kdp_gpu_t &g, bool shared, bool own)
{
    std::vector<DevNode> out;
    auto add = [&](const std::string &name) {
        if (is_chardev(cfg.dev_dir + "/" + name)) out.push_back({"/dev/" + name, cfg.host_dev_dir + "/" + name, "rw"});
    };
    if (shared)
        for (const char *n : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) add(n);
    if (!own) return out;
    int minor = node_gpu(cfg, g.uuid).minor;
    if (minor >= 0) {
        add("nvidia" + std::to_string(minor));
        return out;
    }
    if (DIR *d = opendir(cfg.dev_dir.c_str())) {
        std::vector<std::string> names;
        while (struct dirent *e = readdir(d)) {
            std::string n = e->d_name;
            if (n.size() > 6 && n.compare(0, 6, "nvidia") == 0 &&
                n.find_first_not_of("0123456789", 6) == std::string::npos)
                names.push_back(n);
        }
        closedir(d);
        std::sort(names.begin(), names.end());
        for (const std::string &n : names) add(n);
    }
    return out;
}

std::string cdi_name(const std::string &kind, const char *uuid) { return kind + "=" + uuid; }

std::string json_str(const std::string &s)
{
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') o += '\\', o += (char)c;
        else if (c < 0x20) {
            char b[8];
            snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else o += (char)c;
    }
    return o + "\"";
}

std::string json_nodes(const std::vector<DevNode> &v)
{
    std::string o = "[";
    for (size_t i = 0; i < v.size(); i++)
        o += (i ? "," : "") + std::string("{\"path\":") + json_str(v[i].container_path) +
             ",\"hostPath\":" + json_str(v[i].host_path) + ",\"permissions\":" + json_str(v[i].permissions) + "}";
    return o + "]";
}

} // namespace

std::string cdi_spec_path(const Config &cfg) { return cfg.cdi_dir + "/rota.io-gpu.json"; }

int edits_for(const Config &cfg, const kdp_gpu_t &g, unsigned prio, uint64_t limit, Edits *out, std::string *why)
{
    /*
     * What `rota run --priority CLASS --mem LIMIT` sets up, for the container's runtime to apply. The class and
     * limit reach rotad from here, not from the container (trust in limits): a root-only GRANT keyed by a one-time
     * token, which the container's first registering process binds to its cgroup (the container does not exist
     * yet, so its cgroup cannot key it). The container's ROTA_PRIORITY and ROTA_MEM_LIMIT may then only lower
     * them; they stay in its environment for what librota reads itself (its class, where no grant applies).
     */
    if (prio >= KDP_PRIO_COUNT || limit == 0) {
        *why = "bad class or limit";
        return -EINVAL;
    }
    char token[KDP_TOKEN_HEX], err[256];
    int rc = kdp_rotad_grant(cfg.socket.c_str(), prio, limit, token, err, sizeof err);
    if (rc) {
        *why = std::string("unable to grant the container its class and limit: ") + err;
        return rc;
    }
    Edits e;
    e.env["ROTA_PRIORITY"] = kdp_prio_name(prio);
    e.env["ROTA_MEM_LIMIT"] = std::to_string(limit);
    e.env["ROTA_GRANT"] = token;
    if (!cfg.cdi_dir.empty()) {
        // the rest is in the CDI spec (cdi_write): the runtime applies rota.io/gpu=<uuid> and the driver's device
        e.cdi_devices.push_back(cdi_name("rota.io/gpu", g.uuid));
        if (!cfg.cdi_driver_kind.empty()) e.cdi_devices.push_back(cdi_name(cfg.cdi_driver_kind, g.uuid));
        // runtimes that take CDI devices from annotations only (containerd before CRI's CDI field)
        std::string v;
        for (const std::string &n : e.cdi_devices) v += (v.empty() ? "" : ",") + n;
        e.annotations[std::string("cdi.k8s.io/rota-device-plugin_") + g.uuid] = v;
        *out = e;
        return 0;
    }
    e.env["LD_PRELOAD"] = cfg.container_lib;
    e.env["ROTA_SOCKET"] = cfg.container_socket;
    e.env["CUDA_VISIBLE_DEVICES"] = g.uuid;
    e.env["ROTA_GPU"] = "0";
    if (cfg.nvidia_env) e.env["NVIDIA_VISIBLE_DEVICES"] = g.uuid;
    e.mounts.push_back({cfg.container_lib, cfg.lib, true});
    // the socket's directory, not the socket: a restarted rotad's new socket is seen at once
    e.mounts.push_back({dir_of(cfg.container_socket), dir_of(cfg.host_socket), true});
    e.devices = gpu_nodes(cfg, g, true, true);
    *out = e;
    return 0;
}

int cdi_write(const Config &cfg, const std::vector<kdp_gpu_t> &gpus, std::string *why)
{
    std::ostringstream s;
    kdp_gpu_t none{};
    s << "{\"cdiVersion\":\"0.6.0\",\"kind\":\"rota.io/gpu\",\"devices\":[";
    for (size_t i = 0; i < gpus.size(); i++) {
        s << (i ? "," : "") << "{\"name\":" << json_str(gpus[i].uuid) << ",\"containerEdits\":{\"env\":["
          << json_str(std::string("CUDA_VISIBLE_DEVICES=") + gpus[i].uuid) << "," << json_str("ROTA_GPU=0");
        if (cfg.nvidia_env) s << "," << json_str(std::string("NVIDIA_VISIBLE_DEVICES=") + gpus[i].uuid);
        s << "],\"deviceNodes\":" << json_nodes(gpu_nodes(cfg, gpus[i], false, true)) << "}}";
    }
    s << "],\"containerEdits\":{\"env\":[" << json_str("LD_PRELOAD=" + cfg.container_lib) << ","
      << json_str("ROTA_SOCKET=" + cfg.container_socket) << "],\"mounts\":["
      << "{\"hostPath\":" << json_str(cfg.lib) << ",\"containerPath\":" << json_str(cfg.container_lib)
      << ",\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]},"
      << "{\"hostPath\":" << json_str(dir_of(cfg.host_socket))
      << ",\"containerPath\":" << json_str(dir_of(cfg.container_socket))
      << ",\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]}],\"deviceNodes\":"
      << json_nodes(gpu_nodes(cfg, none, true, false)) << "}}\n";
    std::string path = cdi_spec_path(cfg), tmp = path + ".tmp";
    std::string text = s.str();
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        *why = "unable to create " + tmp + ": " + strerror(errno);
        return -errno;
    }
    ssize_t n = write(fd, text.data(), text.size());
    int err = n == (ssize_t)text.size() ? 0 : n < 0 ? errno : EIO;
    if (!err && fsync(fd)) err = errno;
    close(fd);
    if (!err && rename(tmp.c_str(), path.c_str())) err = errno;
    if (err) {
        unlink(tmp.c_str());
        *why = "unable to write " + path + ": " + strerror(err);
        return -err;
    }
    return 0;
}

} // namespace kdp
