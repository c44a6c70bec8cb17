# device-plugin.py - rota-device-plugin against the stand-in kubelet (kubelet.py, grpcio) on simcuda GPUs and a
# real rotad, with the stand-in runtime (ctr-run.py) starting the "containers"; TAP on stdout. Run by
# device-plugin.t, which makes the temp folder T (argv[1]) and the Python stubs (T/py) and cleans up.
import json, os, re, signal, select, subprocess, sys, time

T = sys.argv[1]
sys.path.insert(0, os.path.join(T, "py"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
import api_pb2 as pb  # noqa: E402
from kubelet import Kubelet, Watch  # noqa: E402

BUILD, SRC = os.environ["ROTA_BUILD"], os.environ["ROTA_SRCDIR"]
KDP = os.path.join(BUILD, "bin", "rota-device-plugin")
NODE = os.environ["ROTA_K8S_T_NODE"]  # simcuda's node, /dev/shm/NODE: the .t removes it
G = 1 << 30
S = os.path.join(T, "run", "rotad.sock")          # rotad's socket on the "host"
KDIR = os.path.join(T, "kubelet")                 # the kubelet's device-plugin folder
CLIB = os.path.join(T, "c", "lib", "librota.so")  # where containers find librota.so
CSOCK = os.path.join(T, "c", "run", "rotad.sock")  # ... and rotad's socket
SIM = {"SIMCUDA_NODE": NODE, "SIMCUDA_DEVICES": "2", "SIMCUDA_MEM": "4G"}
ENV = dict(os.environ, LD_LIBRARY_PATH=os.path.join(BUILD, "lib"), ROTA_LOG="error", **SIM)
for k in ("LD_PRELOAD", "ROTA_PRIORITY", "ROTA_MEM_LIMIT", "ROTA_GPU", "ROTA_SOCKET", "CUDA_VISIBLE_DEVICES"):
    ENV.pop(k, None)
# The "image": what a container has before the kubelet adds anything (simcuda stands for the driver's files).
IMAGE_ENV = dict(PATH="/usr/bin:/bin", ROTA_MEM_WAIT="2", **SIM)
if os.environ.get("ROTA_SANITIZER"):
    IMAGE_ENV["ASAN_OPTIONS"] = "verify_asan_link_order=0:detect_leaks=0"  # librota.so preloaded into sh
if os.environ.get("ROTA_SANITIZER") == "thread":
    # Debian's grpc++ is not instrumented: its own locking, seen from outside, is not ours to report
    ENV["TSAN_OPTIONS"] = "%s:suppressions=%s" % (os.environ.get("TSAN_OPTIONS", ""),
                                                  os.path.join(SRC, "tests", "kubernetes", "tsan.supp"))

n, failed = 0, False
procs = []


def pods_cgroup():
    """The "kubepods" cgroup of this run: below the test's own, in the cgroup v2 hierarchy (a real runtime puts each
    container in a cgroup of its own there). Returns (path as /proc/PID/cgroup names it, its folder), or None."""
    root = None
    with open("/proc/self/mounts") as f:
        for line in f:
            w = line.split()
            if len(w) > 2 and w[2] == "cgroup2":
                root = w[1]
    own = [l[3:].strip() for l in open("/proc/self/cgroup") if l.startswith("0::")]
    if not root or not own:
        return None
    path = own[0].rstrip("/") + "/rota-k8s-t-%d" % os.getpid()
    try:
        os.mkdir(root + path)
    except OSError:
        return None
    with open(os.path.join(T, "cgroups"), "a") as f:  # device-plugin.t removes them, whatever the test's fate
        f.write(root + path + "\n")
    return path, root + path


PODS = pods_cgroup()


def ok(cond, label):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, label), flush=True)
    failed |= not cond
    return cond


def diag(s):
    for line in str(s).splitlines():
        print("# " + line, flush=True)


