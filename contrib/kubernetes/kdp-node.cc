// kdp-node.cc - what the node's own files say about a GPU: its device minor (the driver's) and NUMA node (PCI).
#include "contrib/kubernetes/kdp.h"

#include <dirent.h>
#include <fstream>

namespace kdp {

namespace {

// A small decimal ("0".."9999", or "-1"): its value, else -1.
int small_int(const std::string &v)
{
    if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(v);
}

std::string trim(std::string v)
{
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t\r\n") + 1);
    return v;
}

} // namespace

NodeGpu node_gpu(const Config &cfg, const char *uuid)
{
    NodeGpu out;
    DIR *d = opendir(cfg.driver_proc.c_str());
    if (!d) return out;
    // one folder per GPU, named by its PCI address (0000:01:00.0), holding "Key: value" lines
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream f(cfg.driver_proc + "/" + e->d_name + "/information");
        std::string line, id;
        int minor = -1;
        while (std::getline(f, line)) {
            size_t c = line.find(':');
            if (c == std::string::npos) continue;
            std::string k = line.substr(0, c), v = trim(line.substr(c + 1));
            if (k == "GPU UUID") id = v;
            else if (k == "Device Minor") minor = small_int(v);
        }
        if (id != uuid) continue;
        out.minor = minor;
        std::ifstream n(cfg.pci_dir + "/" + e->d_name + "/numa_node");
        std::string v;
        if (std::getline(n, v)) out.numa = small_int(trim(v));
        break;
    }
    closedir(d);
    return out;
}

} // namespace kdp
