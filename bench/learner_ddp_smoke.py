"""Two-rank torchrun (gloo, CPU) smoke run of `slca learn`: ranks consume disjoint groups, rank 0 publishes.

Run: python bench/learner_ddp_smoke.py (needs redis-server and the tiny model)."""
import os, random, subprocess, sys, tempfile, json
from pathlib import Path
import redis
from slca.redis_server import RedisServer
from slca.contracts import encode_entry
from learner.bench import synthetic_group
tmp = Path(tempfile.mkdtemp())
srv = RedisServer(tmp / "redis").start()
try:
    c = redis.Redis.from_url(srv.url)
    rng = random.Random(0)
    for i in range(4):
        g = synthetic_group(rng, 4, 32, 16, 49152, i)
        c.xadd("slca:groups", encode_entry(g, id=g.group_id))
    env = {**os.environ, "SLCA_REDIS_URL": srv.url, "SLCA_DATA_DIR": str(tmp), "SLCA_MODEL": "tiny", "OMP_NUM_THREADS": "1",
           "SLCA_LEARNER__PRECISION": "fp32", "SLCA_LEARNER__BLOCK_MS": "100", "PYTHONPATH": os.getcwd()}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "slca", "learn", "--max-steps", "2"],
                       env=env, cwd=tmp, capture_output=True, text=True, timeout=600)
    print("rc", r.returncode); print(r.stdout[-1500:]); print(r.stderr[-3000:])
    for rank in (0, 1):
        st = json.loads((tmp / "learner" / f"rank{rank}" / "checkpoints" / (tmp / "learner" / f"rank{rank}" / "checkpoints" / "LATEST").read_text().strip() / "state.json").read_text())
        print(rank, st["step"], st["version"], st["consumed"])
    print(c.get("slca:weights:latest")[:200])
finally:
    srv.kill()