def bail(msg):
    print("Bail out! " + msg, flush=True)
    for f in ("rotad.log", "plugin.log"):
        p = os.path.join(T, f)
        if os.path.exists(p):
            diag(open(p).read()[-3000:])
    cleanup()
    sys.exit(1)


def track(p):
    procs.append(p)
    with open(os.path.join(T, "pids"), "a") as f:
        f.write("%d\n" % p.pid)
    return p


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def start_rotad():
    r, w = os.pipe()
    log = open(os.path.join(T, "rotad.log"), "a")
    conf = os.path.join(T, "rotad.conf")
    with open(conf, "w") as f:  # as deploy/'s ConfigMap: a container without its grant gains nothing
        f.write("grant-required %s\n" % PODS[0] if PODS else "")
    p = track(subprocess.Popen([os.path.join(BUILD, "bin", "rotad"), "--foreground", "--socket", S, "--notify-fd",
                                str(w), "--config", conf], env=dict(ENV, ROTA_LOG="warn"), pass_fds=(w,),
                               stderr=log))
    os.close(w)
    ready = select.select([r], [], [], 10)[0]
    os.close(r)
    if not ready:
        bail("rotad did not start")
    return p


def stop(p, sig=signal.SIGTERM, timeout=10):
    p.send_signal(sig)
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def plugin_args(*extra):
    return [KDP, "--kubelet-dir", KDIR, "--socket", S, "--lib", os.path.join(BUILD, "lib", "librota.so"),
            "--container-lib", CLIB, "--container-socket", CSOCK, "--dev-dir", os.path.join(T, "pdev"),
            "--host-dev-dir", os.path.join(T, "dev"),
            "--driver-proc", os.path.join(T, "proc"), "--pci-dir", os.path.join(T, "pci"),
            "--poll-ms", "200"] + list(extra)


def start_plugin(*extra):
    log = open(os.path.join(T, "plugin.log"), "a")
    return track(subprocess.Popen(plugin_args(*extra), env=ENV, stderr=log))


def clients():
    out = subprocess.run([os.path.join(BUILD, "bin", "rota"), "status", "--json", "--socket", S], env=ENV,
                         capture_output=True, text=True).stdout
    try:
        return [c for c in json.loads(out)["clients"] if c["comm"].startswith("workload")]
    except ValueError:
        return []


def wait_client(pred, timeout=15):
    end = time.time() + timeout
    last = []
    while time.time() < end:
        last = clients()
        for c in last:
            if pred(c):
                return c
        time.sleep(0.1)
    diag("clients: %s" % json.dumps(last))
    return None


def container(name, resp, argv, cdi_dir=None):
    """Starts a container as a runtime applies the kubelet's ContainerAllocateResponse: returns the process."""
    spec = {"image_env": IMAGE_ENV, "envs": dict(resp.envs),
            "mounts": [{"container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only}
                       for m in resp.mounts],
            "devices": [{"container_path": d.container_path, "host_path": d.host_path,
                         "permissions": d.permissions} for d in resp.devices],
            "cdi_dir": cdi_dir, "cdi_devices": [c.name for c in resp.cdi_devices],
            "devroot": os.path.join(T, "devroot-" + name), "argv": argv}
    if PODS:
        spec["cgroup"] = os.path.join(PODS[1], name)
        os.makedirs(spec["cgroup"], exist_ok=True)
        with open(os.path.join(T, "cgroups"), "a") as f:
            f.write(spec["cgroup"] + "\n")
    path = os.path.join(T, name + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    log = open(os.path.join(T, name + ".log"), "w")
    return track(subprocess.Popen(["unshare", "-m", "--propagation", "private", "--", sys.executable,
                                   os.path.join(SRC, "tests", "kubernetes", "ctr-run.py"), path],
                                  env=ENV, stdout=log, stderr=subprocess.STDOUT))


def workload(name, mem, duration):
    return [os.path.join(BUILD, "bin", "workload"), "--kind", "train", "--mem", mem, "--kernels", "200",
            "--gap-us", "2000", "--duration", str(duration), "--out", os.path.join(T, name + ".out.json")]


def rpc_error(fn):
    try:
        fn()
        return None
    except grpc.RpcError as e:
        return e


def alloc(stub, *ids):
    return stub.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=list(ids))]),
                         timeout=10)


