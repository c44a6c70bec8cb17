// kdp-units.cc - device IDs of GPU memory units ("GPU-<uuid>::<k>") and the rules of allocating them.
#include "contrib/kubernetes/kdp.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace kdp {

unsigned units_of(const kdp_gpu_t &g, uint64_t unit)
{
    uint64_t n = unit ? g.total_mem / unit : 0;
    return n > MAX_UNITS ? MAX_UNITS : (unsigned)n;
}

std::string unit_id(const kdp_gpu_t &g, unsigned k) { return std::string(g.uuid) + "::" + std::to_string(k); }

namespace {

// "GPU-<uuid>::<k>" -> the GPU's index and k; -1 for anything else (k strictly decimal, no sign or zeros ahead).
int id_parse(const std::vector<kdp_gpu_t> &gpus, uint64_t unit, const std::string &id, unsigned *k)
{
    size_t sep = id.find("::");
    if (sep == std::string::npos || sep + 2 >= id.size() || id.size() - sep - 2 > 4) return -1;
    std::string num = id.substr(sep + 2);
    if (num.find_first_not_of("0123456789") != std::string::npos || (num.size() > 1 && num[0] == '0')) return -1;
    unsigned v = (unsigned)std::stoul(num);
    for (size_t i = 0; i < gpus.size(); i++) {
        if (id.compare(0, sep, gpus[i].uuid) || strlen(gpus[i].uuid) != sep) continue;
        if (v >= units_of(gpus[i], unit)) return -1;
        *k = v;
        return (int)i;
    }
    return -1;
}

} // namespace

int units_check(const std::vector<kdp_gpu_t> &gpus, uint64_t unit, const std::vector<std::string> &ids, int *gpu,
                unsigned *count, std::string *why)
{
    if (ids.empty()) {
        *why = "no device IDs";
        return -1;
    }
    std::set<std::string> seen;
    std::vector<unsigned> per(gpus.size(), 0);
    for (const std::string &id : ids) {
        unsigned k;
        int g = id_parse(gpus, unit, id, &k);
        if (g < 0) {
            *why = "unknown device ID '" + id.substr(0, 80) + "'";
            return -1;
        }
        if (!seen.insert(id).second) {
            *why = "device ID '" + id + "' given twice";
            return -1;
        }
        per[g]++;
    }
    int first = -1;
    std::string where;
    for (size_t i = 0; i < per.size(); i++) {
        if (!per[i]) continue;
        if (first < 0) first = (int)i;
        where += (where.empty() ? "" : ", ") + std::to_string(per[i]) + " on " + gpus[i].uuid;
    }
    if (seen.size() != per[first]) {
        // rota's limit is per GPU: units on two GPUs would be two limits for one process
        unsigned most = 0;
        for (const kdp_gpu_t &g : gpus) most = std::max(most, units_of(g, unit));
        *why = std::to_string(ids.size()) + " units on several GPUs (" + where +
               "): a container's units must be on one GPU (a GPU here has at most " + std::to_string(most) + ")";
        return -1;
    }
    *gpu = first;
    *count = per[first];
    return 0;
}

std::vector<std::string> units_prefer(const std::vector<kdp_gpu_t> &gpus, uint64_t unit,
                                      const std::vector<std::string> &available,
                                      const std::vector<std::string> &must_include, int size, placer_fn place,
                                      void *arg)
{
    std::vector<std::string> out;
    if (size <= 0) return out;
    // available IDs by GPU, in the kubelet's order; unknown IDs are never offered back
    std::vector<std::vector<std::string>> by(gpus.size());
    for (const std::string &id : available) {
        unsigned k;
        int g = id_parse(gpus, unit, id, &k);
        if (g >= 0) by[g].push_back(id);
    }
    std::set<int> must_gpus;
    for (const std::string &id : must_include) {
        unsigned k;
        int g = id_parse(gpus, unit, id, &k);
        if (g >= 0) must_gpus.insert(g);
    }
    std::set<std::string> must(must_include.begin(), must_include.end());
    // GPUs where the whole request fits (and that hold every must-include ID)
    std::vector<int> fit;
    for (size_t i = 0; i < gpus.size(); i++) {
        if (by[i].size() < (size_t)size) continue;
        if (must_gpus.size() > 1 || (must_gpus.size() == 1 && !must_gpus.count((int)i))) continue;
        fit.push_back((int)i);
    }
    std::vector<int> order;
    if (!fit.empty()) {
        int pick = 0;
        if (fit.size() > 1) {
            std::vector<kdp_gpu_t> cand;
            for (int i : fit) cand.push_back(gpus[i]);
            if (!place || place(arg, cand, (uint64_t)size * unit, &pick) || pick < 0 || (size_t)pick >= fit.size()) {
                // without rotad's word: the GPU with the most units left, so that pods spread
                pick = 0;
                for (size_t j = 1; j < fit.size(); j++)
                    if (by[fit[j]].size() > by[fit[pick]].size()) pick = (int)j;
            }
        }
        order.push_back(fit[pick]);
    } else {
        // it fits on no single GPU: as few GPUs as possible (Allocate refuses it, saying why)
        for (size_t i = 0; i < gpus.size(); i++) order.push_back((int)i);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return by[a].size() > by[b].size(); });
    }
    for (const std::string &id : must_include) out.push_back(id);
    for (int g : order)
        for (const std::string &id : by[g])
            if ((int)out.size() < size && !must.count(id)) out.push_back(id);
    return out;
}

} // namespace kdp
