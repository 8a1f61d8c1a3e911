"""Starting and stopping `temper serve` for the e2e test and the load benchmark: the server picks a free
loopback port (--port 0) and prints it; this waits for that line and for /health."""
import re
import subprocess
import sys
import threading
import time
import urllib.request


class ServeProcess:
    def __init__(self, temper, model, *args, name="smol", timeout=120):
        cmd = [temper, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
               "--served-model-name", name, *args]
        self.name = name
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.log = []
        self.port = None
        ready = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"on http://127\.0\.0\.1:(\d+)/v1", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not ready.wait(timeout) or self.port is None:
            self.proc.kill()
            raise RuntimeError("temper serve did not start:\n" + "".join(self.log))
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("temper serve: /health did not answer")

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def base_url(self):
        return self.url("/v1")

    def stop(self, sig=None, timeout=120):
        """Sends SIGTERM (or `sig`) and returns the exit code."""
        import signal
        if self.proc.poll() is None:
            self.proc.send_signal(sig or signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.reader.join(5)
        return rc

    def dump_log(self):
        sys.stderr.write("".join(self.log))
