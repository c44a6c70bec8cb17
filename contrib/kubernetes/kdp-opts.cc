// kdp-opts.cc - rota-device-plugin's options: one table (name, kind, default, bounds, help), strict parsing.
#include "contrib/kubernetes/kdp.h"

extern "C" {
#include "runtime/lib/parse.h"
#include "runtime/lib/version.h"
}

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

namespace kdp {

namespace {

enum class Kind { Path, Dir, Size, Classes, Resource, Bool, Millis, CdiKind };

struct Opt {
    const char *name;
    Kind kind;
    const char *arg;
    const char *help;
};

// The table: usage, parsing and ROTA_LOG=debug's listing all read it.
const Opt table[] = {
    {"--kubelet-dir", Kind::Dir, "DIR", "the kubelet's device-plugin directory (kubelet.sock; the plugin's sockets)"},
    {"--socket", Kind::Path, "PATH", "rotad's socket, as this process sees it"},
    {"--host-socket", Kind::Path, "PATH", "rotad's socket on the host: its directory is mounted"},
    {"--container-socket", Kind::Path, "PATH", "where containers find rotad's socket (ROTA_SOCKET)"},
    {"--lib", Kind::Path, "PATH", "librota.so on the host, mounted read-only into containers"},
    {"--container-lib", Kind::Path, "PATH", "where containers find librota.so (LD_PRELOAD)"},
    {"--unit", Kind::Size, "SIZE", "GPU memory per device ID (1M to 1T; K/M/G/T)"},
    {"--classes", Kind::Classes, "LIST", "the priority classes advertised, one resource each (high,normal,low)"},
    {"--resource-prefix", Kind::Resource, "NAME", "resources are NAME-high, NAME-normal, NAME-low"},
    {"--dev-dir", Kind::Dir, "DIR", "where the GPUs' device nodes are (nvidiaN, nvidiactl, nvidia-uvm)"},
    {"--host-dev-dir", Kind::Dir, "DIR", "the same folder on the host, as the runtime is told"},
    {"--driver-proc", Kind::Path, "DIR", "the driver's per-GPU information files (UUID -> device minor)"},
    {"--pci-dir", Kind::Path, "DIR", "the PCI devices' folders (numa_node: each GPU's NUMA node for the kubelet)"},
    {"--cdi-dir", Kind::Dir, "DIR", "write a CDI spec there and answer with CDI devices (default: mounts, devices)"},
    {"--cdi-driver-kind", Kind::CdiKind, "KIND", "the driver's CDI kind, one device per GPU UUID (\"\": none)"},
    {"--nvidia-env", Kind::Bool, "on|off", "set NVIDIA_VISIBLE_DEVICES for the NVIDIA container toolkit"},
    {"--poll-ms", Kind::Millis, "MS", "how soon a kubelet restart or rotad's return is noticed (100 to 60000)"},
};

const char *defaults[] = {"/var/lib/kubelet/device-plugins", "/run/rota/rotad.sock", "(--socket)",
                          "/run/rota/rotad.sock", "/opt/rota/lib/librota.so", "/opt/rota/lib/librota.so", "1G",
                          "high,normal,low", "rota.io/gpu-mem", "/dev", "(--dev-dir)", "/proc/driver/nvidia/gpus",
                          "/sys/bus/pci/devices", "(none)",
                          "nvidia.com/gpu", "on", "1000"};
static_assert(sizeof defaults / sizeof *defaults == sizeof table / sizeof *table, "one default per option");

void usage(FILE *f)
{
    fprintf(f, "usage: rota-device-plugin [OPTION VALUE]...\n\n"
               "Advertises rota's GPU memory to the kubelet (Device Plugin API v1beta1) as one extended\n"
               "resource per priority class, in units of --unit per GPU, and gives each container librota.so,\n"
               "its class, its memory limit, rotad's socket and its GPU. Runs until SIGTERM or SIGINT.\n\n");
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        fprintf(f, "  %-18s %-7s %s (default %s)\n", table[i].name, table[i].arg, table[i].help, defaults[i]);
    fprintf(f, "  %-18s %-7s print the version and exit\n  %-18s %-7s print this and exit\n\n"
               "Exit codes: 0 stopped by a signal; 1 fatal error; 2 usage error.\n", "--version", "", "--help", "");
}

int bad(const char *name, const char *v, const char *want)
{
    fprintf(stderr, "rota-device-plugin: fatal: %s '%s': %s (see --help)\n", name, v, want);
    return 2;
}

// An extended resource name: "domain/name", the name part 1..63 of [A-Za-z0-9-_.] starting and ending
// alphanumeric; the prefix leaves room for "-normal". The kubelet refuses kubernetes.io names.
bool resource_ok(const std::string &s)
{
    size_t slash = s.find('/');
    if (slash == std::string::npos || slash == 0 || s.find('/', slash + 1) != std::string::npos) return false;
    std::string dom = s.substr(0, slash), name = s.substr(slash + 1);
    if (dom.size() > 253 || name.empty() || name.size() + 7 > 63) return false;
    if (dom == "kubernetes.io" || (dom.size() > 14 && dom.compare(dom.size() - 14, 14, ".kubernetes.io") == 0))
        return false;
    for (char c : dom)
        if (!(isalnum((unsigned char)c) && !isupper((unsigned char)c)) && c != '-' && c != '.') return false;
    if (!isalnum((unsigned char)name[0])) return false;
    for (char c : name)
        if (!isalnum((unsigned char)c) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

} // namespace

int opts_parse(int argc, char **argv, Config &cfg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("rota-device-plugin %s (Device Plugin API v1beta1)\n", ROTA_VERSION);
            return 1;
        }
        const Opt *o = nullptr;
        const char *v = nullptr;
        for (const Opt &t : table) {
            size_t n = strlen(t.name);
            if (strncmp(a, t.name, n)) continue;
            if (a[n] == '=') v = a + n + 1;
            else if (a[n]) continue;
            o = &t;
            break;
        }
        if (!o) {
            fprintf(stderr, "rota-device-plugin: fatal: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "rota-device-plugin: fatal: %s needs a value (see --help)\n", o->name);
                return 2;
            }
            v = argv[++i];
        }
        std::string name = o->name;
        switch (o->kind) {
        case Kind::Path:
        case Kind::Dir:
            if (v[0] != '/' || strlen(v) > 4000 || strpbrk(v, ":\n"))
                return bad(o->name, v, "expected an absolute path (no ':' or newline)");
            if (o->kind == Kind::Dir && name == "--kubelet-dir" && strlen(v) > 80)
                return bad(o->name, v, "too long for the sockets in it (at most 80 characters)");
            if (name == "--kubelet-dir") cfg.kubelet_dir = v;
            else if (name == "--socket") cfg.socket = v;
            else if (name == "--host-socket") cfg.host_socket = v;
            else if (name == "--container-socket") cfg.container_socket = v;
            else if (name == "--lib") cfg.lib = v;
            else if (name == "--container-lib") cfg.container_lib = v;
            else if (name == "--dev-dir") cfg.dev_dir = v;
            else if (name == "--host-dev-dir") cfg.host_dev_dir = v;
            else if (name == "--driver-proc") cfg.driver_proc = v;
            else if (name == "--pci-dir") cfg.pci_dir = v;
            else if (name == "--cdi-dir") cfg.cdi_dir = v;
            break;
        case Kind::Size:
            if (parse_size(v, UINT64_C(1) << 20, UINT64_C(1) << 40, &cfg.unit))
                return bad(o->name, v, "expected a size from 1M to 1T (e.g. 512M, 1G)");
            break;
        case Kind::Classes: {
            unsigned mask = 0;
            std::string s = v, t;
            size_t p = 0;
            while (p <= s.size()) {
                size_t q = s.find(',', p);
                if (q == std::string::npos) q = s.size();
                t = s.substr(p, q - p);
                unsigned c;
                if (kdp_prio_parse(t.c_str(), &c) || (mask & (1u << c)))
                    return bad(o->name, v, "expected distinct classes among high, normal, low");
                mask |= 1u << c;
                p = q + 1;
            }
            cfg.classes = mask;
            break;
        }
        case Kind::Resource:
            if (!resource_ok(v))
                return bad(o->name, v, "expected an extended resource name DOMAIN/NAME (not kubernetes.io), "
                                       "NAME at most 56 of [A-Za-z0-9-_.]");
            cfg.resource_prefix = v;
            break;
        case Kind::CdiKind: {
            std::string s = v;
            size_t slash = s.find('/');
            if (!s.empty() && (slash == std::string::npos || slash == 0 || slash + 1 == s.size() ||
                               s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "-_./") != std::string::npos))
                return bad(o->name, v, "expected a CDI kind VENDOR/CLASS, or \"\"");
            cfg.cdi_driver_kind = s;
            break;
        }
        case Kind::Bool:
            if (parse_bool(v, &cfg.nvidia_env)) return bad(o->name, v, "expected on or off");
            break;
        case Kind::Millis: {
            uint64_t ms;
            if (parse_u64(v, 100, 60000, &ms)) return bad(o->name, v, "expected milliseconds from 100 to 60000");
            cfg.poll_ms = (unsigned)ms;
            break;
        }
        }
    }
    if (cfg.host_socket.empty()) cfg.host_socket = cfg.socket;
    if (cfg.host_dev_dir.empty()) cfg.host_dev_dir = cfg.dev_dir;
    if (cfg.host_socket.rfind('/') == 0 || cfg.container_socket.rfind('/') == 0) {
        fprintf(stderr, "rota-device-plugin: fatal: rotad's socket must be in a directory of its own, not in /\n");
        return 2;
    }
    const char *log = getenv("ROTA_LOG");
    cfg.debug = log && !strcmp(log, "debug");
    return 0;
}

