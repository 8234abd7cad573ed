"""What every benchmark script needs to run a server beside another: a free loopback port, a
server process started and waited for, a process's resident memory, and its section of
docs/benchmarks.md rewritten."""
import os
import socket
import subprocess
import time


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    """The process's resident set size, from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_ready(port, timeout=600.0, proc=None):
    """Seconds until the server on `port` answers PING; servers load their data before they
    answer, so this is also the restart time. Fails early when `proc` has exited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"server on port {port} not ready after {timeout} s")


def start_server(argv, timeout=20.0):
    """Starts `argv` (redis-server or prefixd-server, with its own options) on a free loopback
    port and returns (process, port) once it answers PING; the process is killed if it does not."""
    port = free_port()
    proc = subprocess.Popen(argv + ["--port", str(port), "--bind", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, timeout, proc)
    except RuntimeError:
        proc.kill()
        proc.wait()
        raise
    return proc, port


def stop_server(proc, timeout=20.0):
    """SIGTERM, then SIGKILL if the process has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def resp(*args):
    """One command as a RESP multibulk; arguments are bytes or anything str() can encode."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def write_doc_section(section, text):
    """Replaces the section of docs/benchmarks.md headed `section` (up to the next `## `) with
    `text`, or appends it."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                        "benchmarks.md")
    doc = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    start = doc.find(section)
    if start >= 0:
        end = doc.find("\n## ", start + len(section))
        doc = doc[:start] + text + (doc[end + 1:] if end >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    open(path, "w").write(doc)