def tasks(pid):
    return len(os.listdir("/proc/%d/task" % pid)), len(os.listdir("/proc/%d/fd" % pid))


# ---- the node: simcuda GPUs, device nodes, the driver's information files, rotad -----------------------------
for d in ("run", "kubelet", "dev", "cdi"):
    os.makedirs(os.path.join(T, d))
for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
    os.mknod(os.path.join(T, "dev", name), 0o666 | 0o020000, os.makedev(1, 3))  # /dev/null's numbers
os.symlink("dev", os.path.join(T, "pdev"))  # the plugin's view of the host's T/dev (--dev-dir, --host-dev-dir)
rotad = start_rotad()
st = json.loads(subprocess.run([os.path.join(BUILD, "bin", "rota"), "status", "--json", "--socket", S], env=ENV,
                               capture_output=True, text=True).stdout or "{}")
probed = [d["uuid"] for d in st.get("devices", [])]
if len(probed) != 2:
    bail("rotad did not probe the 2 simcuda GPUs: %s" % st)
# the driver's files: GPU 0 is minor 1 and GPU 1 minor 0, so that only the mapping gives the right node; GPU 0's
# PCI device is on NUMA node 1, GPU 1's on none (-1)
for bus, u, minor, numa in (("0000:01:00.0", probed[0], 1, 1), ("0000:02:00.0", probed[1], 0, -1)):
    os.makedirs(os.path.join(T, "proc", bus))
    with open(os.path.join(T, "proc", bus, "information"), "w") as f:
        f.write("Model: \t\t Simulated\nGPU UUID: \t %s\nBus Type: \t PCIe\nDevice Minor: \t %d\n" % (u, minor))
    os.makedirs(os.path.join(T, "pci", bus))
    with open(os.path.join(T, "pci", bus, "numa_node"), "w") as f:
        f.write("%d\n" % numa)

# ---- 1. registration: the plugin waits for the kubelet, then registers one resource per class ---------------
kubelet = Kubelet(KDIR)
plugin = start_plugin()
time.sleep(0.5)
ok(plugin.poll() is None, "the plugin waits for a kubelet that is not there yet")
kubelet.start()
regs = kubelet.wait_registrations(3, 10)
names = sorted(r.resource_name for r in regs)
ok(names == ["rota.io/gpu-mem-high", "rota.io/gpu-mem-low", "rota.io/gpu-mem-normal"],
   "the plugin registers rota.io/gpu-mem-{high,normal,low} (%s)" % names)
ok(all(r.version == "v1beta1" and r.endpoint == "rota-%s.sock" % r.resource_name.rsplit("-", 1)[1] and
       r.options.get_preferred_allocation_available and not r.options.pre_start_required for r in regs),
   "each with version v1beta1, its own endpoint and GetPreferredAllocation")
if len(regs) < 3:
    bail("no registration")
ch, normal = kubelet.plugin("rota-normal.sock")
_, high = kubelet.plugin("rota-high.sock")
opts = normal.GetDevicePluginOptions(pb.Empty(), timeout=5)
ok(opts.get_preferred_allocation_available and not opts.pre_start_required, "GetDevicePluginOptions agrees")

# ---- 2. devices and health -----------------------------------------------------------------------------------
w = Watch(normal)
lst = w.wait(lambda l: len(l) == 8 and all(h == "Healthy" for _, h in l), 10)
ok(lst is not None, "ListAndWatch: 2 GPUs of 4G in units of 1G: 8 devices, all healthy")
if lst is None:
    bail("no device list: %s" % (w.lists[-1:] or w.ended))