void opts_print(const Config &cfg)
{
    std::string classes;
    for (unsigned c = 0; c < KDP_PRIO_COUNT; c++)
        if (cfg.classes & (1u << c)) classes += (classes.empty() ? "" : ",") + std::string(kdp_prio_name(c));
    fprintf(stderr,
            "rota-device-plugin: options: --kubelet-dir %s --socket %s --host-socket %s --container-socket %s "
            "--lib %s --container-lib %s --unit %llu --classes %s --resource-prefix %s --dev-dir %s "
            "--host-dev-dir %s --driver-proc %s --pci-dir %s --cdi-dir %s --cdi-driver-kind '%s' --nvidia-env %s --poll-ms %u\n",
            cfg.kubelet_dir.c_str(), cfg.socket.c_str(), cfg.host_socket.c_str(), cfg.container_socket.c_str(),
            cfg.lib.c_str(), cfg.container_lib.c_str(), (unsigned long long)cfg.unit, classes.c_str(),
            cfg.resource_prefix.c_str(), cfg.dev_dir.c_str(), cfg.host_dev_dir.c_str(), cfg.driver_proc.c_str(), cfg.pci_dir.c_str(),
            cfg.cdi_dir.empty() ? "(none)" : cfg.cdi_dir.c_str(), cfg.cdi_driver_kind.c_str(),
            cfg.nvidia_env ? "on" : "off", cfg.poll_ms);
}

} // namespace kdp
