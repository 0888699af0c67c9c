#!/usr/bin/env python3
"""examples/kubernetes, checked two ways.

1. Schemas: every object against Kubernetes' own OpenAPI schemas (kubernetes-validate, strict:
   an unknown field fails). The MPIJob is a custom resource whose schema kubernetes-validate
   does not carry: its fields are checked against mpi-operator v2beta1's spec as documented,
   and its launcher and worker pod templates against Kubernetes' PodTemplate schema.
2. The commands: the pods' shell commands run as processes on this host with the manifests'
   paths, ports and DNS name mapped to a scratch directory and loopback (a ConfigMap's files,
   the Secret's files with mode 0400, the shared volume). serve.yaml: the scheduler pod and two
   node pods; submitted jobs finish; SIGTERM (a pod deleted) drains every process with exit 0;
   the scheduler pod started again resumes from the journal. mpijob.yaml: the launcher's
   command under mpirun on this host, its ConfigMap's jobs finished.

usage: test_manifests.py TESSERA_BINARY [KUBERNETES_VALIDATE_PYTHON]
Exit 77 (skipped) when neither this Python nor the tools venv of scripts/install-deps.sh can
import kubernetes_validate (PyPI unreachable when it ran), or mpirun is missing for part 2;
the reason is printed first.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "kubernetes")
TOOLS = os.environ.get("TESSERA_TOOLS_VENV",
                       os.path.expanduser("~/.cache/tessera/tools-venv"))
K8S_VERSION = "1.37.0"

# mpi-operator v2beta1's MPIJob fields (kubeflow/mpi-operator, pkg/apis/kubeflow/v2beta1).
MPIJOB_SPEC = {"slotsPerWorker", "runPolicy", "mpiImplementation", "sshAuthMountPath",
               "launcherCreationPolicy", "mpiReplicaSpecs", "runLauncherAsWorker"}
RUN_POLICY = {"cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
              "backoffLimit", "schedulingPolicy", "suspend", "managedBy"}
REPLICA_SPEC = {"replicas", "template", "restartPolicy"}


def scale():
    try:
        return max(1.0, min(100.0, float(os.environ.get("TESSERA_TEST_TIME_SCALE", "1"))))
    except ValueError:
        return 1.0


def load_validator():
    """kubernetes_validate from this Python, else through the tools venv's Python."""
    try:
        import kubernetes_validate  # noqa: F401
        return None
    except ImportError:
        py = os.path.join(TOOLS, "bin", "python")
        ok = os.path.exists(py) and subprocess.run(
            [py, "-c", "import kubernetes_validate"], capture_output=True).returncode == 0
        if not ok:
            print("SKIPPED: kubernetes_validate is not importable here nor in %s "
                  "(scripts/install-deps.sh installs it from PyPI)" % TOOLS)
            sys.exit(77)
        return py