uuids = []
for i, _ in lst:
    u = i.split("::")[0]
    if u not in uuids:
        uuids.append(u)
ok(uuids == probed and [i for i, _ in lst] == ["%s::%d" % (u, k) for u in uuids for k in range(4)],
   "device IDs are GPU-<uuid>::<k>, the GPUs rotad probed (%s)" % lst[0][0])
topo = {i: t for i, t in w.topology}
ok(all(topo.get(i) == ([1] if i.startswith(probed[0]) else []) for i, _ in lst),
   "each device carries its GPU's NUMA node (GPU 0: node 1; GPU 1: none known): %s"
   % sorted(set((i.split("::")[0][:12], tuple(t)) for i, t in w.topology)))
U0, U1 = uuids
stop(rotad)
lst = w.wait(lambda l: len(l) == 8 and all(h == "Unhealthy" for _, h in l), 10)
ok(lst is not None, "rotad stops: ListAndWatch sends the 8 devices unhealthy")
e = rpc_error(lambda: alloc(normal, U0 + "::0"))
ok(e is not None and e.code() == grpc.StatusCode.UNAVAILABLE and "rotad does not serve" in e.details(),
   "Allocate while rotad is down is refused: %s" % (e and e.details()))
rotad = start_rotad()
lst = w.wait(lambda l: len(l) == 8 and all(h == "Healthy" for _, h in l), 10)
ok(lst is not None, "rotad starts again: the devices are healthy again")

# ---- 3. the kubelet restarts: the plugin serves and registers again ------------------------------------------
kubelet.refuse = 3  # and refuses the first three registrations: the plugin keeps trying
kubelet.restart()
ok(w.wait_end(10) is not None, "the old ListAndWatch stream ends with the kubelet (%s)" % w.ended)
regs = kubelet.wait_registrations(6, 10)
ok(len(regs) == 6 and sorted(r.resource_name for r in regs[3:]) == names and kubelet.refused == 3,
   "after a kubelet restart the plugin registers its 3 resources again, trying again when refused")
ch.close()
ch, normal = kubelet.plugin("rota-normal.sock")
_, high = kubelet.plugin("rota-high.sock")
_, low = kubelet.plugin("rota-low.sock")
w = Watch(normal)
ok(w.wait(lambda l: len(l) == 8 and all(h == "Healthy" for _, h in l), 10) is not None,
   "ListAndWatch on the new endpoint: 8 healthy devices")

# ---- 4. Allocate: what `rota run` sets up, for the runtime to apply -------------------------------------------
r = alloc(high, U0 + "::0")
c = r.container_responses[0]
want_env = {"LD_PRELOAD": CLIB, "ROTA_SOCKET": CSOCK, "ROTA_PRIORITY": "high", "ROTA_MEM_LIMIT": str(G),
            "CUDA_VISIBLE_DEVICES": U0, "ROTA_GPU": "0", "NVIDIA_VISIBLE_DEVICES": U0,
            "ROTA_GRANT": c.envs.get("ROTA_GRANT", "")}
ok(dict(c.envs) == want_env and re.fullmatch("[0-9a-f]{32}", want_env["ROTA_GRANT"]),
   "Allocate(high, 1 unit): librota, class high, limit 1G, its GPU, its grant's token (%s)" % dict(c.envs))
mounts = sorted((m.container_path, m.host_path, m.read_only) for m in c.mounts)
ok(mounts == sorted([(CLIB, os.path.join(BUILD, "lib", "librota.so"), True), (os.path.dirname(CSOCK),
                                                                              os.path.dirname(S), True)]),
   "mounts: librota.so and rotad's socket folder, read-only (%s)" % mounts)
