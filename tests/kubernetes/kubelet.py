# kubelet.py - the stand-in kubelet of tests/kubernetes: the kubelet's side of the Device Plugin API (v1beta1),
# over grpcio (PyPI) from contrib/kubernetes/api.proto. It serves Registration on kubelet.sock, records each
# RegisterRequest, talks to a plugin's endpoint (ListAndWatch in a thread, the other calls directly), and
# restarts as a kubelet does: a new kubelet.sock, and the plugins' sockets in its folder removed.
import os, threading, time
from concurrent import futures

import grpc

import api_pb2 as pb
import api_pb2_grpc as pbg


class _Registration(pbg.RegistrationServicer):
    def __init__(self, k):
        self.k = k

    def Register(self, req, ctx):
        with self.k.cv:
            if self.k.refuse > 0:  # as a kubelet busy with a plugin of the same name
                self.k.refuse -= 1
                self.k.refused += 1
                ctx.abort(grpc.StatusCode.ALREADY_EXISTS, "another plugin is registered for %s" % req.resource_name)
        # what the kubelet checks before it accepts: the API version and an endpoint socket that exists
        if req.version != "v1beta1":
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported API version %s" % req.version)
        if not os.path.exists(os.path.join(self.k.dir, req.endpoint)):
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "no endpoint %s" % req.endpoint)
        with self.k.cv:
            self.k.registrations.append(req)
            self.k.cv.notify_all()
        return pb.Empty()


class Kubelet:
    def __init__(self, dirpath):
        self.dir = dirpath
        self.sock = os.path.join(dirpath, "kubelet.sock")
        self.cv = threading.Condition()
        self.registrations = []
        self.refuse = 0   # refuse that many Register calls, then accept
        self.refused = 0
        self.server = None

    def start(self):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pbg.add_RegistrationServicer_to_server(_Registration(self), self.server)
        self.server.add_insecure_port("unix://" + self.sock)
        self.server.start()

    def stop(self):
        if self.server:
            self.server.stop(0).wait()
            self.server = None
        if os.path.exists(self.sock):
            os.unlink(self.sock)

    def restart(self):
        """As a kubelet starting again: its socket anew, every plugin socket in the folder removed."""
        self.stop()
        for f in os.listdir(self.dir):
            if f.endswith(".sock"):
                os.unlink(os.path.join(self.dir, f))
        self.start()

    def wait_registrations(self, n, timeout):
        """Waits until n RegisterRequests have come in all; returns them all."""
        end = time.time() + timeout
        with self.cv:
            while len(self.registrations) < n and time.time() < end:
                self.cv.wait(0.1)
            return list(self.registrations)

    def plugin(self, endpoint):
        ch = grpc.insecure_channel("unix://" + os.path.join(self.dir, endpoint))
        return ch, pbg.DevicePluginStub(ch)


class Watch:
    """One ListAndWatch stream, read in a thread: every list received, in order, and whether the stream ended."""

    def __init__(self, stub):
        self.cv = threading.Condition()
        self.lists = []
        self.topology = []  # the latest list's (ID, [NUMA node IDs])
        self.ended = None
        self.call = stub.ListAndWatch(pb.Empty())
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            for r in self.call:
                with self.cv:
                    self.lists.append([(d.ID, d.health) for d in r.devices])
                    self.topology = [(d.ID, [n.ID for n in d.topology.nodes]) for d in r.devices]
                    self.cv.notify_all()
            end = "closed"
        except grpc.RpcError as e:
            end = e.code().name
        with self.cv:
            self.ended = end
            self.cv.notify_all()

    def wait(self, pred, timeout):
        """Waits until the latest list satisfies pred; returns it (None on timeout)."""
        end = time.time() + timeout
        with self.cv:
            while time.time() < end:
                if self.lists and pred(self.lists[-1]):
                    return self.lists[-1]
                self.cv.wait(0.1)
        return None

    def wait_end(self, timeout):
        end = time.time() + timeout
        with self.cv:
            while self.ended is None and time.time() < end:
                self.cv.wait(0.1)
            return self.ended

    def cancel(self):
        self.call.cancel()