def documents(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def check_mpijob(doc, validate):
    spec = doc["spec"]
    assert doc["apiVersion"] == "kubeflow.org/v2beta1", doc["apiVersion"]
    assert set(spec) <= MPIJOB_SPEC, set(spec) - MPIJOB_SPEC
    assert set(spec.get("runPolicy", {})) <= RUN_POLICY, spec["runPolicy"]
    assert spec.get("mpiImplementation") in ("OpenMPI", "Intel", "MPICH")
    replicas = spec["mpiReplicaSpecs"]
    assert set(replicas) == {"Launcher", "Worker"}, set(replicas)
    for role, rs in replicas.items():
        assert set(rs) <= REPLICA_SPEC, (role, set(rs) - REPLICA_SPEC)
        validate({"apiVersion": "v1", "kind": "PodTemplate",
                  "metadata": {"name": "%s-%s" % (doc["metadata"]["name"], role.lower())},
                  "template": rs["template"]}, "MPIJob %s template" % role)
    assert replicas["Launcher"]["replicas"] == 1


def make_validator(venv_python):
    """validate(obj, what): raises AssertionError naming `what` when the schema refuses it."""
    def validate(obj, what):
        if venv_python is None:
            import kubernetes_validate as kv
            try:
                kv.validate(obj, K8S_VERSION, True)
            except kv.ValidationError as e:
                raise AssertionError("%s: %s" % (what, e))
            return
        r = subprocess.run(
            [venv_python, "-c",
             "import json, sys, kubernetes_validate as kv\n"
             "kv.validate(json.load(sys.stdin), %r, True)" % K8S_VERSION],
            input=json.dumps(obj), text=True, capture_output=True)
        assert r.returncode == 0, "%s: %s" % (what, r.stderr[-2000:])
    return validate


def check_schemas(venv_python):
    validate = make_validator(venv_python)
    checked = 0
    for name in sorted(os.listdir(EXAMPLES)):
        if not name.endswith(".yaml"):
            continue
        for doc in documents(os.path.join(EXAMPLES, name)):
            what = "%s: %s/%s" % (name, doc["kind"], doc["metadata"]["name"])
            if doc["kind"] == "MPIJob":
                check_mpijob(doc, lambda o, w: validate(o, "%s: %s" % (what, w)))
            else:
                validate(doc, what)
            checked += 1
            print("schema ok: %s" % what)
    assert checked >= 8, checked
    # A wrong field must fail, or the checks above prove nothing.
    try:
        validate({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
                  "spec": {"prots": []}}, "a misspelt field")
    except AssertionError:
        print("schema: a misspelt field is refused")
    else:
        raise AssertionError("the validator took a misspelt field")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pods:
    """Pods' commands as processes: the manifests' paths and names mapped onto this host."""

    def __init__(self, binary, root, mounts):
        self.binary, self.root, self.procs = binary, root, []
        self.mounts = mounts  # a pod's mount path -> its folder under root
        self.gate, self.api = free_port(), free_port()
        for d in ("etc", "secrets", "shared"):
            os.makedirs(os.path.join(root, d), exist_ok=True)

    def command(self, text):
        t = text
        for a, b in (("tessera-serve:7000", "127.0.0.1:%d" % self.gate),
                     ("--port 7000", "--port %d" % self.gate),
                     ("--bind 0.0.0.0", "--bind 127.0.0.1"),
                     ("0.0.0.0:8080", "127.0.0.1:%d" % self.api),
                     *[(m, self.root + "/" + d) for m, d in self.mounts.items()],
                     ("exec tessera ", "exec %s " % self.binary),
                     ("-- run", "--oversubscribe --mca btl self,vader -- run")):
            t = t.replace(a, b)
        return t

    def start(self, name, text):
        env = dict(os.environ, POD_NAME=name, OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        out = open(os.path.join(self.root, name + ".out"), "a")
        p = subprocess.Popen(["/bin/sh", "-c", self.command(text)], env=env, stdout=out,
                             stderr=subprocess.STDOUT)
        self.procs.append((name, p))
        return p

    def log(self, name):
        with open(os.path.join(self.root, name + ".out")) as f:
            return f.read()

    def stop_all(self):
        for _, p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def args_of(doc):
    c = doc["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["/bin/sh", "-c"], c["command"]
    return c["args"][0]


def configmap_files(doc, into):
    for fname, text in doc["data"].items():
        with open(os.path.join(into, fname), "w") as f:
            f.write(text)


def tessera(pods, *args):
    r = subprocess.run([pods.binary, *args, "--state-dir", pods.root + "/shared/state",
                        "--token-file", pods.root + "/secrets/token"],
                       capture_output=True, text=True, timeout=60 * scale())
    return r


def status(pods):
    r = tessera(pods, "status", "--json")
    try:
        return json.loads(r.stdout)["jobs"]
    except (ValueError, KeyError):
        return None


def await_true(what, fn, seconds):
    end = time.time() + seconds * scale()
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("%s: not within %.0f s" % (what, seconds * scale()))


def run_serve(binary, root):
    docs = {(d["kind"], d["metadata"]["name"]): d
            for d in documents(os.path.join(EXAMPLES, "serve.yaml"))}
    pods = Pods(binary, root, {"/etc/tessera": "etc", "/secrets": "secrets", "/shared": "shared"})
    try:
        configmap_files(docs[("ConfigMap", "tessera-cluster")], pods.root + "/etc")
        for key in ("secret", "token"):  # `kubectl create secret ... openssl rand -hex 32`
            path = os.path.join(pods.root, "secrets", key)
            with open(path, "w") as f:
                f.write(os.urandom(32).hex())
            os.chmod(path, 0o400)
        serve_cmd = args_of(docs[("StatefulSet", "tessera-serve")])
        node_cmd = args_of(docs[("StatefulSet", "tessera-node")])
        replicas = docs[("StatefulSet", "tessera-node")]["spec"]["replicas"]
        serve = pods.start("tessera-serve-0", serve_cmd)
        await_true("serve's scheduler address", lambda: os.path.exists(
            pods.root + "/shared/state/scheduler"), 30)
        nodes = [pods.start("tessera-node-%d" % i, node_cmd) for i in range(replicas)]
        jobs = os.path.join(pods.root, "jobs.toml")
        with open(jobs, "w") as f:
            for kind, steps in (("mlp", 200), ("softmax_regression", 300), ("mlp", 250)):
                f.write('[[job]]\nkind = "%s"\ntotal_steps = %d\nstep_time = 0.01\n' %
                        (kind, steps))
        r = tessera(pods, "submit", jobs)
        assert r.returncode == 0, r.stdout + r.stderr
        listed = json.loads(tessera(pods, "nodes", "--json").stdout)["nodes"]
        print("serve.yaml: nodes %s" % [(n["name"], n["state"]) for n in listed])
        await_true("3 jobs finished", lambda: (s := status(pods)) and len(s) == 3 and all(
            j["state"] == "finished" for j in s), 120)
        listed = json.loads(tessera(pods, "nodes", "--json").stdout)["nodes"]
        assert [n["state"] for n in listed] == ["alive"] * (1 + replicas), listed
        print("serve.yaml: 3 jobs finished on %d pods" % (1 + replicas))
        # Pods deleted: SIGTERM to each container's process, every one exits 0.
        for p in nodes + [serve]:
            p.send_signal(signal.SIGTERM)
        for name, p in pods.procs:
            rc = p.wait(timeout=60 * scale())
            assert rc == 0, "%s exited %d:\n%s" % (name, rc, pods.log(name)[-3000:])
        print("serve.yaml: SIGTERM, every pod's process exited 0")
        # The scheduler pod comes back (a restart, a new node): its command resumes.
        pods.procs.clear()
        pods.start("tessera-serve-0", serve_cmd)
        await_true("the resumed serve's jobs", lambda: (s := status(pods)) and len(s) == 3, 30)
        assert all(j["state"] == "finished" for j in status(pods))
        assert "resumed" in pods.log("tessera-serve-0"), pods.log("tessera-serve-0")[-2000:]
        print("serve.yaml: the restarted scheduler pod resumed its journal: 3 jobs finished")
    finally:
        pods.stop_all()


def run_mpijob(binary, root):
    docs = {(d["kind"], d["metadata"]["name"]): d
            for d in documents(os.path.join(EXAMPLES, "mpijob.yaml"))}
    pods = Pods(binary, root, {"/etc/tessera": "etc", "/checkpoints": "shared"})
    try:
        configmap_files(docs[("ConfigMap", "tessera-batch")], pods.root + "/etc")
        job = docs[("MPIJob", "tessera-batch")]["spec"]["mpiReplicaSpecs"]
        launcher = job["Launcher"]["template"]["spec"]["containers"][0]["args"][0]
        workers = job["Worker"]["replicas"]
        assert "-np %d " % workers in launcher, launcher
        p = pods.start("launcher", launcher)
        rc = p.wait(timeout=240 * scale())
        assert rc == 0, pods.log("launcher")[-3000:]
        with open(pods.root + "/shared/summary.json") as f:
            jobs = json.load(f)["jobs"]
        assert jobs and all(j["finished"] for j in jobs), jobs
        print("mpijob.yaml: the launcher's run finished %d jobs on %d ranks" %
              (len(jobs), workers))
    finally:
        pods.stop_all()


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(sys.argv[1])
    check_schemas(load_validator())
    if not shutil.which("mpirun"):
        print("SKIPPED: the commands' part needs mpirun (openmpi-bin)")
        return 77
    root = tempfile.mkdtemp(prefix="tessera-k8s-")
    try:
        run_serve(binary, os.path.join(root, "serve"))
        run_mpijob(binary, os.path.join(root, "mpijob"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