devs = sorted((d.container_path, d.host_path, d.permissions) for d in c.devices)
ok(devs == sorted([("/dev/nvidia1", os.path.join(T, "dev", "nvidia1"), "rw"),
                   ("/dev/nvidiactl", os.path.join(T, "dev", "nvidiactl"), "rw"),
                   ("/dev/nvidia-uvm", os.path.join(T, "dev", "nvidia-uvm"), "rw")]),
   "devices: the GPU's own node (by the driver's minor) and the driver's shared ones, by host path (%s)" % devs)

p = container("check", c, ["/bin/sh", "-c", "test -c /dev/nvidia1 && test ! -e /dev/nvidia0 && test -c "
                           "/dev/nvidiactl && test -r %s && test -S %s" % (CLIB, CSOCK)])
ok(p.wait(30) == 0, "in the container: its GPU's node and no other, librota.so and rotad's socket mounted")
a = container("a", c, workload("a", "512M", 12))
ca = wait_client(lambda x: x["priority"] == "high" and x["limit"] == G)
ok(ca is not None, "container A runs on simcuda under rotad: class high, limit 1G")
if ca:
    environ = dict(kv.split("=", 1) for kv in open("/proc/%d/environ" % ca["pid"]).read().split("\0") if kv)
    ok(environ == dict(IMAGE_ENV, **want_env), "its environment is exactly the image's plus the response's")

# GetPreferredAllocation asks rotad: A (high) runs on GPU 0, so a normal container goes to GPU 1, though every
# normal unit is free (without rotad the first GPU with the most units would be chosen: GPU 0)
allids = [i for i, _ in lst] if lst else []
pr = normal.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
    pb.ContainerPreferredAllocationRequest(available_deviceIDs=allids, allocation_size=2)]), timeout=10)
pick = list(pr.container_responses[0].deviceIDs)
ok(len(pick) == 2 and all(i.startswith(U1 + "::") for i in pick),
   "GetPreferredAllocation: 2 units on one GPU, where rotad places it (away from A): %s" % pick)
pr = normal.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
    pb.ContainerPreferredAllocationRequest(available_deviceIDs=allids, must_include_deviceIDs=[U0 + "::3"],
                                           allocation_size=3)]), timeout=10)
pick = list(pr.container_responses[0].deviceIDs)
ok(len(pick) == 3 and U0 + "::3" in pick and all(i.startswith(U0 + "::") for i in pick),
   "GetPreferredAllocation keeps a must-include ID and its GPU: %s" % pick)

# B runs within its 1G limit (class normal); B2, with the same response, asks for 2G: rotad refuses what is past
# the limit (after ROTA_MEM_WAIT), and the workload sees out of memory, though the 4G GPU has room for it
r = alloc(normal, U1 + "::1")
b = container("b", r.container_responses[0], workload("b", "512M", 8))
cb = wait_client(lambda x: x["priority"] == "normal" and x["limit"] == G)
ok(cb is not None, "container B runs under rotad: class normal, limit 1G")
b2 = container("b2", r.container_responses[0], workload("b2", "2G", 6))
rc = b2.wait(60)
rec = {}
try:
    rec = json.load(open(os.path.join(T, "b2.out.json")))
except (OSError, ValueError):
    pass
ok(rc == 3 and rec.get("status") == "crashed: OOM",
   "B2's 2G past its 1G limit is refused as out of memory (exit %s, %s)" % (rc, rec.get("status")))
ok(b.wait(60) == 0, "container B finishes its work (exit %s)" % b.returncode)
ok(a.wait(60) == 0, "container A finishes its work (exit %s)" % a.returncode)

