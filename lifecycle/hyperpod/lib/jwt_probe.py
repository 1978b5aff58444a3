"""A 60-second HS256 token for `nobody`, signed with the auth/jwt key in KEY_FILE, written to stdout: what
configure_slurm_auth.sh and attach/enable_slurm_jwt.sh give sinfo to see whether slurmctld accepts the key.

Usage: jwt_probe.py KEY_FILE
"""

import base64
import hashlib
import hmac
import json
import sys
import time


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


with open(sys.argv[1], "rb") as f:
    key = f.read()
now = int(time.time())
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
body = b64(json.dumps({"sun": "nobody", "iat": now, "exp": now + 60}).encode())
sig = b64(hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest())
print(f"{head}.{body}.{sig}")
