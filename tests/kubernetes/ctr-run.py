#!/usr/bin/env python3
# ctr-run.py - the stand-in container runtime of tests/kubernetes: applies what the kubelet hands a runtime for
# one container (the device plugin's Allocate response, or the CDI devices it names) and execs the command.
#
#   unshare -m --propagation private -- python3 ctr-run.py SPEC.json
#
# SPEC: {"image_env": {...}, "envs": {...}, "mounts": [{container_path, host_path, read_only}],
#        "devices": [{container_path, host_path, permissions}], "cdi_dir": DIR, "cdi_devices": [NAME...],
#        "devroot": DIR (an empty folder for the container's /dev), "cgroup": DIR (optional: the container's cgroup
#        v2 folder, which it enters first), "argv": [...]}
# As runc and containerd do: the environment is the image's, then the container's (here the response's envs, then
# the CDI edits'); each mount is a bind mount (remounted read-only where asked); /dev is a fresh tmpfs with the
# usual nodes, /dev/shm (simcuda's node lives there) and exactly the devices asked for, made with the host
# nodes' numbers. It runs in a private mount namespace, so nothing outside the test's folder changes.
import glob, json, os, stat, subprocess, sys


def die(msg):
    sys.stderr.write("ctr-run: fatal: %s\n" % msg)
    sys.exit(125)


def sh(*argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        die("%s: %s" % (" ".join(argv), r.stderr.strip()))


def cdi_edits(spec):
    """The CDI devices' edits, as a runtime resolves them: every spec in cdi_dir, by kind; an unknown device fails."""
    specs = {}
    for f in sorted(glob.glob(os.path.join(spec["cdi_dir"], "*.json"))):
        with open(f) as fh:
            s = json.load(fh)
        specs[s["kind"]] = s
    env, mounts, nodes, done = [], [], [], set()
    for name in spec.get("cdi_devices", []):
        kind, _, dev = name.partition("=")
        s = specs.get(kind)
        d = [x for x in s["devices"] if x["name"] == dev] if s else []
        if not d:
            die("unresolvable CDI device %s" % name)
        edits = [d[0]["containerEdits"]]
        if kind not in done:
            edits.insert(0, s.get("containerEdits", {}))
            done.add(kind)
        for e in edits:
            env += e.get("env", [])
            mounts += [{"container_path": m["containerPath"], "host_path": m["hostPath"],
                        "read_only": "ro" in m.get("options", [])} for m in e.get("mounts", [])]
            nodes += [{"container_path": n["path"], "host_path": n.get("hostPath", n["path"]),
                       "permissions": n.get("permissions", "rwm")} for n in e.get("deviceNodes", [])]
    return dict(kv.split("=", 1) for kv in env), mounts, nodes


def main():
    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    if spec.get("cgroup"):
        with open(os.path.join(spec["cgroup"], "cgroup.procs"), "w") as fh:
            fh.write("0\n")
    env = dict(spec.get("image_env", {}))
    env.update(spec.get("envs", {}))
    mounts, devices = list(spec.get("mounts", [])), list(spec.get("devices", []))
    if spec.get("cdi_devices"):
        e, m, d = cdi_edits(spec)
        env.update(e)
        mounts += m
        devices += d
    for m in mounts:
        src, dst = m["host_path"], m["container_path"]
        if not os.path.exists(src):
            die("mount source %s does not exist" % src)
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "a").close()
        sh("mount", "--bind", src, dst)
        if m.get("read_only"):
            sh("mount", "-o", "remount,bind,ro", dst)
    root = spec["devroot"]
    os.makedirs(root, exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", "mode=755", "ctr-dev", root)
    for n in ("null", "zero", "full", "random", "urandom", "tty"):
        st = os.stat("/dev/" + n)
        os.mknod(os.path.join(root, n), 0o666 | stat.S_IFCHR, st.st_rdev)
    os.mkdir(os.path.join(root, "shm"))
    sh("mount", "--bind", "/dev/shm", os.path.join(root, "shm"))
    for d in devices:
        st = os.stat(d["host_path"])
        if not stat.S_ISCHR(st.st_mode):
            die("device %s is not a character device" % d["host_path"])
        if not d["container_path"].startswith("/dev/"):
            die("device path %s is not under /dev" % d["container_path"])
        p = os.path.join(root, d["container_path"][5:])
        os.makedirs(os.path.dirname(p), exist_ok=True)
        mode = (0o444 if "r" in d["permissions"] else 0) | (0o222 if "w" in d["permissions"] else 0)
        os.mknod(p, mode | stat.S_IFCHR, st.st_rdev)
    sh("mount", "--move", root, "/dev")
    argv = spec["argv"]
    try:
        os.execve(argv[0], argv, env)
    except OSError as e:
        die("unable to exec %s: %s" % (argv[0], e))


main()