# The class and limit reach rotad from the plugin (a GRANT keyed by the token in ROTA_GRANT, bound to the
# container's cgroup at its first registration), not from the container's environment, which it can change.
r = alloc(normal, U1 + "::2")
if PODS:
    wl = " ".join(workload("e", "512M", 4))
    e = container("e", r.container_responses[0], ["/bin/sh", "-c", "ROTA_PRIORITY=high ROTA_MEM_LIMIT=0 exec " + wl])
    ce = wait_client(lambda x: x["pid"] == e.pid)
    ok(ce is not None and ce["priority"] == "normal" and ce["limit"] == G,
       "container E sets ROTA_PRIORITY=high and ROTA_MEM_LIMIT=0 itself: it still runs at its pod's class and limit "
       "(normal, 1G: %s)" % ce)
    ok(e.wait(60) == 0, "container E finishes its work (exit %s)" % e.returncode)
    f = container("f", r.container_responses[0], ["/bin/sh", "-c", "unset ROTA_GRANT; ROTA_PRIORITY=high "
                                                  "ROTA_MEM_LIMIT=0 exec " + " ".join(workload("f", "512M", 4))])
    rc = f.wait(60)
    log = open(os.path.join(T, "rotad.log")).read()
    ok(rc == 3 and re.search(r"pid %d uid [0-9]+.*has no grant under a grant-required cgroup" % f.pid, log),
       "container F drops its token too: under grant-required it runs with no memory, its allocation refused as out "
       "of memory (exit %s)" % rc)
else:
    for _ in range(3):
        ok(True, "# SKIP no writable cgroup v2 hierarchy: containers cannot have cgroups of their own")

# ---- 5. bad input: clear errors, nothing leaked, the plugin keeps serving --------------------------------------
for ids, want, label in (([ "GPU-00000000-0000-0000-0000-000000000000::0"], "unknown device ID", "an unknown GPU"),
                         ([U0 + "::4"], "unknown device ID", "a unit past the GPU's 4"),
                         ([U0 + "::x"], "unknown device ID", "a malformed ID"),
                         ([U0 + "::1", U0 + "::1"], "given twice", "an ID twice"),
                         ([U0 + "::%d" % k for k in range(4)] + [U1 + "::0"], "must be on one GPU",
                          "5 units, more than a GPU has")):
    e = rpc_error(lambda: alloc(normal, *ids))
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and want in e.details(),
       "Allocate of %s is refused: %s" % (label, e and e.details()))
pr = normal.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
    pb.ContainerPreferredAllocationRequest(available_deviceIDs=allids + ["junk"], allocation_size=5)]), timeout=10)
pick = list(pr.container_responses[0].deviceIDs)
ok(len(pick) == 5 and "junk" not in pick, "GetPreferredAllocation of 5: the best it can, no unknown ID (%s)" % pick)

# kubelets that vanish mid-stream (killed while ListAndWatch is open): no thread or descriptor kept
base = tasks(plugin.pid)
kid = ("import sys, grpc; sys.path.insert(0, %r); import api_pb2 as pb, api_pb2_grpc as g\n"
       "s = g.DevicePluginStub(grpc.insecure_channel('unix://%s'))\n"
       "for r in s.ListAndWatch(pb.Empty()): print(len(r.devices), flush=True)\n"
       % (os.path.join(T, "py"), os.path.join(KDIR, "rota-normal.sock")))
for _ in range(8):
    k = subprocess.Popen([sys.executable, "-c", kid], stdout=subprocess.PIPE, text=True)
    k.stdout.readline()
    k.kill()
    k.wait()
time.sleep(2)
after = tasks(plugin.pid)
ok(after[0] <= base[0] + 2 and after[1] <= base[1] + 2,
   "8 kubelets killed mid-stream: threads %d -> %d, descriptors %d -> %d" % (base[0], after[0], base[1], after[1]))
r = alloc(low, U1 + "::2")
ok(r.container_responses[0].envs["ROTA_PRIORITY"] == "low", "and the plugin still serves an Allocate")
w.cancel()

