"""One process of a two-process ``vidax serve`` under jax.distributed (gloo on CPU), with a recording stand-in pipe.

  python serve_multihost.py PROCESS_ID COORDINATOR_PORT OUT_DIR

Process 0 serves HTTP on a free port and is its own client: a job that completes, a long job cancelled mid-run by a
DELETE, one more job; then it stops the server. Process 1 follows. Each writes OUT_DIR/calls-<id>.json: the calls
its pipe made (keywords, cancel checks seen, how each ended) for the test to compare.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402

from serve_stub import TINY, StubPipe, post_json, request, wait_done  # noqa: E402
from vidax_core.serve import Server, multihost  # noqa: E402
from vidax_core.errors import Cancelled  # noqa: E402

pid, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=pid)
calls = []


class Recording(StubPipe):
    def __call__(self, on_progress=None, cancel=None, **kw):
        checks = []

        def counted():
            checks.append(bool(cancel()))
            return checks[-1]

        record = {"kwargs": {k: v for k, v in kw.items() if k != "image"}, "checks": checks}
        calls.append(record)
        try:
            result = super().__call__(on_progress=on_progress, cancel=counted, **kw)
            record["end"] = "done"
            return result
        except Cancelled:
            record["end"] = "cancelled"
            raise


pipe = Recording(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "demo.yaml"), *TINY, step_s=0.02)
if pid == 0:
    srv = Server(pipe, port=0, output_dir=os.path.join(out, "videos"), quiet=True,
                 runner=multihost.LeaderRunner(pipe, idle_s=0.5)).start()
    status, a = post_json(srv.url, {"prompt": "first", "num_steps": 3, "seed": 5})
    assert wait_done(srv.url, a["id"])["status"] == "completed"
    time.sleep(1.6)  # the queue idles long enough for three heartbeats
    status, b = post_json(srv.url, {"prompt": "long", "num_steps": 2000})
    while json.loads(request(srv.url, "GET", f"/v1/videos/{b['id']}")[2])["progress"] < 1:
        time.sleep(0.05)
    assert request(srv.url, "DELETE", f"/v1/videos/{b['id']}")[0] == 200
    status, c = post_json(srv.url, {"prompt": "after", "num_steps": 2, "size": "48x32"})
    assert wait_done(srv.url, c["id"])["status"] == "completed"
    srv.close()
else:
    multihost.follow(pipe, os.path.join(out, "follower"))
with open(os.path.join(out, f"calls-{pid}.json"), "w") as f:
    json.dump(calls, f)
