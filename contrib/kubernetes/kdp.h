// kdp.h - rota-device-plugin (the kubelet's Device Plugin API over rota): its options, unit model and edits.
#ifndef ROTA_KDP_H
#define ROTA_KDP_H

#include "contrib/kubernetes/kdp-rotad.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kdp {

// ---- options (kdp-opts.cc: one table, strict parsing) -----------------------------------------------------
struct Config {
    std::string kubelet_dir = "/var/lib/kubelet/device-plugins";
    std::string socket = "/run/rota/rotad.sock";      // rotad's socket, as this process sees it
    std::string host_socket;                           // rotad's socket on the host ("": socket)
    std::string container_socket = "/run/rota/rotad.sock";
    std::string lib = "/opt/rota/lib/librota.so";      // librota.so on the host
    std::string container_lib = "/opt/rota/lib/librota.so";
    uint64_t unit = UINT64_C(1) << 30;                 // GPU memory per device ID
    unsigned classes = 7;                              // bit i: class i is advertised
    std::string resource_prefix = "rota.io/gpu-mem";   // resource = prefix-CLASS
    std::string dev_dir = "/dev";                      // where this process finds the device nodes
    std::string host_dev_dir;                          // the same folder on the host ("": dev_dir)
    std::string driver_proc = "/proc/driver/nvidia/gpus";
    std::string pci_dir = "/sys/bus/pci/devices";      // <bus>/numa_node: the GPUs' NUMA nodes
    std::string cdi_dir;                               // "": answer with mounts and devices, else CDI devices
    std::string cdi_driver_kind = "nvidia.com/gpu";    // CDI kind of the driver's own spec ("": none)
    bool nvidia_env = true;                            // NVIDIA_VISIBLE_DEVICES (the NVIDIA container toolkit)
    unsigned poll_ms = 1000;                           // kubelet restarts and rotad reconnects are noticed within
    bool debug = false;                                // ROTA_LOG=debug
};

// Parses argv into cfg. 0: run; 1: --help or --version printed (exit 0); 2: usage error printed (exit 2).
int opts_parse(int argc, char **argv, Config &cfg);
void opts_print(const Config &cfg); // the effective options (ROTA_LOG=debug)

// ---- units: device IDs and the allocation rules (kdp-units.cc) ----------------------------------------------
constexpr unsigned MAX_UNITS = 1024; // device IDs per GPU and resource: the kubelet lists every one

// A GPU's units: total memory / unit size, at most MAX_UNITS.
unsigned units_of(const kdp_gpu_t &g, uint64_t unit);
// "GPU-<uuid>::<k>"
std::string unit_id(const kdp_gpu_t &g, unsigned k);

// What one container asked for, checked against the known GPUs: all units on one GPU. 0 with gpu (an index
// into gpus) and count, or -1 with a sentence in why (unknown ID, duplicate, several GPUs).
int units_check(const std::vector<kdp_gpu_t> &gpus, uint64_t unit, const std::vector<std::string> &ids, int *gpu,
                unsigned *count, std::string *why);

// The placer GetPreferredAllocation uses among GPUs with room: 0 and *pick (an index into cand) or -1.
typedef int (*placer_fn)(void *arg, const std::vector<kdp_gpu_t> &cand, uint64_t mem, int *pick);
// A preferred allocation of size IDs from available (must_include included): on one GPU where one has room,
// chosen by place among those that do; else as few GPUs as possible (Allocate then refuses it with its reason).
std::vector<std::string> units_prefer(const std::vector<kdp_gpu_t> &gpus, uint64_t unit,
                                      const std::vector<std::string> &available,
                                      const std::vector<std::string> &must_include, int size, placer_fn place,
                                      void *arg);

// ---- the node's files about a GPU (kdp-node.cc) ------------------------------------------------------------
struct NodeGpu {
    int minor = -1; // /dev/nvidiaN
    int numa = -1;  // the NUMA node of its PCI device (-1: none known)
};
// From the driver's information files (--driver-proc/<bus>/information: "GPU UUID", "Device Minor") and the PCI
// device's numa_node (--pci-dir/<bus>/numa_node); -1 for what they do not say.
NodeGpu node_gpu(const Config &cfg, const char *uuid);

// ---- edits: what a container is given (kdp-edits.cc) -----------------------------------------------------
struct Mount {
    std::string container_path, host_path;
    bool read_only;
};
struct DevNode {
    std::string container_path, host_path, permissions;
};
struct Edits {
    std::map<std::string, std::string> env;
    std::vector<Mount> mounts;
    std::vector<DevNode> devices;
    std::vector<std::string> cdi_devices;          // fully qualified CDI names
    std::map<std::string, std::string> annotations;
};

// The one place that tells a container its GPU, class and memory limit: grants them through rotad (a one-time
// token in ROTA_GRANT) and sets the container's edits. 0, -EINVAL (a bad class or limit), or -errno with why
// when rotad could not be told (unreachable, or refusing the grant).
int edits_for(const Config &cfg, const kdp_gpu_t &g, unsigned prio, uint64_t limit, Edits *out, std::string *why);
// With --cdi-dir: writes the CDI spec of these GPUs (kind rota.io/gpu) atomically. 0 or -errno with why.
int cdi_write(const Config &cfg, const std::vector<kdp_gpu_t> &gpus, std::string *why);
std::string cdi_spec_path(const Config &cfg);

} // namespace kdp

#endif