# ---- 6. CDI: the same as CDI devices, applied from the spec the plugin writes -----------------------------------
ok(stop(plugin) == 0, "the plugin exits 0 on SIGTERM")
left = sorted(f for f in os.listdir(KDIR) if f != "kubelet.sock")
ok(left == [], "and leaves no socket behind (%s)" % left)
plugin = start_plugin("--cdi-dir", os.path.join(T, "cdi"), "--cdi-driver-kind", "", "--classes", "low")
regs = kubelet.wait_registrations(7, 10)
ok(len(regs) == 7 and regs[6].resource_name == "rota.io/gpu-mem-low", "--classes low: one resource registered")
_, low = kubelet.plugin("rota-low.sock")
w = Watch(low)
ok(w.wait(lambda l: len(l) == 8 and all(h == "Healthy" for _, h in l), 10) is not None,
   "its 8 devices are healthy")
spec = {}
try:
    spec = json.load(open(os.path.join(T, "cdi", "rota.io-gpu.json")))
except (OSError, ValueError) as ex:
    diag(ex)
ok(spec.get("cdiVersion") == "0.6.0" and spec.get("kind") == "rota.io/gpu" and
   [d["name"] for d in spec.get("devices", [])] == [U0, U1], "the CDI spec names both GPUs (rota.io/gpu)")
r = alloc(low, U1 + "::0", U1 + "::1")
c = r.container_responses[0]
ok([x.name for x in c.cdi_devices] == ["rota.io/gpu=" + U1] and
   dict(c.envs) == {"ROTA_PRIORITY": "low", "ROTA_MEM_LIMIT": str(2 * G), "ROTA_GRANT": c.envs.get("ROTA_GRANT")}
   and re.fullmatch("[0-9a-f]{32}", c.envs.get("ROTA_GRANT", "")) and not c.mounts and not c.devices,
   "Allocate(low, 2 units) with --cdi-dir: the CDI device and the class and limit (%s %s)"
   % ([x.name for x in c.cdi_devices], dict(c.envs)))
p = container("check2", c, ["/bin/sh", "-c", "test -c /dev/nvidia0 && test ! -e /dev/nvidia1 && test -r %s && "
                            "test -S %s && test \"$CUDA_VISIBLE_DEVICES\" = %s" % (CLIB, CSOCK, U1)],
              cdi_dir=os.path.join(T, "cdi"))
ok(p.wait(30) == 0, "the runtime applies the CDI spec: GPU 1's node, librota.so, rotad's socket, its GPU")
cc = container("c", c, workload("c", "256M", 4), cdi_dir=os.path.join(T, "cdi"))
ok(wait_client(lambda x: x["priority"] == "low" and x["limit"] == 2 * G) is not None,
   "container C (CDI) runs under rotad: class low, limit 2G")
ok(cc.wait(60) == 0, "container C finishes (exit %s)" % cc.returncode)
w.cancel()
ok(stop(plugin) == 0, "the plugin with --cdi-dir exits 0 on SIGTERM too")

# ---- 7. a malformed configuration: one clear message, nothing started ------------------------------------------
for args, rc, want in ((["--unit", "1.5G"], 2, "--unit '1.5G': expected a size"),
                       (["--classes", "high,urgent"], 2, "--classes 'high,urgent': expected distinct classes"),
                       (["--resource-prefix", "kubernetes.io/gpu"], 2, "--resource-prefix 'kubernetes.io/gpu'"),
                       (["--poll-ms", "5"], 2, "--poll-ms '5'"),
                       (["--bogus"], 2, "unknown option '--bogus'"),
                       (["--kubelet-dir", os.path.join(T, "nowhere")], 1, "unable to use --kubelet-dir")):
    out = subprocess.run(plugin_args(*args), env=ENV, capture_output=True, text=True, timeout=20)
    ok(out.returncode == rc and ("rota-device-plugin: fatal: " + want) in out.stderr,
       "%s: exit %d, '%s' (%d: %s)" % (" ".join(args), rc, want, out.returncode, out.stderr.strip()[:200]))

kubelet.stop()
stop(rotad)
cleanup()
print("1..%d" % n)
sys.exit(1 if failed else 0)
